"""A `kvops exporter`'s kvops_* exposition read back into a Snapshot.

The inverse of kvops/exporter/families.py and hardware_families.py, name for name (both
sides take the names from kvops.names), so `kvops top` can watch hosts through their
exporters, and the Prometheus fleet source can decode kvops_* series the same way.
An absent series stays None, as in the exporter.
"""

from __future__ import annotations

from collections.abc import Callable

from kvops import names
from kvops.snapshot import EngineSample, GpuSample, HostSample, Snapshot, TargetSample
from kvops.sources.exposition import Labels, ParseResult

# Only the exporter's own names: other kvops_* series (the simulator's kvops_sim_info) do
# not make an exposition an exporter's.
EXPORTED: frozenset[str] = frozenset(spec.name for spec in names.all_specs())

_ENGINE_SCALARS: dict[str, str] = {
    names.KV_CACHE_USAGE.name: "kv_cache_usage",
    names.PREEMPTIONS.name: "preemptions",
    names.REQUESTS_RUNNING.name: "requests_running",
    names.REQUESTS_WAITING.name: "requests_waiting",
    names.CPU_TIER_BYTES.name: "cpu_tier_bytes",
}
# (name, label, label value) -> EngineSample field
_ENGINE_SPLIT: dict[tuple[str, str, str], str] = {
    (names.PREFIX_QUERIES.name, "tier", "local"): "local_queries",
    (names.PREFIX_QUERIES.name, "tier", "external"): "external_queries",
    (names.PREFIX_HITS.name, "tier", "local"): "local_hits",
    (names.PREFIX_HITS.name, "tier", "external"): "external_hits",
    (names.TRANSFER_BYTES.name, "direction", "store"): "store_bytes",
    (names.TRANSFER_BYTES.name, "direction", "load"): "load_bytes",
    (names.TRANSFER_SECONDS.name, "direction", "store"): "store_seconds",
    (names.TRANSFER_SECONDS.name, "direction", "load"): "load_seconds",
}
_GPU_SCALARS: dict[str, str] = {
    names.GPU_MEMORY_USED.name: "memory_used_bytes",
    names.GPU_MEMORY_TOTAL.name: "memory_total_bytes",
    names.GPU_UTILIZATION.name: "utilization",
    names.GPU_PCIE_TX.name: "pcie_tx_bytes",
    names.GPU_PCIE_RX.name: "pcie_rx_bytes",
    names.GPU_PCIE_TX_RATE.name: "pcie_tx_bytes_per_second",
    names.GPU_PCIE_RX_RATE.name: "pcie_rx_bytes_per_second",
    names.GPU_PCIE_LINK_MAX.name: "pcie_link_max_bytes_per_second",
    names.GPU_PCIE_REPLAYS.name: "pcie_replays",
}
_HOST_SCALARS: dict[str, str] = {
    names.HOST_MEM_TOTAL.name: "memory_total_bytes",
    names.HOST_MEM_AVAILABLE.name: "memory_available_bytes",
    names.HOST_MEM_SHMEM.name: "shmem_bytes",
    names.HOST_MEM_MLOCKED.name: "mlocked_bytes",
    names.HOST_MEM_UNEVICTABLE.name: "unevictable_bytes",
    names.HOST_SHM_SIZE.name: "shm_total_bytes",
    names.HOST_SHM_FREE.name: "shm_free_bytes",
}


def is_kvops_name(name: str) -> bool:
    return name in EXPORTED


def has_kvops_samples(result: ParseResult) -> bool:
    """True when the exposition is a kvops exporter's (it has any exporter-named sample)."""
    return any(name in EXPORTED for name in result.samples)


def decode(result: ParseResult, time: float, target_of: Callable[[Labels], str] | None = None) -> Snapshot:
    """Snapshot from kvops_* samples. `target_of` maps a sample's labels to the target it
    belongs to (default: its `target` label); the fleet source uses it to tell apart
    exporters behind one Prometheus."""
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
            found = engines[key] = EngineSample(target=t, model_name=key[1], engine=key[2])
            owner = targets.get(t)
            if owner is None:  # an engine series without its kvops_target_up: still up
                owner = targets[t] = TargetSample(t, up=True)
            owner.engines.append(found)
        return found

    for name, field_name in _ENGINE_SCALARS.items():
        for labels, value in result.get(name):
            setattr(engine(labels), field_name, value)
    for (name, label, label_value), field_name in _ENGINE_SPLIT.items():
        for labels, value in result.get(name):
            if labels.get(label) == label_value:
                setattr(engine(labels), field_name, value)
    snap.targets = list(targets.values())
    snap.gpus = _gpus(result)
    snap.host = _host(result)
    return snap


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
    for name, field_name in _GPU_SCALARS.items():
        for labels, value in result.get(name):
            setattr(gpu(labels), field_name, value)
    for name, prefix in ((names.GPU_PCIE_LINK_GENERATION.name, "pcie_link_gen"),
                         (names.GPU_PCIE_LINK_WIDTH.name, "pcie_link_width")):  # fmt: skip
        for labels, value in result.get(name):
            suffix = "_max" if labels.get("kind") == "max" else ""
            setattr(gpu(labels), prefix + suffix, int(value))
    return list(gpus.values())


def _host(result: ParseResult) -> HostSample | None:
    """One host: the first one's series. Through Prometheus several exporters' hosts arrive
    together, told apart by their scrape labels (instance); their fields must not mix."""
    host = HostSample()
    first: Labels | None = None
    for name, field_name in _HOST_SCALARS.items():
        for labels, value in result.get(name):
            if first is None:
                first = labels
            if labels == first:
                setattr(host, field_name, value)
    return host if first is not None else None
