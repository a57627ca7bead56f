"""The one model every source produces and every sink reads.

A Snapshot is what kvops knew at one instant: per vLLM engine, per GPU, the host. Values
that a source does not expose are None (unknown), never 0. Rates over an interval live in
rates.py, computed from two Snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class Histogram:
    """A Prometheus histogram as exposed: cumulative bucket counts by upper bound (ascending,
    +Inf last), sum and count. Passed through, never re-bucketed."""

    buckets: tuple[tuple[float, float], ...]
    sum: float
    count: float


TIER_KINDS = frozenset({"gpu", "host", "disk", "storage", "peer", "external"})


def tier_kind(label: str) -> str:
    """A vLLM tier label (`0:primary`, `1:fs`, `2:obj`) -> the tier of docs/tiers.md: the primary
    is host, a filesystem tier disk, a peer tier peer, any other (object store, remote) storage.
    A tier's own kind (`disk`, as an exposition without vLLM's label names it) is itself."""
    if label in TIER_KINDS:
        return label
    index, _, kind = label.partition(":")
    kind = kind.lower()
    if index == "0" or kind == "primary":
        return "host"
    if kind in ("fs", "file", "disk") or "filesystem" in kind:
        return "disk"
    if kind.startswith("p2p") or "peer" in kind:
        return "peer"
    return "storage"


@dataclass(slots=True)
class EngineSample:
    """One engine (data-parallel rank) of one target, as normalised from its exposition.

    Counters are cumulative as the engine counted them; tokens for the prefix cache, bytes and
    seconds (summed transfer time over workers) for offloading. Which kvops_* series carries
    which field is written once, in kvops/names.py (MetricSpec.field / split).
    """

    target: str
    model_name: str
    engine: str = "0"
    engine_kind: str = "vllm"  # vllm | sglang | dynamo-kvbm | trtllm | mooncake (docs/tiers.md)
    kv_cache_usage: float | None = None  # 0-1
    local_queries: float | None = None
    local_hits: float | None = None
    external_queries: float | None = None
    external_hits: float | None = None
    store_bytes: float | None = None
    store_seconds: float | None = None
    load_bytes: float | None = None
    load_seconds: float | None = None
    preemptions: float | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    cpu_tier_bytes: float | None = None  # configured offload tier size
    # The tier the offload transfers go to (docs/tiers.md): "host" where the exposition names
    # the CPU (vLLM's CPU offloading), else "external" (a connector whose medium is not said);
    # None where the page shows no offload tier at all (vLLM without a connector).
    offload_tier: str | None = "external"
    # Tier breakdowns keyed by the engine's own label value (vLLM's `source`, ...); {} = absent.
    prompt_tokens_by_source: dict[str, float] = field(default_factory=dict)
    prompt_tokens_cached_by_source: dict[str, float] = field(default_factory=dict)
    stores_skipped: float | None = None
    allocation_failures: float | None = None
    lookup_sync_delay: Histogram | None = None
    lookup_async_delay: Histogram | None = None
    store_size: Histogram | None = None
    load_size: Histogram | None = None
    cpu_allocation_chunks: Histogram | None = None
    cpu_in_flight: float | None = None  # 0-1, chunks pinned by transfers, not fullness
    cpu_in_flight_read: float | None = None
    cpu_in_flight_write: float | None = None
    requests_waiting_by_reason: dict[str, float] = field(default_factory=dict)
    requests_kv_fetch_by_stage: dict[str, float] = field(default_factory=dict)
    kv_block_lifetime: Histogram | None = None
    kv_block_idle_before_evict: Histogram | None = None
    kv_block_reuse_gap: Histogram | None = None
    # Whether offloading pays off (docs/payoff.md): the engine's own request latency histograms.
    ttft: Histogram | None = None  # time to first token, seconds
    queue_time: Histogram | None = None  # time waiting before scheduled, seconds
    # Other engines' tier figures (docs/tiers.md), absent where the engine does not count them.
    store_tokens: float | None = None  # tokens copied into the offload tier (SGLang backup)
    load_tokens: float | None = None  # tokens copied back to the GPU (SGLang load-back)
    dropped_tokens: float | None = None  # KV destroyed without a copy in the tier below
    tier_used_tokens: dict[str, float] = field(default_factory=dict)  # tier -> tokens held
    tier_capacity_tokens: dict[str, float] = field(default_factory=dict)
    tier_used_bytes: dict[str, float] = field(default_factory=dict)
    tier_capacity_bytes: dict[str, float] = field(default_factory=dict)
    transfer_blocks: dict[str, float] = field(default_factory=dict)  # edge -> blocks (KVBM)
    transfer_bytes_by_edge: dict[str, float] = field(default_factory=dict)  # edge -> bytes
    transfer_seconds_by_edge: dict[str, float] = field(default_factory=dict)  # edge -> seconds
    failed_blocks_by_edge: dict[str, float] = field(default_factory=dict)  # edge -> blocks (KVBM)
    tier_hit_rate: dict[str, float] = field(default_factory=dict)  # engine's own gauge, 0-1
    matched_tokens: float | None = None  # an offload manager's own hit tokens (KVBM)
    tier_utilization: dict[str, float] = field(default_factory=dict)  # tier -> used/capacity 0-1
    # vLLM multi-tier offloading (TieringOffloadingSpec, kvops/engines/vllm_tiering.py), keyed
    # by tier of docs/tiers.md (0:primary -> host, a filesystem tier -> disk, remote -> storage).
    tier_chunk_queries: dict[str, float] = field(default_factory=dict)
    tier_chunk_hits: dict[str, float] = field(default_factory=dict)
    tier_read_bytes: dict[str, float] = field(default_factory=dict)  # promotions: tier -> primary
    tier_read_seconds: dict[str, float] = field(default_factory=dict)
    tier_write_bytes: dict[str, float] = field(default_factory=dict)  # cascades: primary -> tier
    tier_write_seconds: dict[str, float] = field(default_factory=dict)
    tier_promotion_failures: dict[str, float] = field(default_factory=dict)
    tier_cascade_failures: dict[str, float] = field(default_factory=dict)
    tier_active_promotions: dict[str, float] = field(default_factory=dict)
    tier_active_cascades: dict[str, float] = field(default_factory=dict)
    tier_primary_read_usage: dict[str, float] = field(default_factory=dict)  # 0-1 of the primary
    tier_primary_write_usage: dict[str, float] = field(default_factory=dict)
    tier_lookup_delay: dict[str, Histogram] = field(default_factory=dict)  # sync, per chunk
    tier_promotion_latency: dict[str, Histogram] = field(default_factory=dict)  # success + failure
    promotion_allocation_failures: float | None = None
    # SGLang HiCache's L3 storage and device eviction (kvops/engines/sglang_storage.py)
    storage_prefetched_tokens: float | None = None  # storage -> host (a load from storage)
    storage_backed_up_tokens: float | None = None  # host -> storage
    storage_unfulfilled_tokens: dict[str, float] = field(default_factory=dict)  # reason -> tokens
    storage_prefetch_bandwidth: Histogram | None = None  # per op, bytes/s
    storage_backup_bandwidth: Histogram | None = None
    evicted_tokens: float | None = None  # device KV freed by eviction
    eviction_seconds: Histogram | None = None
    # vLLM's SimpleCPUOffloadConnector (kvops/engines/vllm_simple_offload.py): blocks, never bytes.
    save_outcomes: dict[str, float] = field(default_factory=dict)  # outcome -> blocks
    simple_load_blocks: float | None = None
    simple_used_blocks: float | None = None
    simple_pending_store_blocks: float | None = None
    simple_capacity_blocks: float | None = None
    simple_backend: str | None = None  # cpu | disk (the info series)
    # --- issue 42 (SGLang 0.5.23): L3 lookup hits and losses, the GPU pool in tokens, load-back
    storage_prefetch_hit_tokens: float | None = None  # tokens an L3 lookup found
    storage_deferred_tokens: dict[str, float] = field(default_factory=dict)  # reason -> tokens
    backup_dropped_tokens: float | None = None  # backups that never reached L3
    prefetch_aux_alloc_failed_tokens: float | None = None  # L3 fetches forfeited (aux pool)
    kv_available_tokens: float | None = None  # GPU pool: free slots
    kv_evictable_tokens: float | None = None  # cached, evictable for new requests
    kv_used_tokens: float | None = None  # locked by running requests
    kv_capacity_tokens: float | None = None  # max_total_num_tokens
    load_back_duration: Histogram | None = None  # one host -> GPU load-back, seconds
    # A KV store's own view (engine_kind "mooncake": kvops/engines/mooncake_store.py), the
    # `storage` tier as the store counts it. Media: memory, ssd (NoF), file (3FS/NFS).
    kv_store_allocated_bytes: dict[str, float] = field(default_factory=dict)  # medium -> bytes
    kv_store_capacity_bytes: dict[str, float] = field(default_factory=dict)
    kv_store_segment_allocated_bytes: dict[str, float] = field(default_factory=dict)  # segment ->
    kv_store_segment_capacity_bytes: dict[str, float] = field(default_factory=dict)
    kv_store_keys: float | None = None
    kv_store_cached_values: dict[str, float] = field(default_factory=dict)  # medium -> values held
    kv_store_active_clients: float | None = None
    kv_store_lookups: float | None = None  # every get's replica lookup
    kv_store_lookup_hits: float | None = None  # ... that found a completed replica
    kv_store_hits: dict[str, float] = field(default_factory=dict)  # medium -> lookups served
    kv_store_hit_bytes: dict[str, float] = field(default_factory=dict)  # medium -> bytes served
    kv_store_put_starts: float | None = None
    kv_store_puts_ended: float | None = None  # puts completed (put end), single and batch items
    kv_store_put_failures: float | None = None
    kv_store_put_no_space_failures: float | None = None  # put starts refused: no space to allocate
    kv_store_puts_abandoned: float | None = None  # revoked or discarded: the data never landed
    kv_store_get_failures: float | None = None  # failed lookups: a missing key is one
    kv_store_evictions: float | None = None  # eviction passes that freed space
    kv_store_evicted_keys: float | None = None
    kv_store_evicted_bytes: float | None = None
    kv_store_promotions: float | None = None  # file -> memory promotions completed
    kv_store_promoted_bytes: float | None = None
    kv_store_promotion_failures: float | None = None
    # --- issue 42 (vLLM connectors, tiering back-pressure; h42a) ---------------------------
    # vLLM tiering keyed by vLLM's own tier label (`1:fs`, `2:fs`): tiers keep their identity.
    tier_backpressure_stores_dropped: dict[str, float] = field(default_factory=dict)
    tier_backpressure_blocks_dropped: dict[str, float] = field(default_factory=dict)
    tier_backpressure_latency_ema: dict[str, float] = field(default_factory=dict)  # s/MiB, vLLM's unit
    tier_lookup_async_delay: dict[str, Histogram] = field(default_factory=dict)
    # KV transfer connectors (NIXL, Mooncake P/D), keyed by connector: "nixl" | "mooncake".
    transfer_seconds_by_connector: dict[str, Histogram] = field(default_factory=dict)  # per transfer
    transfer_post_seconds_by_connector: dict[str, Histogram] = field(default_factory=dict)
    transfer_size_by_connector: dict[str, Histogram] = field(default_factory=dict)  # bytes per transfer
    transfer_descriptors_by_connector: dict[str, Histogram] = field(default_factory=dict)
    transfer_failures_by_connector: dict[str, float] = field(default_factory=dict)
    transfer_failed_notifications_by_connector: dict[str, float] = field(default_factory=dict)
    transfer_failed_receives_by_connector: dict[str, float] = field(default_factory=dict)
    transfer_expired_requests_by_connector: dict[str, float] = field(default_factory=dict)
    transfer_late_notifications_by_connector: dict[str, float] = field(default_factory=dict)
    # Storage connectors' operations (MooncakeStoreConnector, 3FS), keyed "<store>/<operation>".
    storage_op_seconds: dict[str, Histogram] = field(default_factory=dict)  # all statuses merged
    storage_op_count: dict[str, float] = field(default_factory=dict)
    storage_op_not_ok: dict[str, float] = field(default_factory=dict)  # status other than ok
    storage_op_keys: dict[str, float] = field(default_factory=dict)
    storage_op_failed_keys: dict[str, float] = field(default_factory=dict)
    storage_op_bytes: dict[str, float] = field(default_factory=dict)
    # HiSparse's device hot buffer fed from its host pool (the host tier).
    hisparse_hits: float | None = None
    hisparse_misses: float | None = None
    hisparse_host_to_device_bytes: float | None = None
    hisparse_host_usage: float | None = None  # 0-1 of its host pool, evictable blocks free
    hisparse_pending_transfers: float | None = None  # page write-backs and restores in flight
    # Families read in part: a label splits a count kvops sums (issue 42 item 7), name -> label.
    partly_read_families: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.target, self.model_name, self.engine)


@dataclass
class LMCacheSample:
    """LMCache's own counters for one worker, kept apart from the prefix-cache tiers: inside
    vLLM, LMCache *is* vLLM's external tier, so adding these to it would count twice."""

    target: str
    model_name: str
    worker_id: str
    engine_kind: str = "lmcache"
    requested_tokens: float | None = None
    hit_tokens: float | None = None
    stored_tokens: float | None = None
    lookup_tokens: float | None = None
    lookup_hits: float | None = None
    retrieve_requests: float | None = None
    store_requests: float | None = None
    lookup_requests: float | None = None
    local_cache_usage_bytes: float | None = None
    # The rest of LMCache's legacy surface (lmcache/observability.py); seconds and bytes.
    vllm_hit_tokens: float | None = None
    prompt_tokens: float | None = None
    remote_read_bytes: float | None = None
    remote_write_bytes: float | None = None
    evictions: float | None = None
    slow_retrievals_by_time: float | None = None
    slow_retrievals_by_speed: float | None = None
    local_storage_usage_bytes: float | None = None
    remote_cache_usage_bytes: float | None = None
    retrieve_seconds: Histogram | None = None
    store_seconds: Histogram | None = None
    remote_get_seconds: Histogram | None = None  # LMCache counts milliseconds: converted
    remote_put_seconds: Histogram | None = None
    retrieve_speed: Histogram | None = None  # tokens per second
    store_speed: Histogram | None = None
    # Multi-process mode (lmcache_mp_*): the lookup hit split by cache level, L1 chunk traffic.
    l1_hit_tokens: float | None = None
    l2_hit_tokens: float | None = None
    l1_read_chunks: float | None = None
    l1_write_chunks: float | None = None
    l1_evicted_chunks: float | None = None
    # Multi-process health (LMCache 0.5.6): chunks, keyed by the label LMCache tags them with.
    l1_allocation_failures: dict[str, float] = field(default_factory=dict)  # during -> chunks
    l1_read_failures: dict[str, float] = field(default_factory=dict)  # reason -> chunks
    l2_prefetch_failures: dict[str, float] = field(default_factory=dict)  # reason -> chunks
    l2_stored_chunks: float | None = None
    l2_prefetched_chunks: float | None = None
    l1_usage_bytes: float | None = None
    l1_usage_ratio: float | None = None  # 0-1
    l2_usage_bytes: dict[str, float] = field(default_factory=dict)  # l2_name -> bytes
    # --- issue 42: legacy remote-backend and local CPU health (lmcache/observability.py 0.5.6).
    # put/get-blocking failures are gauges holding cumulative counts: read as counters.
    remote_put_failures: float | None = None
    remote_get_blocking_failures: float | None = None
    remote_ping_errors: float | None = None
    remote_ping_successes: float | None = None
    remote_ping_latency_seconds: float | None = None  # the latest ping (LMCache: ms, converted)
    local_cpu_evict_failures: float | None = None
    forced_unpins: float | None = None  # pins released by timeout

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.target, self.model_name, self.worker_id)


