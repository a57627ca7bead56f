"""Interval figures from two Snapshots: the one place hit rates and bandwidths are computed.

Counter rules (docs/DESIGN.md, like Prometheus's rate()):
- absent in the first sample, present in the second: created in between, counts from 0;
- lower in the second than in the first: the source restarted, counts from 0;
- absent in the second: unknown (None).
So no figure is ever negative. A ratio with a zero or unknown denominator is None.

interval() returns typed objects (Interval, EngineInterval, TierInterval, GpuInterval);
their to_json() is the `kvops top --once --json` document (docs/DESIGN.md, docs/top.md).
The tier model (docs/tiers.md) decides which tier each engine figure belongs to.
"""

from __future__ import annotations

import math
import operator
import sys
from dataclasses import dataclass, field, fields
from typing import Any

from kvops.snapshot import EngineSample, GpuSample, Histogram, LMCacheSample, Snapshot, tier_kind
from kvops.units import GIB

# `kvops top --once --json`'s shape (docs/DESIGN.md), raised when a field goes, is renamed or changes:
# 1 (no field): the first release; 2: schema_version itself, per-tier figures and derived signals,
# `groups` with --group-by, every engine from --prometheus (two branches that each said 2);
# 3: both of those together. Fields added beside existing ones (the TTFT and queue-time
# quantiles of docs/payoff.md) keep the version: a reader of 3 reads them unchanged.
SCHEMA_VERSION = 3
GB = 1e9

# Cached-token sources (vLLM prompt_tokens_cached_by_source, SGLang cache_source) -> tier of
# docs/tiers.md; any other value is the "external" tier.
CACHED_SOURCE_TIER = {"device": "gpu", "host": "host", "disk": "disk", "p2p": "peer", "storage": "storage"}
EXTERNAL_SOURCE = "external_kv_transfer"  # vLLM's prompt_tokens_by_source for the connector


def counter_delta(prev: float | None, cur: float | None) -> float | None:
    if cur is None:
        return None
    if prev is None or cur < prev:
        return cur
    return cur - prev


def ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    out = num / den
    return out if math.isfinite(out) else None  # a subnormal denominator: +Inf is unknown


def histogram_delta(prev: Histogram | None, cur: Histogram | None) -> Histogram | None:
    """The observations made in the interval, by the counter rules applied to the whole
    histogram (a reset or changed buckets count from 0)."""
    if cur is None:
        return None
    if prev is None or prev.count > cur.count:
        return cur
    bounds = list(map(_first, cur.buckets))
    if bounds != list(map(_first, prev.buckets)):
        return cur
    moved = map(operator.sub, map(_second, cur.buckets), map(_second, prev.buckets))
    return Histogram(tuple(zip(bounds, moved, strict=True)), cur.sum - prev.sum, cur.count - prev.count)


_first, _second = operator.itemgetter(0), operator.itemgetter(1)


def quantile(q: float, hist: Histogram | None) -> float | None:
    """Prometheus's histogram_quantile() for classic buckets (promql/quantile.go,
    BucketQuantile, as every release since prometheus/prometheus#13153, November 2023, computes
    it): buckets with the same bound merged; a count within a relative 1e-12 of the last one
    kept, or below it, set to that one (ensureMonotonicAndIgnoreSmallDeltas); linear within the
    bucket the rank falls in (from 0 for the lowest bucket, or its bound if that is <= 0); the
    highest finite bound when it falls in +Inf. Where Prometheus gives NaN (no +Inf bucket,
    fewer than 2 buckets, no observations) or q is outside [0, 1] (-Inf/+Inf there): None,
    unknown; likewise where the +Inf bucket's count is negative or NaN, where Prometheus still
    returns a bound (a figure read from a broken count would look known)."""
    return _quantile_of(q, _buckets_for_quantile(hist))


def quantiles(hist: Histogram | None, *qs: float) -> tuple[float | None, ...]:
    """quantile() of each q, the buckets prepared once (top asks two of each histogram of
    each engine every second: the preparation was most of rates' cost)."""
    prepared = _buckets_for_quantile(hist)
    return tuple(_quantile_of(q, prepared) for q in qs)


_Prepared = tuple[list[float], list[float]]  # bounds ascending, +Inf last; counts as corrected


def _buckets_for_quantile(hist: Histogram | None) -> _Prepared | None:
    """The buckets as BucketQuantile reads them: merged, small deltas ignored, monotonic; None
    where it gives NaN for every q (no +Inf bucket, fewer than 2 buckets, no observations)."""
    if hist is None or not hist.buckets:
        return None
    bounds = [bound for bound, _ in hist.buckets]
    if all(map(operator.lt, bounds, bounds[1:])):  # as pages write them: nothing to merge
        counts = [count for _, count in hist.buckets]
    else:
        bounds, counts = [], []
        for bound, count in sorted(hist.buckets, key=lambda b: b[0]):  # coalesceBuckets
            if bounds and bounds[-1] == bound:
                counts[-1] += count
            else:
                bounds.append(bound)
                counts.append(count)
    if not math.isinf(bounds[-1]) or bounds[-1] < 0:
        return None
    prev = counts[0]  # ensureMonotonicAndIgnoreSmallDeltas(buckets, 1e-12)
    for i in range(1, len(counts)):
        count = counts[i]
        if count == prev:
            continue
        if count < prev or _almost_equal(prev, count):  # a decrease, or float noise: ignored
            counts[i] = prev
            continue
        prev = count
    if len(bounds) < 2 or not counts[-1] > 0:  # no observations (or a negative or NaN count)
        return None
    return bounds, counts


_SMALL_DELTA = 1e-12  # promql's smallDeltaTolerance


def _almost_equal(a: float, b: float) -> bool:
    """Prometheus's util/almost.Equal(a, b, 1e-12)."""
    if a == b or (math.isnan(a) and math.isnan(b)):
        return True
    abs_sum, diff = abs(a) + abs(b), abs(a - b)
    if a == 0 or b == 0 or abs_sum < sys.float_info.min:
        return diff < _SMALL_DELTA * sys.float_info.min
    return diff / min(abs_sum, sys.float_info.max) < _SMALL_DELTA


