"""A `kvops exporter`'s kvops_* exposition read back into a Snapshot.

The inverse of kvops/exporter/walk.py, name for name (both
sides take the names from kvops.names), so `kvops top` can watch hosts through their
exporters, and the Prometheus fleet source can decode kvops_* series the same way.
An absent series stays None, as in the exporter.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from kvops import binding, names
from kvops.exposition.histograms import histograms
from kvops.exposition.parser import Labels, ParseResult
from kvops.names import MetricSpec, Owner
from kvops.snapshot import (
    EngineSample,
    GpuSample,
    HostSample,
    LMCacheSample,
    ProcessMemory,
    Snapshot,
    TargetSample,
)

# Only the exporter's own names: other kvops_* series (the simulator's kvops_sim_info) do
# not make an exposition an exporter's.
EXPORTED: frozenset[str] = frozenset(name for spec in names.all_specs() for name in spec.sample_names)

# Fields the snapshot types as int (the exposition carries floats).
_INT_FIELDS = frozenset(
    {"pcie_link_gen", "pcie_link_gen_max", "pcie_link_width", "pcie_link_width_max", "numa_node"}
)


def _bound_values(result: ParseResult, spec: MetricSpec) -> Iterator[tuple[Labels, Any]]:
    """(labels, value) of one bound family: floats, or Histograms for histogram families."""
    if spec.type == "histogram":
        yield from histograms(result, spec.name)
    else:
        yield from result.get(spec.name)


def _decode_bound(result: ParseResult, owner: Owner, find: Callable[[Labels], Any]) -> None:
    """Every family bound to `owner` into the object `find` returns for a series' labels."""
    for spec in names.bound(owner):
        label = spec.split_label
        as_int = any(f in _INT_FIELDS for f in spec.fields())
        for labels, value in _bound_values(result, spec):
            split_value = labels.get(label) if label else None
            if spec.tier_name and split_value is None:  # an exporter before tier_name: the kind
                split_value = labels.get("tier")
            binding.assign(spec, find(labels), split_value, int(value) if as_int else value)


def has_kvops_samples(result: ParseResult) -> bool:
    """True when the exposition is a kvops exporter's (it has any exporter-named sample)."""
    return any(name in EXPORTED for name in result.samples)


def decode(result: ParseResult, time: float, target_of: Callable[[Labels], str] | None = None) -> Snapshot:
    """Snapshot from kvops_* samples. `target_of` maps a sample's labels to the target it
    belongs to (default: its `target` label); the fleet source uses it to tell apart
    exporters behind one Prometheus. NaN and ±Inf values are unknown: left out, as an absent
    series (an int field such as a PCIe generation cannot hold one)."""
    result.known_only()
    target_of = target_of or (lambda labels: labels.get("target", ""))
    snap = Snapshot(time=time)
    targets: dict[str, TargetSample] = {}
    for labels, value in result.get(names.TARGET_UP.name):
        t = target_of(labels)
        targets[t] = TargetSample(t, up=value == 1.0, error=None if value == 1.0 else "down at the exporter")
    for labels, value in result.get(names.TARGET_SCRAPE_DURATION.name):
        sample = targets.get(target_of(labels))
        if sample is not None:
            sample.scrape_seconds = value

    engines: dict[tuple[str, str, str], EngineSample] = {}

    def engine(labels: Labels) -> EngineSample:
        t = target_of(labels)
        key = (t, labels.get("model_name", ""), labels.get("engine", "0"))
        found = engines.get(key)
        if found is None:
            found = engines[key] = EngineSample(
                target=t,
                model_name=key[1],
                engine=key[2],
                engine_kind=labels.get("engine_kind", "vllm"),
                offload_tier=None,  # kvops_offload_tier_info says, where the engine has one
            )
            owner = targets.get(t)
            if owner is None:  # an engine series without its kvops_target_up: still up
                owner = targets[t] = TargetSample(t, up=True)
            owner.engines.append(found)
        return found

    _decode_bound(result, "engine", engine)

    caches: dict[tuple[str, str, str], LMCacheSample] = {}

    def cache(labels: Labels) -> LMCacheSample:
        t = target_of(labels)
        key = (t, labels.get("model_name", ""), labels.get("worker_id", "0"))
        found = caches.get(key)
        if found is None:
            found = caches[key] = LMCacheSample(target=t, model_name=key[1], worker_id=key[2])
            owner = targets.get(t)
            if owner is None:
                owner = targets[t] = TargetSample(t, up=True)
            owner.lmcache.append(found)
        return found

    _decode_bound(result, "lmcache", cache)
    snap.targets = list(targets.values())
    snap.gpus = _gpus(result)
    snap.host = _host(result)
    snap.processes = _processes(result, target_of)
    return snap


def _processes(result: ParseResult, target_of: Callable[[Labels], str]) -> list[ProcessMemory]:
    """Which GPUs each target's processes use (kvops_target_gpu_info), for the offload
    cross-check; the process memory beside it."""
    procs: dict[str, ProcessMemory] = {}
    for labels, value in result.get(names.TARGET_GPU_INFO.name):
        if value == 1.0:
            pm = procs.setdefault(target_of(labels), ProcessMemory(target_of(labels)))
            pm.gpus.append((labels.get("gpu", ""), labels.get("uuid", "")))
    for labels, value in result.get(names.PROCESS_MEMORY.name):
        attr = labels.get("kind", "")
        if attr in ("rss_anon", "rss_shmem", "locked", "pinned"):
            pm = procs.setdefault(target_of(labels), ProcessMemory(target_of(labels)))
            setattr(pm, attr, value)
    for labels, value in result.get(names.PROCESS_NUMA_MEMORY.name):
        pm = procs.setdefault(target_of(labels), ProcessMemory(target_of(labels)))
        pm.numa_bytes[labels.get("node", "")] = value
    for labels, value in result.get(names.PROCESS_NUMA_REMOTE.name):
        if math.isfinite(value):
            procs.setdefault(target_of(labels), ProcessMemory(target_of(labels))).numa_remote_ratio = value
    return list(procs.values())


def _gpus(result: ParseResult) -> list[GpuSample]:
    gpus: dict[str, GpuSample] = {}

    def gpu(labels: Labels) -> GpuSample:
        uuid = labels.get("uuid", "")
        found = gpus.get(uuid)
        if found is None:
            found = gpus[uuid] = GpuSample(
                index=labels.get("gpu", ""), uuid=uuid, vendor=labels.get("vendor", "")
            )
        return found

    for labels, _ in result.get(names.GPU_INFO.name):
        g = gpu(labels)
        g.name = labels.get("name") or None
        g.pci_bus_id = labels.get("pci_bus_id") or None
    _decode_bound(result, "gpu", gpu)
    return list(gpus.values())


def _host(result: ParseResult) -> HostSample | None:
    """One host: the first one's series. Through Prometheus several exporters' hosts arrive
    together, told apart by their scrape labels (instance); their fields must not mix."""
    host = HostSample()
    first: list[Labels] = []

    def same_host(labels: Labels) -> HostSample:
        if not first:
            first.append(labels)
        return host if labels == first[0] else HostSample()  # another host's: dropped

    _decode_bound(result, "host", same_host)
    return host if first else None