@dataclass
class TargetSample:
    """One scrape of one vLLM (or LMCache) /metrics endpoint."""

    target: str  # normalised URL, scheme://host:port[/path]
    up: bool
    error: str | None = None  # one line, for logs and `kvops top`
    engines: list[EngineSample] = field(default_factory=list)
    lmcache: list[LMCacheSample] = field(default_factory=list)
    scrape_seconds: float | None = None
    vllm_format: str | None = None  # which naming generation was seen, e.g. "0.24+"
    parse_errors: int = 0  # malformed lines skipped
    # A discovered pod's namespace, pod and container (kvops.transport.kubernetes): labels the
    # exporter adds to every series of the target; {} for a target given by URL.
    identity: dict[str, str] = field(default_factory=dict)
    # --- issue 42: KV-related families on the page (its # TYPE lines) that no reader consumes,
    # from the last whole page (kvops/scrape/unread.py); None where not looked at.
    unread_families: list[str] | None = None


@dataclass
class GpuSample:
    """One GPU. Counters may be None where the device or driver does not count."""

    index: str
    uuid: str
    vendor: str  # "nvidia" | "amd"
    name: str | None = None
    pci_bus_id: str | None = None
    memory_used_bytes: float | None = None
    memory_total_bytes: float | None = None
    utilization: float | None = None  # 0-1
    pcie_tx_bytes: float | None = None  # counter, device to host
    pcie_rx_bytes: float | None = None  # counter, host to device
    pcie_tx_bytes_per_second: float | None = None  # driver's sample where no counter exists
    pcie_rx_bytes_per_second: float | None = None
    pcie_link_max_bytes_per_second: float | None = None  # per direction
    pcie_link_gen: int | None = None  # current PCIe generation (drops at idle with ASPM)
    pcie_link_width: int | None = None  # current lanes
    pcie_link_gen_max: int | None = None  # max the device and slot allow
    pcie_link_width_max: int | None = None
    pcie_replays: float | None = None
    nvlink_tx_bytes: dict[str, float] = field(default_factory=dict)  # link -> counter
    nvlink_rx_bytes: dict[str, float] = field(default_factory=dict)
    xgmi_read_bytes: dict[str, float] = field(default_factory=dict)
    xgmi_write_bytes: dict[str, float] = field(default_factory=dict)
    processes: dict[int, float | None] = field(default_factory=dict)  # pid -> GPU memory bytes
    extra: dict[str, float] = field(default_factory=dict)  # vendor-specific extras (GTT, ...)
    # --- host link (issue 45): the link host<->GPU copies ride, keyed by its kind, pcie | c2c
    # (one key per GPU; docs/collectors.md "Host link"). Counters in bytes; a C2C counter is the
    # driver's GPM rate integrated between scrapes. Empty where the link is not known.
    host_link_tx_bytes: dict[str, float] = field(default_factory=dict)  # device to host
    host_link_rx_bytes: dict[str, float] = field(default_factory=dict)  # host to device
    host_link_tx_bytes_per_second: dict[str, float] = field(default_factory=dict)
    host_link_rx_bytes_per_second: dict[str, float] = field(default_factory=dict)
    host_link_max_bytes_per_second: dict[str, float] = field(default_factory=dict)  # per direction
    host_link_errors: dict[str, float] = field(default_factory=dict)  # counter name -> count
    host_link_kind: str | None = None  # pcie | c2c; None where the collector did not say
    numa_node: int | None = None  # host NUMA node nearest the GPU (sysfs numa_node, NVML, amdsmi)
    # AMD metrics table (MI300-class): PCIe bandwidth of both directions together, raw, keyed
    # acc | inst, in amd_pcie_bandwidth_unit; the table's version ("1.5") says which unit.
    amd_pcie_bandwidth: dict[str, float] = field(default_factory=dict)
    amd_pcie_bandwidth_unit: str | None = None
    amd_metrics_table: str | None = None
    # amdsmi_get_link_metrics: (link, peer bdf, link type, read bytes, write bytes) per link
    peer_links: list[tuple[str, str, str, float | None, float | None]] = field(default_factory=list)


