"""The exporter's families for one Snapshot (kvops.scrape.runner makes the Snapshot)."""

from __future__ import annotations

from prometheus_client.core import Metric

from kvops.exporter.families import self_families, target_families
from kvops.exporter.hardware_families import gpu_families, host_families, process_families
from kvops.snapshot import Snapshot


def render(snap: Snapshot) -> list[Metric]:
    """All families for one snapshot."""
    metrics = target_families(snap.targets)
    metrics += gpu_families(snap.gpus)
    if snap.host is not None:
        metrics += host_families(snap.host)
    metrics += process_families(snap.processes)
    metrics += self_families(snap.collectors)
    return metrics