def _quantile_of(q: float, prepared: _Prepared | None) -> float | None:
    if prepared is None or not 0.0 <= q <= 1.0:
        return None
    bounds, counts = prepared
    rank = q * counts[-1]
    last = len(bounds) - 1
    # sort.Search over all but the +Inf bucket, as Go bisects it (a NaN count bisects as Go's does)
    b, j = 0, last
    while b < j:
        h = (b + j) // 2
        if counts[h] >= rank:
            j = h
        else:
            b = h + 1
    if b == last:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    start, end, count = 0.0, bounds[b], counts[b]
    if b > 0:
        start = bounds[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    value = start + (end - start) * (rank / count) if count else math.nan
    return value if math.isfinite(value) else None


@dataclass
class StoreInterval:
    """A KV store's own figures for its `storage` tier (kvops/engines/mooncake_store.py): the
    interval's counts, then the state at its end. Media: memory, ssd, file."""

    lookups: float | None = None  # every get's replica lookup
    hits: float | None = None  # lookups that found a completed replica
    hits_by_medium: dict[str, float] = field(default_factory=dict)
    hit_bytes_by_medium: dict[str, float] = field(default_factory=dict)  # bytes served
    puts: float | None = None  # puts completed
    put_failures: float | None = None
    put_no_space_failures: float | None = None
    puts_abandoned: float | None = None  # revoked or discarded: the data never landed
    get_failures: float | None = None  # a lookup of a missing key is one
    evictions: float | None = None
    evicted_keys: float | None = None
    evicted_bytes: float | None = None
    promotions: float | None = None
    promoted_bytes: float | None = None
    promotion_failures: float | None = None
    keys: float | None = None
    active_clients: float | None = None
    allocated_bytes_by_medium: dict[str, float] = field(default_factory=dict)
    capacity_bytes_by_medium: dict[str, float] = field(default_factory=dict)
    cached_values_by_medium: dict[str, float] = field(default_factory=dict)
    segments: dict[str, dict[str, float | None]] = field(default_factory=dict)  # allocated, capacity


@dataclass
class TierInterval:
    """One tier of one engine over the interval (docs/tiers.md). None = not measured."""

    hit_rate: float | None = None
    tokens_saved: float | None = None  # prompt tokens this tier served instead of prefill
    prompt_share: float | None = None  # tokens_saved / prompt tokens
    store_bytes: float | None = None  # into this tier
    load_bytes: float | None = None  # out of this tier, back to the GPU
    store_bandwidth_bytes_per_second: float | None = None  # while transferring
    load_bandwidth_bytes_per_second: float | None = None
    store_blocks: float | None = None  # where the engine counts blocks only (KVBM)
    load_blocks: float | None = None
    store_failed_blocks: float | None = None  # transfers into the tier that failed (KVBM object)
    load_failed_blocks: float | None = None
    engine_hit_rate: float | None = None  # the engine's own gauge (its window, not this interval)
    used_tokens: float | None = None
    capacity_tokens: float | None = None
    usage_ratio: float | None = None
    used_bytes: float | None = None  # what the tier holds now (LMCache's local CPU cache)
    # vLLM multi-tier offloading (kvops/engines/vllm_tiering.py); load = promotion into the
    # CPU primary, store = cascade out of it for the secondary tiers.
    chunk_lookups: float | None = None
    promotion_failures: float | None = None
    cascade_failures: float | None = None
    active_promotions: float | None = None
    active_cascades: float | None = None
    promotion_latency_p90_seconds: float | None = None
    lookup_delay_p99_seconds: float | None = None
    # SimpleCPUOffloadConnector: blocks, not bytes (no block size on its page)
    used_blocks: float | None = None  # pinned by transfers or hits, not how full
    pending_store_blocks: float | None = None
    capacity_blocks: float | None = None
    # SGLang L3 storage: tokens moved, and the median per-op wire bandwidth
    store_tokens: float | None = None
    load_tokens: float | None = None
    store_op_bandwidth_p50_bytes_per_second: float | None = None
    load_op_bandwidth_p50_bytes_per_second: float | None = None
    # --- issue 42: the mean per-op wire bandwidth (the histogram's sum over its count: exact)
    store_op_bandwidth_mean_bytes_per_second: float | None = None
    load_op_bandwidth_mean_bytes_per_second: float | None = None
    # A KV store's own view (engine_kind "mooncake"): what it can hold, and the rest of its figures
    capacity_bytes: float | None = None
    store: StoreInterval | None = None
    # --- issue 42 (h42a) -----------------------------------------------------------------
    kind: str | None = None  # in configured_tiers: the tier of docs/tiers.md this one is
    backpressure_stores_dropped: float | None = None  # vLLM tiering: stores a slow tier dropped
    backpressure_blocks_dropped: float | None = None
    backpressure_store_latency_ema_seconds_per_mib: float | None = None  # at the end; vLLM's unit
    lookup_async_delay_p90_seconds: float | None = None
    transport: str | None = None  # the connector carrying this tier's KV (nixl, mooncake)
    transfer_bytes: float | None = None  # KV moved by that connector
    transfer_bandwidth_bytes_per_second: float | None = None
    failed_transfers: float | None = None
    failed_operations: float | None = None  # storage connectors: operations not ok


@dataclass
class KvTransferInterval:
    """One KV transfer connector (NIXL, MooncakeConnector) over the interval: its transfers'
    bytes and time (the engine's own histograms' sums and counts), failures and expiries."""

    transfers: float | None = None  # successful transfers
    bytes: float | None = None
    seconds: float | None = None  # summed transfer time
    bandwidth_bytes_per_second: float | None = None  # bytes / seconds: while transferring
    mean_transfer_seconds: float | None = None
    p90_transfer_seconds: float | None = None
    mean_post_seconds: float | None = None  # NIXL: time to post a transfer
    mean_descriptors: float | None = None
    failed_transfers: float | None = None  # NIXL: handshake and notification failures included
    failed_notifications: float | None = None
    failed_receives: float | None = None  # Mooncake
    expired_requests: float | None = None  # requests whose KV lease expired before it was read
    notifications_after_expiry: float | None = None  # NIXL 0.32+


@dataclass
class StorageOpInterval:
    """One operation of a storage connector (MooncakeStoreConnector, 3FS) over the interval."""

    operations: float | None = None
    not_ok_operations: float | None = None  # status error or partial_failure; 3FS: failures
    keys: float | None = None
    failed_keys: float | None = None
    bytes: float | None = None
    seconds: float | None = None  # summed operation time
    bandwidth_bytes_per_second: float | None = None
    mean_seconds: float | None = None
    p90_seconds: float | None = None


@dataclass
class EngineInterval:
    target: str
    model_name: str
    engine: str
    engine_kind: str = "vllm"
    up: bool = True
    kv_cache_usage: float | None = None
    local_hit_rate: float | None = None
    external_hit_rate: float | None = None
    store_bandwidth_bytes_per_second: float | None = None
    load_bandwidth_bytes_per_second: float | None = None
    store_offered_bytes_per_second: float | None = None
    load_offered_bytes_per_second: float | None = None
    load_store_ratio: float | None = None
    store_bytes: float | None = None
    load_bytes: float | None = None
    store_seconds: float | None = None
    load_seconds: float | None = None
    local_queries: float | None = None
    external_queries: float | None = None
    preemptions: float | None = None
    # derived, docs/tiers.md
    prompt_tokens: float | None = None
    prompt_tokens_by_source: dict[str, float] | None = None
    tiers: dict[str, TierInterval] = field(default_factory=dict)
    offload_tokens_saved_per_gb_moved: float | None = None
    write_only_tier: bool | None = None
    allocation_failures_per_second: float | None = None
    stores_skipped_per_second: float | None = None
    dropped_tokens_per_second: float | None = None
    lookup_delay_p99_seconds: dict[str, float | None] = field(default_factory=dict)
    # Whether offloading pays off (docs/payoff.md): the engine's own histograms over the interval,
    # read as histogram_quantile() reads them; beside tiers[*].prompt_share.
    ttft_p50_seconds: float | None = None
    ttft_p90_seconds: float | None = None
    queue_time_p50_seconds: float | None = None
    queue_time_p90_seconds: float | None = None
    first_tokens: float | None = None  # requests that got their first token in the interval
    evictions_per_second: float | None = None  # LMCache's local CPU cache evictions
    promotion_allocation_failures_per_second: float | None = None  # vLLM tiering: primary full
    # SimpleCPUOffloadConnector: share of store decisions dropped because its pool was full
    pool_full_drop_ratio: float | None = None
    pool_full_drops_per_second: float | None = None  # blocks
    # LMCache multi-process health over the interval, in chunks: "l1_allocation/<during>",
    # "l1_read/<reason>", "l2_prefetch/<reason>"
    lmcache_failures: dict[str, float] = field(default_factory=dict)
    # SGLang: storage hits that did not become a usable prefetch (reason -> tokens), eviction
    storage_unfulfilled_tokens: dict[str, float] = field(default_factory=dict)
    evicted_tokens_per_second: float | None = None
    eviction_mean_seconds: float | None = None
    # --- issue 42 (h42a): vLLM's connectors, configured tiers, figures of the held-out set ---
    configured_tiers: dict[str, TierInterval] = field(default_factory=dict)  # vLLM's tier label ->
    kv_transfers: dict[str, KvTransferInterval] = field(default_factory=dict)  # nixl | mooncake
    storage_operations: dict[str, StorageOpInterval] = field(default_factory=dict)  # store/operation
    hisparse_hit_rate: float | None = None  # device hot-buffer hits / (hits + misses)
    hisparse_pending_transfers: float | None = None  # host page transfers in flight, at the end
    cached_prompt_share: float | None = None  # prompt tokens served by any cache, device included
    simple_save_outcomes_blocks: dict[str, float] = field(default_factory=dict)  # outcome -> blocks
    partly_read_families: dict[str, str] = field(default_factory=dict)  # family -> label kvops split on
    pcie_cross_check: str | None = None  # "consistent" | "counted_not_moved" | "moved_not_counted"
    # Share of the target's host memory on NUMA nodes none of its GPUs sit on (issue 45)
    host_memory_remote_numa_ratio: float | None = None
    # current state
    requests_running: float | None = None
    requests_waiting: float | None = None
    requests_waiting_by_reason: dict[str, float] = field(default_factory=dict)
    cpu_tier_bytes: float | None = None
    cpu_in_flight: float | None = None
    # --- issue 42 (docs/DESIGN.md): over the interval unless marked state
    # SGLang 0.5.23: L3 lookups and what they lost, load-back latency, eviction time
    storage_prefetch_hit_tokens: float | None = None
    storage_deferred_tokens: dict[str, float] = field(default_factory=dict)  # reason -> tokens
    backup_dropped_tokens: float | None = None
    prefetch_aux_alloc_failed_tokens: float | None = None
    load_back_p90_seconds: float | None = None
    eviction_seconds: float | None = None  # time spent evicting, summed over passes
    kv_available_tokens: float | None = None  # state: the GPU pool in tokens
    kv_evictable_tokens: float | None = None
    kv_used_tokens: float | None = None
    kv_capacity_tokens: float | None = None
    # Edges between tiers in blocks (KVBM), every edge incl. those no prefill reads directly
    # (host_to_disk, disk_to_host)
    transfer_blocks_by_edge: dict[str, float] = field(default_factory=dict)
    # LMCache legacy remote health (counts over the interval; two of them gauges holding counts)
    remote_put_failures: float | None = None
    remote_get_blocking_failures: float | None = None
    remote_ping_errors: float | None = None
    remote_ping_successes: float | None = None
    remote_ping_latency_seconds: float | None = None  # state: the latest ping
    local_cpu_evict_failures: float | None = None
    forced_unpins: float | None = None
    # LMCache multi-process: L1 chunk traffic and L2 completions over the interval
    l1_read_chunks: float | None = None
    l1_write_chunks: float | None = None
    l1_evicted_chunks: float | None = None
    l2_stored_chunks: float | None = None
    l2_prefetched_chunks: float | None = None
    # state: KV-related families on the target's page that no reader consumes (kvops/scrape/unread.py)
    unread_families: list[str] | None = None

    def to_json(self) -> dict[str, Any]:
        return _plain(self)

    def clear_interval(self) -> None:
        """Nothing was known at the start: every interval figure unknown, the state kept."""
        for name in INTERVAL_FIELDS:
            setattr(self, name, None)
        self.tiers = {}
        self.lookup_delay_p99_seconds = {}
        self.lmcache_failures = {}
        self.storage_unfulfilled_tokens = {}
        self.storage_deferred_tokens = {}
        self.transfer_blocks_by_edge = {}
        self.configured_tiers, self.kv_transfers, self.storage_operations = {}, {}, {}
        self.simple_save_outcomes_blocks = {}


_LEAVES = (float, int, str, bool, type(None))


def _plain(value: Any) -> Any:
    """A dataclass (and the dicts and lists in it) as plain JSON-ready values, as
    dataclasses.asdict gives, without its deepcopy of every leaf: 35 us instead of 127 us per
    engine, for every target on every frame of `kvops top` (timeit, vLLM 0.33 fixture); leaves
    (most fields) are kept without a call: 32 -> 17 us (offload-t1.prom, timeit)."""
    if isinstance(value, dict):
        return {k: v if type(v) in _LEAVES else _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [v if type(v) in _LEAVES else _plain(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        out = {}
        for name in value.__dataclass_fields__:
            v = getattr(value, name)
            out[name] = v if type(v) in _LEAVES else _plain(v)
        return out
    return value


# Issue 42's fields that are state or dicts (clear_interval empties the dicts itself).
_STATE_42 = {"storage_deferred_tokens", "kv_available_tokens", "kv_evictable_tokens", "kv_used_tokens",
             "kv_capacity_tokens", "transfer_blocks_by_edge", "remote_ping_latency_seconds",
             "unread_families"}  # fmt: skip
# The fields of EngineInterval that describe the interval (the rest are the current state).
INTERVAL_FIELDS = tuple(
    f.name
    for f in fields(EngineInterval)
    if f.name not in {"target", "model_name", "engine", "engine_kind", "up", "kv_cache_usage", "tiers",
                      "lookup_delay_p99_seconds", "lmcache_failures", "storage_unfulfilled_tokens",
                      "configured_tiers", "kv_transfers", "storage_operations", "simple_save_outcomes_blocks",
                      "partly_read_families", "hisparse_pending_transfers",
                      "requests_running", "requests_waiting",
                      "requests_waiting_by_reason", "cpu_tier_bytes", "cpu_in_flight"} | _STATE_42
)  # fmt: skip


@dataclass
class DownTarget:
    target: str
    error: str | None
    up: bool = False
    model_name: None = None
    engine: None = None

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "model_name": None, "engine": None, "up": False, "error": self.error}


@dataclass
class GpuInterval:
    gpu: str
    uuid: str
    vendor: str
    name: str | None
    memory_used_bytes: float | None
    memory_total_bytes: float | None
    utilization: float | None
    pcie_transmit_bytes_per_second: float | None
    pcie_receive_bytes_per_second: float | None
    pcie_link_max_bytes_per_second: float | None
    pcie_transmit_link_fraction: float | None
    pcie_receive_link_fraction: float | None
    # The link host copies ride (issue 45): pcie, or c2c on Grace; PCIe's figures above stay.
    host_link_kind: str | None = None
    host_link_transmit_bytes_per_second: float | None = None
    host_link_receive_bytes_per_second: float | None = None
    host_link_max_bytes_per_second: float | None = None

    @property
    def link_label(self) -> str:
        """What top calls the link host copies ride: "C2C" on Grace, else "PCIe"."""
        return "C2C" if self.host_link_kind == "c2c" else "PCIe"

    def shown_link(self) -> tuple[float | None, float | None, float | None]:
        """(transmit, receive, maximum) bytes/s of that link, as top's GPU panel shows it."""
        if self.host_link_kind == "c2c":
            return (
                self.host_link_transmit_bytes_per_second,
                self.host_link_receive_bytes_per_second,
                self.host_link_max_bytes_per_second,
            )
        return (
            self.pcie_transmit_bytes_per_second,
            self.pcie_receive_bytes_per_second,
            self.pcie_link_max_bytes_per_second,
        )

    def to_json(self) -> dict[str, Any]:
        return _plain(self)


@dataclass
class Interval:
    interval_seconds: float | None
    targets: list[EngineInterval | DownTarget]
    gpus: list[GpuInterval]
    host: dict[str, float | None]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "interval_seconds": self.interval_seconds,
            "targets": [t.to_json() for t in self.targets],
            "gpus": [g.to_json() for g in self.gpus],
            "host": self.host,
        }


def _dict_delta(prev: dict[str, float] | None, cur: dict[str, float]) -> dict[str, float] | None:
    if not cur:
        return None
    before = prev or {}
    out = {k: counter_delta(before.get(k), v) for k, v in cur.items()}
    return {k: v for k, v in out.items() if v is not None}


def engine_interval(
    prev: EngineSample | None, cur: EngineSample, wall_seconds: float | None
) -> EngineInterval:
    """Figures for one engine. `prev` is None when the engine had no sample before although
    its target was up: every counter was created in between and counts from 0."""

    def delta(name: str) -> float | None:
        return counter_delta(getattr(prev, name) if prev is not None else None, getattr(cur, name))

    d = {f: delta(f) for f in (
        "local_queries", "local_hits", "external_queries", "external_hits",
        "store_bytes", "store_seconds", "load_bytes", "load_seconds", "preemptions",
        "allocation_failures", "stores_skipped", "dropped_tokens",
    )}  # fmt: skip
    out = EngineInterval(
        target=cur.target,
        model_name=cur.model_name,
        engine=cur.engine,
        engine_kind=cur.engine_kind,
        kv_cache_usage=cur.kv_cache_usage,
        local_hit_rate=ratio(d["local_hits"], d["local_queries"]),
        external_hit_rate=ratio(d["external_hits"], d["external_queries"]),
        store_bandwidth_bytes_per_second=ratio(d["store_bytes"], d["store_seconds"]),
        load_bandwidth_bytes_per_second=ratio(d["load_bytes"], d["load_seconds"]),
        store_offered_bytes_per_second=ratio(d["store_bytes"], wall_seconds),
        load_offered_bytes_per_second=ratio(d["load_bytes"], wall_seconds),
        load_store_ratio=ratio(d["load_bytes"], d["store_bytes"]),
        store_bytes=d["store_bytes"],
        load_bytes=d["load_bytes"],
        store_seconds=d["store_seconds"],
        load_seconds=d["load_seconds"],
        local_queries=d["local_queries"],
        external_queries=d["external_queries"],
        preemptions=d["preemptions"],
        allocation_failures_per_second=ratio(d["allocation_failures"], wall_seconds),
        stores_skipped_per_second=ratio(d["stores_skipped"], wall_seconds),
        dropped_tokens_per_second=ratio(d["dropped_tokens"], wall_seconds),
        requests_running=cur.requests_running,
        requests_waiting=cur.requests_waiting,
        requests_waiting_by_reason=dict(cur.requests_waiting_by_reason),
        cpu_tier_bytes=cur.cpu_tier_bytes,
        cpu_in_flight=cur.cpu_in_flight,
    )
    by_source = _dict_delta(prev.prompt_tokens_by_source if prev else None, cur.prompt_tokens_by_source)
    cached = _dict_delta(
        prev.prompt_tokens_cached_by_source if prev else None, cur.prompt_tokens_cached_by_source
    )
    out.prompt_tokens_by_source = by_source
    out.prompt_tokens = sum(by_source.values()) if by_source else None
    _tiers(prev, out, cur, d, cached, by_source)
    for mode, name in (("sync", "lookup_sync_delay"), ("async", "lookup_async_delay")):
        hist = histogram_delta(getattr(prev, name) if prev else None, getattr(cur, name))
        if hist is not None:
            out.lookup_delay_p99_seconds[mode] = quantile(0.99, hist)
    _payoff(prev, out, cur)
    _tiering(prev, out, cur, wall_seconds)
    _simple_offload(prev, out, cur, wall_seconds)
    _sglang_storage(prev, out, cur, wall_seconds)
    _issue42_engine(prev, out, cur)
    _kv_store(prev, out, cur)
    _kv_connectors(prev, out, cur)
    _storage_operations(prev, out, cur)
    _hisparse(prev, out, cur)
    out.cached_prompt_share = _cached_prompt_share(out, cached, d)
    out.partly_read_families = dict(cur.partly_read_families)
    return out


# --- issue 42: SGLang 0.5.23, KVBM edges, the prompt share all caches served, LMCache health --
def _issue42_engine(prev: EngineSample | None, out: EngineInterval, cur: EngineSample) -> None:
    """SGLang's L3 lookup hits and losses (tokens over the interval), its GPU pool in tokens,
    load-back p90, time spent evicting and the mean per-op L3 bandwidth; every KVBM edge in
    blocks; and the share of prompt tokens any cache tier served (all engines)."""

    def d(name: str) -> float | None:
        return counter_delta(getattr(prev, name) if prev else None, getattr(cur, name))

    out.storage_prefetch_hit_tokens = d("storage_prefetch_hit_tokens")
    out.backup_dropped_tokens = d("backup_dropped_tokens")
    out.prefetch_aux_alloc_failed_tokens = d("prefetch_aux_alloc_failed_tokens")
    for reason, now in cur.storage_deferred_tokens.items():
        tokens = counter_delta(prev.storage_deferred_tokens.get(reason) if prev else None, now)
        if tokens:  # both reasons are pre-created at 0: only those that happened
            out.storage_deferred_tokens[reason] = tokens
    out.kv_available_tokens, out.kv_evictable_tokens = cur.kv_available_tokens, cur.kv_evictable_tokens
    out.kv_used_tokens, out.kv_capacity_tokens = cur.kv_used_tokens, cur.kv_capacity_tokens
    load_back = histogram_delta(prev.load_back_duration if prev else None, cur.load_back_duration)
    out.load_back_p90_seconds = quantile(0.9, load_back)
    passes = histogram_delta(prev.eviction_seconds if prev else None, cur.eviction_seconds)
    if passes is not None:
        out.eviction_seconds = passes.sum
    storage = out.tiers.get("storage")
    if storage is not None:
        for name, attr in (
            ("storage_prefetch_bandwidth", "load_op_bandwidth_mean_bytes_per_second"),
            ("storage_backup_bandwidth", "store_op_bandwidth_mean_bytes_per_second"),
        ):
            ops = histogram_delta(getattr(prev, name) if prev else None, getattr(cur, name))
            if ops is not None:
                setattr(storage, attr, ratio(ops.sum, ops.count))
    for edge, now in cur.transfer_blocks.items():
        moved = counter_delta(prev.transfer_blocks.get(edge) if prev else None, now)
        if moved is not None:
            out.transfer_blocks_by_edge[edge] = moved


_LMCACHE_COUNTS_42 = (
    "remote_put_failures", "remote_get_blocking_failures", "remote_ping_errors", "remote_ping_successes",
    "local_cpu_evict_failures", "forced_unpins",
    "l1_read_chunks", "l1_write_chunks", "l1_evicted_chunks", "l2_stored_chunks", "l2_prefetched_chunks",
)  # fmt: skip


def _issue42_lmcache(prev: LMCacheSample | None, out: EngineInterval, cur: LMCacheSample) -> None:
    """LMCache's legacy remote health and its multi-process L1/L2 chunk traffic, over the
    interval; put/get-blocking failures are gauges holding running counts, read as counters."""
    for name in _LMCACHE_COUNTS_42:
        setattr(out, name, counter_delta(getattr(prev, name) if prev else None, getattr(cur, name)))
    out.remote_ping_latency_seconds = cur.remote_ping_latency_seconds


# --- issue 42 (h42a): vLLM's KV connectors -----------------------------------------------------


def _hist_delta(prev: EngineSample | None, cur: EngineSample, name: str, key: str) -> Histogram | None:
    before = getattr(prev, name).get(key) if prev is not None else None
    return histogram_delta(before, getattr(cur, name).get(key))


def _kv_connectors(prev: EngineSample | None, out: EngineInterval, cur: EngineSample) -> None:
    """NIXL's and MooncakeConnector's transfers over the interval, from their per-transfer
    histograms (count, sum, buckets) and failure counters; the `peer` tier's transport."""
    connectors = set(cur.transfer_seconds_by_connector) | set(cur.transfer_failures_by_connector)
    connectors |= set(cur.transfer_expired_requests_by_connector) | set(cur.transfer_size_by_connector)
    for connector in sorted(connectors):
        figures = out.kv_transfers[connector] = KvTransferInterval()
        times = _hist_delta(prev, cur, "transfer_seconds_by_connector", connector)
        sizes = _hist_delta(prev, cur, "transfer_size_by_connector", connector)
        if times is not None:
            figures.transfers, figures.seconds = times.count, times.sum
            figures.mean_transfer_seconds = ratio(times.sum, times.count)
            figures.p90_transfer_seconds = quantile(0.9, times)
        if sizes is not None:
            figures.bytes = sizes.sum
            figures.bandwidth_bytes_per_second = ratio(sizes.sum, figures.seconds)
        posts = _hist_delta(prev, cur, "transfer_post_seconds_by_connector", connector)
        if posts is not None:
            figures.mean_post_seconds = ratio(posts.sum, posts.count)
        descriptors = _hist_delta(prev, cur, "transfer_descriptors_by_connector", connector)
        if descriptors is not None:
            figures.mean_descriptors = ratio(descriptors.sum, descriptors.count)
        for attr, name in (
            ("failed_transfers", "transfer_failures_by_connector"),
            ("failed_notifications", "transfer_failed_notifications_by_connector"),
            ("failed_receives", "transfer_failed_receives_by_connector"),
            ("expired_requests", "transfer_expired_requests_by_connector"),
            ("notifications_after_expiry", "transfer_late_notifications_by_connector"),
        ):
            # vLLM creates each counter with the connector, at 0: absent is a vLLM without it
            setattr(figures, attr, _by_tier_delta(prev, cur, name, connector))
    peer_links = [c for c in ("nixl", "mooncake") if c in out.kv_transfers]
    if peer_links:
        peer = out.tiers.setdefault("peer", TierInterval())
        peer.transport = "+".join(peer_links)
        parts = [out.kv_transfers[c] for c in peer_links]
        peer.transfer_bytes = _sum_known([f.bytes for f in parts])
        seconds = _sum_known([f.seconds for f in parts])
        peer.transfer_bandwidth_bytes_per_second = ratio(peer.transfer_bytes, seconds)
        peer.failed_transfers = _sum_known(
            [_sum_known([f.failed_transfers, f.failed_receives]) for f in parts]
        )


def _storage_operations(prev: EngineSample | None, out: EngineInterval, cur: EngineSample) -> None:
    """MooncakeStoreConnector's and 3FS's operations over the interval: count, not-ok count,
    keys, failed keys, bytes, time, bandwidth while operating, mean and p90 time. Puts are the
    `storage` tier's stores, gets its loads."""
    for key in sorted(set(cur.storage_op_count) | set(cur.storage_op_seconds)):
        figures = out.storage_operations[key] = StorageOpInterval()
        figures.operations = _by_tier_delta(prev, cur, "storage_op_count", key)
        figures.not_ok_operations = _by_tier_delta(prev, cur, "storage_op_not_ok", key)
        figures.keys = _by_tier_delta(prev, cur, "storage_op_keys", key)
        figures.failed_keys = _by_tier_delta(prev, cur, "storage_op_failed_keys", key)
        figures.bytes = _by_tier_delta(prev, cur, "storage_op_bytes", key)
        times = _hist_delta(prev, cur, "storage_op_seconds", key)
        if times is not None:
            figures.seconds = times.sum
            figures.mean_seconds = ratio(times.sum, times.count)
            figures.p90_seconds = quantile(0.9, times)
            # an operation that never moves bytes (exists, lookup) has no bandwidth
            figures.bandwidth_bytes_per_second = ratio(figures.bytes, times.sum) if figures.bytes else None
    if not out.storage_operations:
        return
    storage = out.tiers.setdefault("storage", TierInterval())
    for direction, ops in (("store", ("mooncake_store/save_put", "hf3fs/save")),
                           ("load", ("mooncake_store/load_get", "hf3fs/load"))):  # fmt: skip
        parts = [out.storage_operations[k] for k in ops if k in out.storage_operations]
        moved = _sum_known([f.bytes for f in parts])
        if moved is not None:
            setattr(storage, f"{direction}_bytes", moved)
            seconds = _sum_known([f.seconds for f in parts if f.bytes is not None])
            setattr(storage, f"{direction}_bandwidth_bytes_per_second", ratio(moved, seconds))
    storage.failed_operations = _sum_known([f.not_ok_operations for f in out.storage_operations.values()])


def _hisparse(prev: EngineSample | None, out: EngineInterval, cur: EngineSample) -> None:
    """HiSparse: device hot-buffer hit rate, bytes copied host -> device (the host tier's loads),
    and the host pool's use at the end of the interval."""
    if cur.hisparse_hits is None and cur.hisparse_host_usage is None:
        return

    def d(name: str) -> float | None:
        return counter_delta(getattr(prev, name) if prev else None, getattr(cur, name))

    hits, misses = d("hisparse_hits"), d("hisparse_misses")
    out.hisparse_hit_rate = ratio(hits, None if hits is None or misses is None else hits + misses)
    host = out.tiers.setdefault("host", TierInterval())
    copied = d("hisparse_host_to_device_bytes")
    if copied is not None and host.load_bytes is None:  # an offload connector's own count first
        host.load_bytes = copied
    if cur.hisparse_host_usage is not None:
        host.usage_ratio = cur.hisparse_host_usage
    out.hisparse_pending_transfers = cur.hisparse_pending_transfers


def _cached_prompt_share(
    out: EngineInterval, cached: dict[str, float] | None, d: dict[str, float | None]
) -> float | None:
    """Share of the interval's prompt tokens any cache served (device, host, disk, peer, ...):
    vLLM's prompt_tokens_cached_by_source summed; else the tiers' saved tokens (SGLang's hit
    rate across device, host and L3); else vLLM's local and external hits."""
    if cached:
        return ratio(sum(cached.values()), out.prompt_tokens)
    saved = [t.tokens_saved for t in out.tiers.values() if t.tokens_saved is not None]
    if saved:
        return ratio(sum(saved), out.prompt_tokens)
    hits = [v for v in (d["local_hits"], d["external_hits"]) if v is not None]
    return ratio(sum(hits), out.prompt_tokens) if hits else None


def _sglang_storage(
    prev: EngineSample | None, out: EngineInterval, cur: EngineSample, wall: float | None
) -> None:
    """SGLang HiCache's L3 storage tier (tokens each way, median per-op bandwidth, unfulfilled
    prefetch tokens by reason) and device eviction (tokens per second, mean pass time)."""

    def d(name: str) -> float | None:
        return counter_delta(getattr(prev, name) if prev else None, getattr(cur, name))

    loaded, stored = d("storage_prefetched_tokens"), d("storage_backed_up_tokens")
    if loaded is not None or stored is not None:
        storage = out.tiers.setdefault("storage", TierInterval())
        storage.load_tokens, storage.store_tokens = loaded, stored
        for name, direction in (
            ("storage_prefetch_bandwidth", "load"),
            ("storage_backup_bandwidth", "store"),
        ):
            attr = f"{direction}_op_bandwidth_p50_bytes_per_second"
            hist = histogram_delta(getattr(prev, name) if prev else None, getattr(cur, name))
            setattr(storage, attr, quantile(0.5, hist))
    for reason in cur.storage_unfulfilled_tokens:
        before = prev.storage_unfulfilled_tokens.get(reason) if prev else None
        tokens = counter_delta(before, cur.storage_unfulfilled_tokens[reason])
        if tokens:  # every reason is pre-created at 0: only those that happened
            out.storage_unfulfilled_tokens[reason] = tokens
    out.evicted_tokens_per_second = ratio(d("evicted_tokens"), wall)
    passes = histogram_delta(prev.eviction_seconds if prev else None, cur.eviction_seconds)
    if passes is not None:
        out.eviction_mean_seconds = ratio(passes.sum, passes.count)


def _kv_store(prev: EngineSample | None, out: EngineInterval, cur: EngineSample) -> None:
    """A KV store's own view as its `storage` tier (docs/tiers.md): lookups, hits and the hit
    rate, bytes served (load_bytes) by medium, puts, failures, evictions and promotions over the
    interval; allocation, capacity, keys and clients at its end. Never added to an engine's tiers:
    the store is a row of its own."""
    if cur.engine_kind != "mooncake":
        return

    def d(name: str) -> float | None:
        return counter_delta(getattr(prev, name) if prev else None, getattr(cur, name))

    def by_key(name: str) -> dict[str, float]:
        return {k: v for k in getattr(cur, name) if (v := _by_tier_delta(prev, cur, name, k)) is not None}

    figures = StoreInterval(
        lookups=d("kv_store_lookups"),
        hits=d("kv_store_lookup_hits"),
        hits_by_medium=by_key("kv_store_hits"),
        hit_bytes_by_medium=by_key("kv_store_hit_bytes"),
        puts=d("kv_store_puts_ended"),
        put_failures=d("kv_store_put_failures"),
        put_no_space_failures=d("kv_store_put_no_space_failures"),
        puts_abandoned=d("kv_store_puts_abandoned"),
        get_failures=d("kv_store_get_failures"),
        evictions=d("kv_store_evictions"),
        evicted_keys=d("kv_store_evicted_keys"),
        evicted_bytes=d("kv_store_evicted_bytes"),
        promotions=d("kv_store_promotions"),
        promoted_bytes=d("kv_store_promoted_bytes"),
        promotion_failures=d("kv_store_promotion_failures"),
        keys=cur.kv_store_keys,
        active_clients=cur.kv_store_active_clients,
        allocated_bytes_by_medium=dict(cur.kv_store_allocated_bytes),
        capacity_bytes_by_medium=dict(cur.kv_store_capacity_bytes),
        cached_values_by_medium=dict(cur.kv_store_cached_values),
    )
    for segment in sorted(
        set(cur.kv_store_segment_allocated_bytes) | set(cur.kv_store_segment_capacity_bytes)
    ):
        figures.segments[segment] = {
            "allocated_bytes": cur.kv_store_segment_allocated_bytes.get(segment),
            "capacity_bytes": cur.kv_store_segment_capacity_bytes.get(segment),
        }
    out.tiers.pop("gpu", None)  # a store has no GPU tier: every engine's row starts with one
    tier = out.tiers.setdefault("storage", TierInterval())
    tier.store = figures
    tier.hit_rate = ratio(figures.hits, figures.lookups)
    tier.load_bytes = sum(figures.hit_bytes_by_medium.values()) if figures.hit_bytes_by_medium else None
    if cur.kv_store_allocated_bytes:
        tier.used_bytes = sum(cur.kv_store_allocated_bytes.values())
    if cur.kv_store_capacity_bytes:
        tier.capacity_bytes = sum(cur.kv_store_capacity_bytes.values())
    tier.usage_ratio = ratio(tier.used_bytes, tier.capacity_bytes)


def _by_tier_delta(prev: EngineSample | None, cur: EngineSample, name: str, tier: str) -> float | None:
    before = getattr(prev, name).get(tier) if prev is not None else None
    return counter_delta(before, getattr(cur, name).get(tier))


_TIERING_COUNTERS = (
    "tier_chunk_queries", "tier_chunk_hits", "tier_read_bytes", "tier_read_seconds", "tier_write_bytes",
    "tier_write_seconds", "tier_promotion_failures", "tier_cascade_failures",
    "tier_backpressure_stores_dropped", "tier_backpressure_blocks_dropped",
)  # fmt: skip
_TIERING_GAUGES = ("tier_active_promotions", "tier_active_cascades")
_TIERING_HISTOGRAMS = (
    ("tier_promotion_latency", 0.9, "promotion_latency_p90_seconds"),
    ("tier_lookup_delay", 0.99, "lookup_delay_p99_seconds"),
    ("tier_lookup_async_delay", 0.9, "lookup_async_delay_p90_seconds"),
)


def _sum_known(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _tier_figures(
    prev: EngineSample | None, cur: EngineSample, names: list[str], figures: TierInterval
) -> None:
    """vLLM tiering figures of the tiers `names` (vLLM's labels) summed: one configured tier, or
    every tier of one kind. Counters are differenced per tier first (a reset is per tier)."""
    d = {
        field_name: _sum_known([_by_tier_delta(prev, cur, field_name, n) for n in names])
        for field_name in _TIERING_COUNTERS
    }
    if d["tier_chunk_queries"] is not None:
        figures.chunk_lookups = d["tier_chunk_queries"]
        figures.hit_rate = ratio(d["tier_chunk_hits"], d["tier_chunk_queries"])
    if d["tier_read_bytes"] is not None:
        figures.load_bytes = d["tier_read_bytes"]
        figures.load_bandwidth_bytes_per_second = ratio(d["tier_read_bytes"], d["tier_read_seconds"])
    if d["tier_write_bytes"] is not None:
        figures.store_bytes = d["tier_write_bytes"]
        figures.store_bandwidth_bytes_per_second = ratio(d["tier_write_bytes"], d["tier_write_seconds"])
    figures.promotion_failures = d["tier_promotion_failures"]
    figures.cascade_failures = d["tier_cascade_failures"]
    figures.backpressure_stores_dropped = d["tier_backpressure_stores_dropped"]
    figures.backpressure_blocks_dropped = d["tier_backpressure_blocks_dropped"]
    figures.active_promotions = _sum_known([cur.tier_active_promotions.get(n) for n in names])
    figures.active_cascades = _sum_known([cur.tier_active_cascades.get(n) for n in names])
    emas = [cur.tier_backpressure_latency_ema[n] for n in names if n in cur.tier_backpressure_latency_ema]
    if emas:  # the kind's: its slowest tier's (an EMA does not add up)
        figures.backpressure_store_latency_ema_seconds_per_mib = max(emas)
    for name, q, attr in _TIERING_HISTOGRAMS:
        merged_hist: Histogram | None = None
        for n in names:
            before = getattr(prev, name).get(n) if prev else None
            hist = histogram_delta(before, getattr(cur, name).get(n))
            merged_hist = hist if merged_hist is None else _merge(merged_hist, hist)
        setattr(figures, attr, quantile(q, merged_hist))


def _merge(a: Histogram, b: Histogram | None) -> Histogram | None:
    """Two tiers' interval histograms added, where their buckets agree (vLLM's always do)."""
    if b is None:
        return a
    if [x for x, _ in a.buckets] != [x for x, _ in b.buckets]:
        return None
    buckets = tuple((bound, x + y) for (bound, x), (_, y) in zip(a.buckets, b.buckets, strict=True))
    return Histogram(buckets, a.sum + b.sum, a.count + b.count)


def _tiering(prev: EngineSample | None, out: EngineInterval, cur: EngineSample, wall: float | None) -> None:
    """vLLM's multi-tier offloading per tier (docs/tiers.md): chunk hit rate, promotion (load)
    and cascade (store) bytes and bandwidth while transferring, failures, jobs in flight,
    back-pressure drops and the store latency EMA, promotion latency p90, lookup delay p99 and
    async lookup delay p90 over the interval. Each configured tier (vLLM's `1:fs`) is a row of
    `configured_tiers`; the kind's row in `tiers` is their sum."""
    names = set(cur.tier_chunk_queries) | set(cur.tier_read_bytes) | set(cur.tier_write_bytes)
    names |= set(cur.tier_active_cascades) | set(cur.tier_active_promotions)
    names |= set(cur.tier_backpressure_stores_dropped) | set(cur.tier_backpressure_latency_ema)
    by_kind: dict[str, list[str]] = {}
    for name in sorted(names):
        by_kind.setdefault(tier_kind(name), []).append(name)
        row = out.configured_tiers[name] = TierInterval(kind=tier_kind(name))
        _tier_figures(prev, cur, [name], row)
    for kind, members in by_kind.items():
        _tier_figures(prev, cur, members, out.tiers.setdefault(kind, TierInterval()))
    failures = counter_delta(
        prev.promotion_allocation_failures if prev else None, cur.promotion_allocation_failures
    )
    out.promotion_allocation_failures_per_second = ratio(failures, wall)


def _simple_offload(
    prev: EngineSample | None, out: EngineInterval, cur: EngineSample, wall: float | None
) -> None:
    """SimpleCPUOffloadConnector in blocks: stored and loaded, pinned and pending, capacity,
    and the share of stores dropped because its pool was full (tier pressure)."""
    if not cur.save_outcomes and cur.simple_load_blocks is None and cur.simple_capacity_blocks is None:
        return
    figures = out.tiers.setdefault("disk" if cur.simple_backend == "disk" else "host", TierInterval())
    outcomes = {k: _by_tier_delta(prev, cur, "save_outcomes", k) for k in cur.save_outcomes}
    figures.store_blocks = outcomes.get("stored")
    figures.load_blocks = counter_delta(prev.simple_load_blocks if prev else None, cur.simple_load_blocks)
    figures.used_blocks = cur.simple_used_blocks
    figures.pending_store_blocks = cur.simple_pending_store_blocks
    figures.capacity_blocks = cur.simple_capacity_blocks
    figures.usage_ratio = ratio(cur.simple_used_blocks, cur.simple_capacity_blocks)  # pinned, at the end
    out.simple_save_outcomes_blocks = {k: v for k, v in outcomes.items() if v is not None}
    if outcomes:
        decided = sum(v for v in outcomes.values() if v is not None)
        full = outcomes.get("dropped_cpu_full", 0.0) or 0.0  # no series yet: none dropped so far
        out.pool_full_drop_ratio = ratio(full, decided)
        out.pool_full_drops_per_second = ratio(full, wall)


def _payoff(prev: EngineSample | None, out: EngineInterval, cur: EngineSample) -> None:
    """TTFT and queue time over the interval: rate()-style bucket deltas, then the quantile."""
    ttft = histogram_delta(prev.ttft if prev else None, cur.ttft)
    if ttft is not None:
        out.first_tokens = ttft.count
        out.ttft_p50_seconds, out.ttft_p90_seconds = quantiles(ttft, 0.5, 0.9)
    queue = histogram_delta(prev.queue_time if prev else None, cur.queue_time)
    if queue is not None:
        out.queue_time_p50_seconds, out.queue_time_p90_seconds = quantiles(queue, 0.5, 0.9)


def _edges(out: EngineInterval, prev: EngineSample | None, cur: EngineSample) -> None:
    """Per-edge counters (KVBM blocks, llm-d's per-tier bytes) and tier gauges onto the tiers:
    an edge gpu_to_X stores into X, X_to_gpu loads from it; edges between lower tiers
    (host_to_disk) move data no prefill uses directly and stay out of the per-tier figures."""

    def edge_delta(name: str, edge: str) -> float | None:
        before = getattr(prev, name).get(edge) if prev is not None else None
        return counter_delta(before, getattr(cur, name).get(edge))

    kinds = (
        ("transfer_bytes_by_edge", "bytes"),
        ("transfer_blocks", "blocks"),
        ("failed_blocks_by_edge", "failed_blocks"),  # KVBM object storage: failed writes/reads
    )
    for name, kind in kinds:
        for edge in getattr(cur, name):
            src, _, dst = edge.partition("_to_")
            if "gpu" not in (src, dst):
                continue
            direction, tier_name = ("store", dst) if src == "gpu" else ("load", src)
            tier = out.tiers.setdefault(tier_name, TierInterval())
            setattr(tier, f"{direction}_{kind}", edge_delta(name, edge))
            if kind == "bytes":
                seconds = edge_delta("transfer_seconds_by_edge", edge)
                moved = getattr(tier, f"{direction}_bytes")
                setattr(tier, f"{direction}_bandwidth_bytes_per_second", ratio(moved, seconds))
    for tier_name, rate in cur.tier_hit_rate.items():
        out.tiers.setdefault(tier_name, TierInterval()).engine_hit_rate = rate
    for tier_name, used in cur.tier_used_tokens.items():
        out.tiers.setdefault(tier_name, TierInterval()).used_tokens = used
    for tier_name, capacity in cur.tier_capacity_tokens.items():
        tier = out.tiers.setdefault(tier_name, TierInterval())
        tier.capacity_tokens = capacity
        tier.usage_ratio = ratio(tier.used_tokens, capacity)
    for tier_name, usage in cur.tier_utilization.items():
        out.tiers.setdefault(tier_name, TierInterval()).usage_ratio = usage


def _tiers(
    prev: EngineSample | None,
    out: EngineInterval,
    cur: EngineSample,
    d: dict[str, float | None],
    cached: dict[str, float] | None,
    by_source: dict[str, float] | None,
) -> None:
    """Per-tier figures (docs/tiers.md): tokens each tier served, their share of the prompt
    tokens, and the offload tier's hit rate, bytes and bandwidth."""
    prompt = out.prompt_tokens
    gpu = TierInterval(hit_rate=out.local_hit_rate)
    gpu.tokens_saved = (cached or {}).get("device", d["local_hits"])
    out.tiers["gpu"] = gpu
    offload_name = cur.offload_tier or "external"
    saved_by_tier: dict[str, float] = {}
    for source, tokens in (cached or {}).items():
        if source != "device":
            # SGLang names L3 backends storage or storage_<backend>
            tier = "storage" if source.startswith("storage") else CACHED_SOURCE_TIER.get(source, "external")
            saved_by_tier[tier] = saved_by_tier.get(tier, 0.0) + tokens
    has_offload = any(v is not None for v in (d["external_queries"], d["store_bytes"], d["load_bytes"]))
    if has_offload or saved_by_tier:
        offload = out.tiers.setdefault(offload_name, TierInterval())
        offload.hit_rate = out.external_hit_rate
        offload.store_bytes, offload.load_bytes = d["store_bytes"], d["load_bytes"]
        offload.store_bandwidth_bytes_per_second = out.store_bandwidth_bytes_per_second
        offload.load_bandwidth_bytes_per_second = out.load_bandwidth_bytes_per_second
        if not saved_by_tier:
            # No per-tier split: the connector's tokens are the offload tier's (vLLM's own
            # external_kv_transfer count where it exists, else its external hits).
            external = (by_source or {}).get(EXTERNAL_SOURCE, d["external_hits"])
            if external is not None:
                saved_by_tier[offload_name] = external
    for name, tokens in saved_by_tier.items():
        out.tiers.setdefault(name, TierInterval()).tokens_saved = tokens
    _edges(out, prev, cur)
    for part in out.tiers.values():
        part.prompt_share = ratio(part.tokens_saved, prompt)
    offload_saved = (
        sum(t.tokens_saved or 0.0 for n, t in out.tiers.items() if n != "gpu") if saved_by_tier else None
    )
    moved = (d["store_bytes"] or 0.0) + (d["load_bytes"] or 0.0)
    if d["store_bytes"] is not None or d["load_bytes"] is not None:
        out.offload_tokens_saved_per_gb_moved = ratio(offload_saved, moved / GB)
    if d["store_bytes"] is not None:
        # Stores flowing while nothing was ever loaded back (the cumulative load count).
        out.write_only_tier = d["store_bytes"] > 0 and not cur.load_bytes


def lmcache_interval(
    prev: LMCacheSample | None, cur: LMCacheSample, wall_seconds: float | None
) -> EngineInterval:
    """One LMCache worker as a row (docs/top.md): its lookup hit rate, remote read (load) and
    write (store) bandwidth, local CPU cache use and evictions. Inside vLLM, LMCache *is* vLLM's
    external tier, so the row carries no counts a fleet sum would add a second time: no
    `*_queries` and no row-level bytes or seconds (fleet.group() sums those); the bytes are on
    its tiers. Remote bandwidth while transferring uses LMCache's own get/put time histograms."""

    def delta(name: str) -> float | None:
        return counter_delta(getattr(prev, name) if prev is not None else None, getattr(cur, name))

    def seconds(name: str) -> float | None:
        hist = histogram_delta(getattr(prev, name) if prev is not None else None, getattr(cur, name))
        return None if hist is None else hist.sum

    looked_up = delta("lookup_tokens")
    read, written = delta("remote_read_bytes"), delta("remote_write_bytes")
    out = EngineInterval(
        target=cur.target, model_name=cur.model_name, engine=cur.worker_id, engine_kind=cur.engine_kind
    )
    out.external_hit_rate = ratio(delta("lookup_hits"), looked_up)
    out.load_bandwidth_bytes_per_second = ratio(read, seconds("remote_get_seconds"))
    out.store_bandwidth_bytes_per_second = ratio(written, seconds("remote_put_seconds"))
    out.load_offered_bytes_per_second = ratio(read, wall_seconds)
    out.store_offered_bytes_per_second = ratio(written, wall_seconds)
    out.load_store_ratio = ratio(read, written)
    out.evictions_per_second = ratio(delta("evictions"), wall_seconds)
    out.prompt_tokens = looked_up
    if read is not None or written is not None:
        remote = out.tiers.setdefault("storage", TierInterval())
        remote.load_bytes, remote.store_bytes = read, written
        remote.load_bandwidth_bytes_per_second = out.load_bandwidth_bytes_per_second
        remote.store_bandwidth_bytes_per_second = out.store_bandwidth_bytes_per_second
    for tier, hits in (("host", delta("l1_hit_tokens")), ("storage", delta("l2_hit_tokens"))):
        if hits is not None:  # multi-process mode: L1 is LMCache's memory, L2 its backends
            figures = out.tiers.setdefault(tier, TierInterval())
            figures.tokens_saved = hits
            figures.prompt_share = ratio(hits, looked_up)
    if cur.local_cache_usage_bytes is not None:
        out.tiers.setdefault("host", TierInterval()).used_bytes = cur.local_cache_usage_bytes
    if cur.l1_usage_bytes is not None or cur.l1_usage_ratio is not None:  # multi-process L1
        l1 = out.tiers.setdefault("host", TierInterval())
        l1.used_bytes, l1.usage_ratio = cur.l1_usage_bytes, cur.l1_usage_ratio
    if cur.l2_usage_bytes:
        out.tiers.setdefault("storage", TierInterval()).used_bytes = sum(cur.l2_usage_bytes.values())
    for kind, name in (("l1_allocation", "l1_allocation_failures"), ("l1_read", "l1_read_failures"),
                       ("l2_prefetch", "l2_prefetch_failures")):  # fmt: skip
        for key in getattr(cur, name):
            before = getattr(prev, name).get(key) if prev is not None else None
            failed = counter_delta(before, getattr(cur, name)[key])
            if failed is not None:
                out.lmcache_failures[f"{kind}/{key}"] = failed
    _issue42_lmcache(prev, out, cur)
    return out


def gpu_interval(prev: GpuSample | None, cur: GpuSample, wall_seconds: float | None) -> GpuInterval:
    def per_second(counter: str, gauge: str) -> float | None:
        if getattr(cur, counter) is not None and prev is not None and getattr(prev, counter) is not None:
            return ratio(counter_delta(getattr(prev, counter), getattr(cur, counter)), wall_seconds)
        return getattr(cur, gauge)

    tx = per_second("pcie_tx_bytes", "pcie_tx_bytes_per_second")
    rx = per_second("pcie_rx_bytes", "pcie_rx_bytes_per_second")
    link = cur.pcie_link_max_bytes_per_second
    kind = cur.host_link_kind

    def host_link_per_second(counter: str, gauge: str) -> float | None:
        now: float | None = getattr(cur, counter).get(kind)
        before: float | None = getattr(prev, counter).get(kind) if prev is not None else None
        if now is not None and before is not None:
            return ratio(counter_delta(before, now), wall_seconds)
        gauged: float | None = getattr(cur, gauge).get(kind)
        return gauged

    return GpuInterval(
        gpu=cur.index,
        uuid=cur.uuid,
        vendor=cur.vendor,
        name=cur.name,
        memory_used_bytes=cur.memory_used_bytes,
        memory_total_bytes=cur.memory_total_bytes,
        utilization=cur.utilization,
        pcie_transmit_bytes_per_second=tx,
        pcie_receive_bytes_per_second=rx,
        pcie_link_max_bytes_per_second=link,
        pcie_transmit_link_fraction=ratio(tx, link),
        pcie_receive_link_fraction=ratio(rx, link),
        host_link_kind=kind,
        host_link_transmit_bytes_per_second=host_link_per_second(
            "host_link_tx_bytes", "host_link_tx_bytes_per_second"
        ),
        host_link_receive_bytes_per_second=host_link_per_second(
            "host_link_rx_bytes", "host_link_rx_bytes_per_second"
        ),
        host_link_max_bytes_per_second=cur.host_link_max_bytes_per_second.get(kind) if kind else None,
    )


# Cross-check slack: PCIe counters also carry inputs, weights and other processes' traffic,
# and drivers sample them; only a clear gap is flagged.
CROSS_CHECK_SLACK_BYTES = 64 * (1 << 20)
CROSS_CHECK_MIN_MOVED_BYTES = float(GIB)


def pcie_cross_check(engine_load_bytes: float | None, pcie_rx_bytes: float | None) -> str | None:
    """Bytes the engine says it loaded (host -> GPU) against what the GPUs' host-link receive
    counters (PCIe, or NVLink-C2C: host_link_rx_bytes) moved in the same interval. None where
    either side is not measured."""
    if engine_load_bytes is None or pcie_rx_bytes is None:
        return None
    if engine_load_bytes > pcie_rx_bytes * 1.05 + CROSS_CHECK_SLACK_BYTES:
        return "counted_not_moved"  # more loaded than the bus carried: not over this PCIe
    if engine_load_bytes == 0 and pcie_rx_bytes >= CROSS_CHECK_MIN_MOVED_BYTES:
        return "moved_not_counted"  # the bus moved GBs while the engine counted no load
    return "consistent"


def host_link_rx_bytes(g: GpuSample) -> float | None:
    """The receive counter of the link that carries `g`'s host copies: NVLink-C2C's on a Grace
    GPU (None where GPM does not measure it: never PCIe's counter, which stays near zero there),
    else PCIe's (a snapshot from before issue 45 says no kind: PCIe)."""
    if g.host_link_kind == "c2c":
        return g.host_link_rx_bytes.get("c2c")
    return g.pcie_rx_bytes


def _pcie_rx_by_target(prev: Snapshot, cur: Snapshot) -> dict[str, float]:
    """Δ host-link receive bytes over the GPUs each target's processes use (collectors/procs.py)."""
    prev_gpus = {g.uuid: g for g in prev.gpus}
    cur_gpus = {g.uuid: g for g in cur.gpus}
    out: dict[str, float] = {}
    for proc in cur.processes:
        total: float | None = 0.0
        for _, uuid in proc.gpus:
            before, after = prev_gpus.get(uuid), cur_gpus.get(uuid)
            start = host_link_rx_bytes(before) if before else None
            moved = counter_delta(start, host_link_rx_bytes(after) if after else None)
            if moved is None or start is None or total is None:
                total = None
                continue
            total += moved
        if proc.gpus and total is not None:
            out[proc.target] = out.get(proc.target, 0.0) + total
    return out


def interval(prev: Snapshot, cur: Snapshot) -> Interval:
    """The figures for the interval prev -> cur (to_json(): `kvops top --once --json`)."""
    wall = cur.time - prev.time if cur.time > prev.time else None
    prev_targets = {t.target: t for t in prev.targets}
    prev_engines = {e.key: e for e in prev.engines()}
    prev_lmcache = {item.key: item for t in prev.targets for item in t.lmcache}
    pcie_rx = _pcie_rx_by_target(prev, cur)
    remote_numa = {p.target: p.numa_remote_ratio for p in cur.processes}
    targets: list[EngineInterval | DownTarget] = []
    for target in cur.targets:
        if not target.up:
            targets.append(DownTarget(target.target, target.error))
            continue
        before = prev_targets.get(target.target)
        start_known = before is not None and before.up
        for eng in target.engines:
            entry = engine_interval(prev_engines.get(eng.key), eng, wall)
            entry.unread_families = target.unread_families
            if not start_known:
                entry.clear_interval()
            elif len(target.engines) == 1:  # PCIe is per GPU set, not per data-parallel rank
                entry.pcie_cross_check = pcie_cross_check(entry.load_bytes, pcie_rx.get(target.target))
            entry.host_memory_remote_numa_ratio = remote_numa.get(target.target)
            targets.append(entry)
        for item in target.lmcache:  # LMCache's workers: a row each (docs/top.md)
            entry = lmcache_interval(prev_lmcache.get(item.key), item, wall)
            entry.unread_families = target.unread_families
            if not start_known:
                entry.clear_interval()
            targets.append(entry)
    prev_gpus = {g.uuid: g for g in prev.gpus}
    gpus = [gpu_interval(prev_gpus.get(g.uuid), g, wall) for g in cur.gpus]
    host: dict[str, float | None] = {}
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
    return Interval(wall, targets, gpus, host)