@dataclass
class HostSample:
    """Host memory as it bears on offload buffers. Bytes."""

    memory_total_bytes: float | None = None
    memory_available_bytes: float | None = None
    shmem_bytes: float | None = None
    mlocked_bytes: float | None = None
    unevictable_bytes: float | None = None
    hugepages_total: float | None = None
    hugepages_free: float | None = None
    hugepage_size_bytes: float | None = None
    shm_total_bytes: float | None = None
    shm_free_bytes: float | None = None
    numa_nodes: dict[str, dict[str, float]] = field(default_factory=dict)  # node -> {total, free}


@dataclass
class ProcessMemory:
    """Memory of one target's process tree on this host, summed over processes. Bytes."""

    target: str
    pids: list[int] = field(default_factory=list)
    rss_anon: float | None = None
    rss_shmem: float | None = None
    locked: float | None = None
    pinned: float | None = None
    gpus: list[tuple[str, str]] = field(default_factory=list)  # (gpu index, uuid) it uses
    # NUMA placement (issue 45, collectors/numa.py): bytes per node from /proc/PID/numa_maps,
    # and the share on nodes none of its GPUs sit on (None where either side is unknown).
    numa_bytes: dict[str, float] = field(default_factory=dict)
    numa_remote_ratio: float | None = None


@dataclass
class CollectorStatus:
    name: str
    success: bool
    duration_seconds: float
    error: str | None = None


@dataclass
class Snapshot:
    """Everything kvops knew at `time` (a time.monotonic() reading, for intervals)."""

    time: float
    targets: list[TargetSample] = field(default_factory=list)
    gpus: list[GpuSample] = field(default_factory=list)
    host: HostSample | None = None
    processes: list[ProcessMemory] = field(default_factory=list)
    collectors: list[CollectorStatus] = field(default_factory=list)

    def engines(self) -> list[EngineSample]:
        return [e for t in self.targets for e in t.engines]


# What a hardware or host collector reads: the host, or the GPUs it sees.
Reading = HostSample | list[GpuSample]


class Collector(Protocol):
    """A hardware or host collector (kvops.collectors): `name` is its `collector` label;
    `collect()` returns its reading or raises, which costs only its own series.

    A collector may set a class attribute `inline = True` when it reads only files that never
    block (procfs, sysfs, tmpfs): kvops.scrape.runner then calls it on the round's own thread
    while the targets answer, not on a worker (a driver call may hang; those stay on workers)."""

    name: str

    def collect(self) -> Reading: ...

    def close(self) -> None: ...
