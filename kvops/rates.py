"""Interval figures from two Snapshots: the one place hit rates and bandwidths are computed.

Counter rules (docs/DESIGN.md, like Prometheus's rate()):
- absent in the first sample, present in the second: created in between, counts from 0;
- lower in the second than in the first: the source restarted, counts from 0;
- absent in the second: unknown (None).
So no figure is ever negative. A ratio with a zero or unknown denominator is None.
"""

from __future__ import annotations

from typing import Any

from kvops.snapshot import EngineSample, GpuSample, Snapshot


def counter_delta(prev: float | None, cur: float | None) -> float | None:
    if cur is None:
        return None
    if prev is None or cur < prev:
        return cur
    return cur - prev


def ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def engine_interval(
    prev: EngineSample | None, cur: EngineSample, wall_seconds: float | None
) -> dict[str, Any]:
    """Figures for one engine. `prev` is None when the engine had no sample before although
    its target was up: every counter was created in between and counts from 0."""

    def delta(field: str) -> float | None:
        return counter_delta(getattr(prev, field) if prev is not None else None, getattr(cur, field))

    d = {f: delta(f) for f in (
        "local_queries", "local_hits", "external_queries", "external_hits",
        "store_bytes", "store_seconds", "load_bytes", "load_seconds", "preemptions",
    )}  # fmt: skip
    return {
        "target": cur.target,
        "model_name": cur.model_name,
        "engine": cur.engine,
        "up": True,
        "kv_cache_usage": cur.kv_cache_usage,
        "local_hit_rate": ratio(d["local_hits"], d["local_queries"]),
        "external_hit_rate": ratio(d["external_hits"], d["external_queries"]),
        "store_bandwidth_bytes_per_second": ratio(d["store_bytes"], d["store_seconds"]),
        "load_bandwidth_bytes_per_second": ratio(d["load_bytes"], d["load_seconds"]),
        "store_offered_bytes_per_second": ratio(d["store_bytes"], wall_seconds),
        "load_offered_bytes_per_second": ratio(d["load_bytes"], wall_seconds),
        "load_store_ratio": ratio(d["load_bytes"], d["store_bytes"]),
        "store_bytes": d["store_bytes"],
        "load_bytes": d["load_bytes"],
        "store_seconds": d["store_seconds"],
        "load_seconds": d["load_seconds"],
        "local_queries": d["local_queries"],
        "external_queries": d["external_queries"],
        "preemptions": d["preemptions"],
        "requests_running": cur.requests_running,
        "requests_waiting": cur.requests_waiting,
        "cpu_tier_bytes": cur.cpu_tier_bytes,
    }


# Keys of engine_interval() that describe the interval (the rest are the current state).
INTERVAL_FIELDS = (
    "local_hit_rate", "external_hit_rate", "store_bandwidth_bytes_per_second",
    "load_bandwidth_bytes_per_second", "store_offered_bytes_per_second",
    "load_offered_bytes_per_second", "load_store_ratio", "store_bytes", "load_bytes",
    "store_seconds", "load_seconds", "local_queries", "external_queries", "preemptions",
)  # fmt: skip


def _down_entry(target: str, error: str | None) -> dict[str, Any]:
    return {"target": target, "model_name": None, "engine": None, "up": False, "error": error}


def gpu_interval(prev: GpuSample | None, cur: GpuSample, wall_seconds: float | None) -> dict[str, Any]:
    def per_second(counter: str, gauge: str) -> float | None:
        if getattr(cur, counter) is not None and prev is not None and getattr(prev, counter) is not None:
            return ratio(counter_delta(getattr(prev, counter), getattr(cur, counter)), wall_seconds)
        return getattr(cur, gauge)

    tx = per_second("pcie_tx_bytes", "pcie_tx_bytes_per_second")
    rx = per_second("pcie_rx_bytes", "pcie_rx_bytes_per_second")
    link = cur.pcie_link_max_bytes_per_second
    return {
        "gpu": cur.index,
        "uuid": cur.uuid,
        "vendor": cur.vendor,
        "name": cur.name,
        "memory_used_bytes": cur.memory_used_bytes,
        "memory_total_bytes": cur.memory_total_bytes,
        "utilization": cur.utilization,
        "pcie_transmit_bytes_per_second": tx,
        "pcie_receive_bytes_per_second": rx,
        "pcie_link_max_bytes_per_second": link,
        "pcie_transmit_link_fraction": ratio(tx, link),
        "pcie_receive_link_fraction": ratio(rx, link),
    }


def interval(prev: Snapshot, cur: Snapshot) -> dict[str, Any]:
    """The `kvops top --once --json` document (docs/DESIGN.md) for the interval prev -> cur."""
    wall = cur.time - prev.time if cur.time > prev.time else None
    prev_targets = {t.target: t for t in prev.targets}
    prev_engines = {e.key: e for e in prev.engines()}
    targets: list[dict[str, Any]] = []
    for target in cur.targets:
        if not target.up:
            targets.append(_down_entry(target.target, target.error))
            continue
        before = prev_targets.get(target.target)
        start_known = before is not None and before.up
        for eng in target.engines:
            entry = engine_interval(prev_engines.get(eng.key), eng, wall)
            if not start_known:
                # Nothing was known at the start of the interval: no interval figures.
                entry.update(dict.fromkeys(INTERVAL_FIELDS))
            targets.append(entry)
    prev_gpus = {g.uuid: g for g in prev.gpus}
    gpus = [gpu_interval(prev_gpus.get(g.uuid), g, wall) for g in cur.gpus]
    host: dict[str, Any] = {}
    if cur.host is not None:
        h = cur.host
        host = {
            "memory_total_bytes": h.memory_total_bytes,
            "memory_available_bytes": h.memory_available_bytes,
            "shmem_bytes": h.shmem_bytes,
            "mlocked_bytes": h.mlocked_bytes,
            "shm_total_bytes": h.shm_total_bytes,
            "shm_free_bytes": h.shm_free_bytes,
        }
    return {"interval_seconds": wall, "targets": targets, "gpus": gpus, "host": host}
