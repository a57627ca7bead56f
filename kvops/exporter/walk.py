"""The exporter's series for one Snapshot, in exposition order, told to a Sink.

Written once for the two ways they are written: as prometheus_client families
(kvops.exporter.families: what generate_latest encodes, the reference, and what the naive
exporter of benchmarks/ serves) and as text straight from the snapshot
(kvops.exporter.text_sink: what `kvops exporter` serves). A None value is no series. Which
field feeds which family is the spec's binding (kvops/names.py), read by kvops.binding.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kvops import __version__, binding, names
from kvops.names import MetricSpec, Owner
from kvops.snapshot import (
    CollectorStatus,
    GpuSample,
    Histogram,
    HostSample,
    ProcessMemory,
    Snapshot,
    TargetSample,
)

# A discovered pod's (label, value) pairs: namespace, pod, container (kvops.transport.kubernetes).
PodLabels = tuple[tuple[str, str], ...]


class Sink(Protocol):
    def begin(self, spec: MetricSpec, *, omit_if_empty: bool = False) -> None:
        """Start `spec`'s family: the add() calls up to the next begin() are its series. A
        family that stays empty is written all the same (HELP and TYPE) unless omit_if_empty."""

    def add(self, labels: Sequence[str], value: float | Histogram | None, pod: PodLabels = ()) -> None:
        """One series of the family begun last, `labels` in the spec's order (a tuple where the
        walk can: the text sink keys its kept heads by it); None is none.
        `pod`'s pairs are added where the spec has no label of that name."""

    def add_fields(
        self, samples: list[Any], fields: Fields, bases: list[tuple[str, ...]], pods: list[PodLabels]
    ) -> None:
        """The family begun last's series from `samples`' attributes: for each sample (its
        labels `bases[i]`, its pod's `pods[i]`) and each (split label value, field) of
        `fields` in order, add(base, or base and the split value, getattr(sample, field), pod).
        The same `bases` list, unchanged, for every family of one owner in one walk."""

    def add_keyed(
        self, spec: MetricSpec, samples: list[Any], bases: list[tuple[str, ...]], pods: list[PodLabels]
    ) -> None:
        """The family begun last's series from an open split (`spec`): for each sample, each
        present value of the dict it holds, as binding.values() gives them. `bases` as for
        add_fields."""


# (split label value or None, field name) for each field a family reads from a sample.
Fields = tuple[tuple[str | None, str], ...]


def series_labels(base: tuple[str, ...], split_value: str | tuple[str, str] | None) -> tuple[str, ...]:
    """A series' label values: its owner's, then its split value where it has one (a tier_name
    spec's is two: the tier's kind and its name)."""
    if split_value is None:
        return base
    if isinstance(split_value, tuple):
        return (*base, *split_value)
    return (*base, split_value)


def add_fields_each(
    sink: Sink, samples: list[Any], fields: Fields, bases: list[tuple[str, ...]], pods: list[PodLabels]
) -> None:
    """Sink.add_fields by add() calls, series by series; a None value (no series) is not handed
    on (a histogram family's fields are None on most samples)."""
    for sample, base, pod in zip(samples, bases, pods, strict=True):
        for split_value, field in fields:
            value = getattr(sample, field)
            if value is not None:
                sink.add(series_labels(base, split_value), value, pod)


def add_keyed_each(
    sink: Sink, spec: MetricSpec, samples: list[Any], bases: list[tuple[str, ...]], pods: list[PodLabels]
) -> None:
    """Sink.add_keyed by add() calls, series by series; also an info spec's one series."""
    # An open split's dict is empty on most engines (a connector or tier family the page does
    # not have): skipped without a generator per engine and family.
    keyed = spec.field if spec.open_split else None
    for sample, base, pod in zip(samples, bases, pods, strict=True):
        if keyed is not None and not getattr(sample, keyed):
            continue
        for split_value, value in binding.values(spec, sample):
            sink.add(series_labels(base, split_value), value, pod)


def walk(snap: Snapshot, sink: Sink) -> None:
    walk_targets(snap.targets, sink)
    walk_gpus(snap.gpus, sink)
    if snap.host is not None:
        walk_host(snap.host, sink)
    walk_processes(snap.processes, sink)
    walk_self(snap.collectors, sink)


@functools.cache
def _bound_fields(owner: Owner) -> tuple[tuple[MetricSpec, Fields | None], ...]:
    """Each spec bound to `owner` with its fixed fields (binding.fixed_fields): the same every scrape."""
    return tuple((spec, binding.fixed_fields(spec)) for spec in names.bound(owner))


def walk_bound(owner: Owner, samples: Sequence[Any], sink: Sink, pods: Mapping[str, PodLabels] | None = None,
               omit_if_empty: bool = False) -> None:  # fmt: skip
    """One family per spec bound to `owner`, with every present value of every sample.
    `pods`: by target, for owners whose first label is the target."""
    samples = list(samples)
    bases = [tuple(binding.owner_label_values(owner, sample)) for sample in samples]
    pod_of: list[PodLabels] = [pods.get(base[0], ()) for base in bases] if pods else [()] * len(bases)
    for spec, fields in _bound_fields(owner):
        sink.begin(spec, omit_if_empty=omit_if_empty)
        if fields is not None:
            sink.add_fields(samples, fields, bases, pod_of)
        elif spec.open_split:
            sink.add_keyed(spec, samples, bases, pod_of)
        else:  # an info spec: one series a sample at most
            add_keyed_each(sink, spec, samples, bases, pod_of)


def walk_targets(targets: list[TargetSample], sink: Sink) -> None:
    # A discovered pod's namespace, pod and container on every series of its target (as
    # dcgm-exporter and AMD's device-metrics-exporter label a pod's series).
    pods = {t.target: tuple((k, v) for k, v in t.identity.items() if v) for t in targets if t.identity}
    sink.begin(names.TARGET_UP)
    for t in targets:
        sink.add([t.target], 1.0 if t.up else 0.0, pods.get(t.target, ()))
    sink.begin(names.TARGET_SCRAPE_DURATION)
    for t in targets:
        sink.add([t.target], t.scrape_seconds, pods.get(t.target, ()))
    sink.begin(names.TARGET_UNREAD_FAMILIES)  # issue 42: where a whole page was read
    for t in targets:
        if t.up and t.unread_families is not None:
            sink.add([t.target], float(len(t.unread_families)), pods.get(t.target, ()))
    walk_bound("engine", [e for t in targets for e in t.engines], sink, pods)
    # LMCache families only where an LMCache was seen: no empty HELP/TYPE for every vLLM.
    walk_bound("lmcache", [s for t in targets for s in t.lmcache], sink, pods, omit_if_empty=True)


def walk_gpus(gpus: list[GpuSample], sink: Sink) -> None:
    bases = [(g.index, g.uuid, g.vendor) for g in gpus]
    sink.begin(names.GPU_INFO)
    for g, base in zip(gpus, bases, strict=True):
        sink.add((*base, g.name or "", g.pci_bus_id or ""), 1.0)
    walk_bound("gpu", gpus, sink)
    # Vendor extras and per-process memory are keyed outside the bound fields.
    for spec, key in ((names.GPU_GTT_USED, "gtt_used_bytes"), (names.GPU_GTT_TOTAL, "gtt_total_bytes")):
        sink.begin(spec)
        for g, base in zip(gpus, bases, strict=True):
            sink.add(base, g.extra.get(key))
    sink.begin(names.GPU_PROCESS_MEMORY)
    for g, base in zip(gpus, bases, strict=True):
        for pid, mem in sorted(g.processes.items()):
            sink.add((*base, str(pid)), mem)
    # AMD's combined PCIe bandwidth (issue 45): raw, with its unit; no direction, so no host-link
    sink.begin(names.GPU_AMD_PCIE_BANDWIDTH)
    for g, base in zip(gpus, bases, strict=True):
        for figure, value in sorted(g.amd_pcie_bandwidth.items()):
            sink.add(
                (*base, figure, g.amd_pcie_bandwidth_unit or "unknown", g.amd_metrics_table or ""), value
            )
    # AMD per-link traffic with the peer (issue 45)
    for spec, reads in ((names.GPU_LINK_READ, True), (names.GPU_LINK_WRITE, False)):
        sink.begin(spec)
        for g, base in zip(gpus, bases, strict=True):
            for link, peer, link_type, read, write in g.peer_links:
                sink.add((*base, link, peer, link_type), read if reads else write)
    # Host-link health (issue 45): two labels past the GPU's, so not a bound field.
    sink.begin(names.GPU_HOST_LINK_ERRORS)
    for g, base in zip(gpus, bases, strict=True):
        if g.host_link_kind is not None:
            for counter, count in sorted(g.host_link_errors.items()):
                sink.add((*base, g.host_link_kind, counter), count)


def walk_host(host: HostSample, sink: Sink) -> None:
    walk_bound("host", [host], sink)
    sink.begin(names.HOST_HUGEPAGES)
    if host.hugepage_size_bytes is not None:
        for state, pages in (("total", host.hugepages_total), ("free", host.hugepages_free)):
            sink.add([state], None if pages is None else pages * host.hugepage_size_bytes)
    nodes = sorted(host.numa_nodes.items(), key=lambda kv: int(kv[0]))
    for spec, key in ((names.HOST_NUMA_MEM_TOTAL, "total"), (names.HOST_NUMA_MEM_FREE, "free")):
        sink.begin(spec)
        for node, mem in nodes:
            sink.add([node], mem.get(key))


def walk_processes(procs: list[ProcessMemory], sink: Sink) -> None:
    sink.begin(names.PROCESS_MEMORY)
    for pm in procs:
        for kind, value in (
            ("rss_anon", pm.rss_anon),
            ("rss_shmem", pm.rss_shmem),
            ("locked", pm.locked),
            ("pinned", pm.pinned),
        ):
            sink.add([pm.target, kind], value)
    sink.begin(names.TARGET_GPU_INFO)
    for pm in procs:
        for index, uuid in pm.gpus:
            sink.add([pm.target, index, uuid], 1.0)
    # NUMA placement (issue 45)
    sink.begin(names.PROCESS_NUMA_MEMORY)
    for pm in procs:
        for node, value in sorted(pm.numa_bytes.items(), key=lambda kv: int(kv[0])):
            sink.add([pm.target, node], value)
    sink.begin(names.PROCESS_NUMA_REMOTE)
    for pm in procs:
        sink.add([pm.target], pm.numa_remote_ratio)


def walk_self(statuses: list[CollectorStatus], sink: Sink) -> None:
    sink.begin(names.COLLECTOR_SUCCESS)
    for s in statuses:
        sink.add([s.name], 1.0 if s.success else 0.0)
    sink.begin(names.COLLECTOR_DURATION)
    for s in statuses:
        sink.add([s.name], s.duration_seconds)
    sink.begin(names.BUILD_INFO)
    sink.add([__version__], 1.0)
