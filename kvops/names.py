"""Every kvops_* metric: name, type, HELP and labels. The one source of names.

The exporter builds its families from these specs, the dashboard generator and the alert
tests check their expressions against them. Names follow Prometheus conventions: base
units (bytes, seconds), 0-1 ratios, `_total` on counters, no colon.
docs/DESIGN.md's contract table is the part users depend on; do not rename or drop those.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Literal

MetricType = Literal["gauge", "counter", "histogram"]
# Which snapshot object a bound series reads: EngineSample, LMCacheSample, GpuSample, HostSample.
Owner = Literal["engine", "lmcache", "gpu", "host"]

TARGET_LABELS: tuple[str, ...] = ("target", "model_name", "engine", "engine_kind")
GPU_LABELS: tuple[str, ...] = ("gpu", "uuid", "vendor")
LMCACHE_LABELS: tuple[str, ...] = ("target", "model_name", "worker_id", "engine_kind")


@dataclass(frozen=True)
class MetricSpec:
    """One kvops_* family and, where it is bound, the snapshot field it carries.

    The binding is the one table encoding (exporter), decoding (frames/kvops_exposition.py)
    and rates read, as dcgm-exporter's counters file is for DCGM fields:
    - `field` alone: one value per owner (labels = the owner's labels);
    - `split`: the last label tells fields apart, ((label value, field), ...);
    - `field` with `open_split`: the field is a dict keyed by the last label's value
      (vLLM's `source`, `reason`: values kvops passes through, not a closed set).
    - `field` with `info`: a string field carried as the last label's value (value 1).
    Histogram fields hold a snapshot.Histogram (buckets, sum, count)."""

    name: str  # as exposed: counters end in _total
    type: MetricType
    help: str
    labels: tuple[str, ...] = ()
    owner: Owner | None = None
    field: str | None = None
    split: tuple[tuple[str, str], ...] = ()
    open_split: bool = False
    info: bool = False  # the field is a string carried as the last label's value, value 1
    # An open split keyed by the engine's own tier name (vLLM's `1:fs`): exposed as two labels,
    # `tier` (its kind, snapshot.tier_kind) and `tier_name`, so two tiers of a kind stay apart.
    tier_name: bool = False

    @property
    def split_label(self) -> str | None:
        return self.labels[-1] if (self.split or self.open_split or self.info) else None

    @property
    def owner_labels(self) -> tuple[str, ...]:
        """The labels that name the owner (all but the split label)."""
        if self.split_label is None:
            return self.labels
        return self.labels[:-2] if self.tier_name else self.labels[:-1]

    @property
    def sample_names(self) -> tuple[str, ...]:
        """The names its samples are exposed under (a histogram's _bucket, _sum, _count)."""
        if self.type == "histogram":
            return (f"{self.name}_bucket", f"{self.name}_sum", f"{self.name}_count")
        return (self.name,)

    def fields(self) -> tuple[str, ...]:
        return tuple(f for _, f in self.split) if self.split else ((self.field,) if self.field else ())

    @property
    def family_name(self) -> str:
        """The name prometheus_client's *MetricFamily wants (it appends _total to counters)."""
        if self.type == "counter" and self.name.endswith("_total"):
            return self.name[: -len("_total")]
        return self.name


def _g(name: str, help_: str, labels: tuple[str, ...] = (), **bind: Any) -> MetricSpec:
    return MetricSpec(name, "gauge", help_, labels, **bind)


def _c(name: str, help_: str, labels: tuple[str, ...] = (), **bind: Any) -> MetricSpec:
    assert name.endswith("_total"), name
    return MetricSpec(name, "counter", help_, labels, **bind)


def _h(name: str, help_: str, labels: tuple[str, ...] = (), **bind: Any) -> MetricSpec:
    assert not name.endswith(("_total", "_bucket", "_sum", "_count")), name
    return MetricSpec(name, "histogram", help_, labels, **bind)


def _engine(kind: str, name: str, help_: str, extra: tuple[str, ...] = (), **bind: Any) -> MetricSpec:
    """A series of one engine (EngineSample), labelled target, model_name, engine, engine_kind."""
    make = {"gauge": _g, "counter": _c, "histogram": _h}[kind]
    return make(name, help_, (*TARGET_LABELS, *extra), owner="engine", **bind)


# --- exporter self-observation -----------------------------------------------------------
COLLECTOR_SUCCESS = _g("kvops_collector_success", "1 if the collector's last run succeeded.", ("collector",))
COLLECTOR_DURATION = _g(
    "kvops_collector_duration_seconds", "Wall time the collector took on this scrape.", ("collector",)
)
BUILD_INFO = _g("kvops_build_info", "kvops version that serves these metrics (value 1).", ("version",))

# --- vLLM targets ------------------------------------------------------------------------
TARGET_UP = _g("kvops_target_up", "1 if the last scrape of the target parsed.", ("target",))
TARGET_SCRAPE_DURATION = _g(
    "kvops_target_scrape_duration_seconds", "Time spent fetching and parsing the target.", ("target",)
)
KV_CACHE_USAGE = _engine(
    "gauge",
    "kvops_vllm_kv_cache_usage_ratio",
    "GPU KV cache usage, 0-1 (vllm:kv_cache_usage_perc, vllm:gpu_cache_usage_perc before 0.12; "
    "sglang:token_usage).",
    field="kv_cache_usage",
)
PREFIX_QUERIES = _engine(
    "counter",
    "kvops_prefix_cache_queries_tokens_total",
    "Prefix-cache lookups in tokens; tier=local is GPU HBM, tier=external the KV connector "
    "(offload tier). As counted by vLLM: 0.11.x counts external queries over the whole prompt.",
    ("tier",),
    split=(("local", "local_queries"), ("external", "external_queries")),
)
PREFIX_HITS = _engine(
    "counter",
    "kvops_prefix_cache_hits_tokens_total",
    "Prefix-cache hits in tokens; tier=local is GPU HBM, tier=external the KV connector (offload tier).",
    ("tier",),
    split=(("local", "local_hits"), ("external", "external_hits")),
)
TRANSFER_BYTES = _engine(
    "counter",
    "kvops_offload_transfer_bytes_total",
    "Bytes moved by KV offloading, summed over workers; direction=store is GPU to offload tier, "
    "load is back to GPU.",
    ("direction",),
    split=(("store", "store_bytes"), ("load", "load_bytes")),
)
TRANSFER_SECONDS = _engine(
    "counter",
    "kvops_offload_transfer_seconds_total",
    "Summed transfer time of KV offloading jobs over workers (not wall time): "
    "bytes/seconds is the DMA bandwidth while transferring.",
    ("direction",),
    split=(("store", "store_seconds"), ("load", "load_seconds")),
)
PREEMPTIONS = _engine(
    "counter", "kvops_vllm_preemptions_total", "Requests preempted by the scheduler.", field="preemptions"
)
REQUESTS_RUNNING = _engine(
    "gauge", "kvops_vllm_requests_running", "Requests in model execution batches.", field="requests_running"
)
REQUESTS_WAITING = _engine(
    "gauge", "kvops_vllm_requests_waiting", "Requests waiting to be scheduled.", field="requests_waiting"
)
CPU_TIER_BYTES = _engine(
    "gauge",
    "kvops_offload_cpu_tier_bytes",
    "Configured size of the CPU offload tier in bytes (vllm:kv_offload_config_info, else "
    "vllm:cache_config_info kv_offloading_size).",
    field="cpu_tier_bytes",
)
OFFLOAD_TIER_INFO = _engine(
    "gauge",
    "kvops_offload_tier_info",
    "The tier the engine's offload transfers go to (docs/tiers.md), value 1: host where the "
    "exposition names the CPU, else external (a connector that does not say its medium).",
    ("tier",),
    field="offload_tier",
    info=True,
)
# --- vLLM's offload surface (0.16-0.33; docs/research/vllm-metrics.md) -------------------
PROMPT_TOKENS = _engine(
    "counter",
    "kvops_prompt_tokens_total",
    "Prompt tokens by where they came from, as vLLM labels them (vllm:prompt_tokens_by_source, "
    "0.16+): source=local_compute (prefilled), local_cache_hit (GPU prefix cache), "
    "external_kv_transfer (KV connector / offload tier).",
    ("source",),
    field="prompt_tokens_by_source",
    open_split=True,
)
PROMPT_TOKENS_CACHED = _engine(
    "counter",
    "kvops_prompt_tokens_cached_total",
    "Prefix-cache hit tokens by the tier that served them (vllm:prompt_tokens_cached_by_source, "
    "0.32+; sglang:cached_tokens_total): source=device|host|p2p|disk|external_unspecified "
    "(SGLang: device|host|storage_<backend>).",
    ("source",),
    field="prompt_tokens_cached_by_source",
    open_split=True,
)
STORES_SKIPPED = _engine(
    "counter",
    "kvops_offload_stores_skipped_total",
    "Offload stores skipped because the store (reuse) threshold was not reached "
    "(vllm:kv_offload_stores_skipped, registered only with store_threshold >= 2).",
    field="stores_skipped",
)
ALLOCATION_FAILURES = _engine(
    "counter",
    "kvops_offload_allocation_failures_total",
    "Offload store allocations that failed: the tier was full and the store was dropped "
    "(vllm:kv_offload_allocation_failure, 0.26+; absent until the first failure).",
    field="allocation_failures",
)
LOOKUP_DELAY = _engine(
    "histogram",
    "kvops_offload_lookup_delay_seconds",
    "Offload lookup latency (vllm:kv_offload_lookup_{sync,async}_delay_seconds, 0.26+): mode=sync "
    "is one lookup call, async the time from a deferred lookup to its resolution.",
    ("mode",),
    split=(("sync", "lookup_sync_delay"), ("async", "lookup_async_delay")),
)
TIME_TO_FIRST_TOKEN = _engine(
    "histogram",
    "kvops_time_to_first_token_seconds",
    "Time to first token as the engine measured it, passed through with its own buckets "
    "(vllm:time_to_first_token_seconds): the latency offloading is meant to cut (docs/payoff.md).",
    field="ttft",
)
REQUEST_QUEUE_TIME = _engine(
    "histogram",
    "kvops_request_queue_time_seconds",
    "Time a request waited before it was scheduled, with the engine's own buckets "
    "(vllm:request_queue_time_seconds).",
    field="queue_time",
)
# --- vLLM multi-tier offloading (TieringOffloadingSpec; kvops/engines/vllm_tiering.py) -------
# tier: host (0:primary), disk (a filesystem tier), storage (object store, KVCR, remote), peer.
_TIERING = "vllm:kv_offload_tiering_"


def _per_tier(kind: str, name: str, help_: str, field: str) -> MetricSpec:
    """A vLLM tiering family: tier = the kind of docs/tiers.md, tier_name = vLLM's label (1:fs)."""
    return _engine(kind, name, help_, ("tier", "tier_name"), field=field, open_split=True, tier_name=True)


TIER_CHUNK_LOOKUPS = _per_tier(
    "counter",
    "kvops_offload_tier_chunk_lookups_total",
    f"Chunks looked up in each offload tier ({_TIERING}chunk_queries; tier=host is vLLM's 0:primary).",
    "tier_chunk_queries",
)
TIER_CHUNK_HITS = _per_tier(
    "counter",
    "kvops_offload_tier_chunk_hits_total",
    f"Chunks found in each offload tier ({_TIERING}chunk_hits).",
    "tier_chunk_hits",
)
TIER_READ_BYTES = _per_tier(
    "counter",
    "kvops_offload_tier_read_bytes_total",
    f"Bytes promoted from a secondary tier into the CPU primary ({_TIERING}read_bytes).",
    "tier_read_bytes",
)
TIER_READ_SECONDS = _per_tier(
    "counter",
    "kvops_offload_tier_read_seconds_total",
    f"Summed transfer time of those promotions ({_TIERING}read_time; tiers that time jobs only).",
    "tier_read_seconds",
)
TIER_WRITE_BYTES = _per_tier(
    "counter",
    "kvops_offload_tier_write_bytes_total",
    f"Bytes cascaded from the CPU primary into a secondary tier ({_TIERING}write_bytes).",
    "tier_write_bytes",
)
TIER_WRITE_SECONDS = _per_tier(
    "counter",
    "kvops_offload_tier_write_seconds_total",
    f"Summed transfer time of those cascades ({_TIERING}write_time).",
    "tier_write_seconds",
)
TIER_PROMOTION_FAILURES = _per_tier(
    "counter",
    "kvops_offload_tier_promotion_failures_total",
    f"Failed promotion jobs per tier ({_TIERING}promotion_job_failures; absent until the first).",
    "tier_promotion_failures",
)
TIER_CASCADE_FAILURES = _per_tier(
    "counter",
    "kvops_offload_tier_cascade_failures_total",
    f"Failed cascade jobs per tier ({_TIERING}cascade_job_failures; absent until the first).",
    "tier_cascade_failures",
)
TIER_ACTIVE_PROMOTIONS = _per_tier(
    "gauge",
    "kvops_offload_tier_active_promotions",
    f"Promotion jobs in flight per tier ({_TIERING}active_promotion_jobs).",
    "tier_active_promotions",
)
TIER_ACTIVE_CASCADES = _per_tier(
    "gauge",
    "kvops_offload_tier_active_cascades",
    f"Cascade jobs in flight per tier ({_TIERING}active_cascade_jobs): a backlog that never drains "
    "means the tier cannot keep up with what the primary evicts.",
    "tier_active_cascades",
)
TIER_PRIMARY_READ_USAGE = _per_tier(
    "gauge",
    "kvops_offload_tier_primary_read_usage_ratio",
    f"Share of the CPU primary pinned by cascades to each tier, 0-1 ({_TIERING}primary_read_usage_perc).",
    "tier_primary_read_usage",
)
TIER_PRIMARY_WRITE_USAGE = _per_tier(
    "gauge",
    "kvops_offload_tier_primary_write_usage_ratio",
    f"Share of the CPU primary pinned by promotions from a tier, 0-1 ({_TIERING}primary_write_usage_perc).",
    "tier_primary_write_usage",
)
TIER_LOOKUP_DELAY = _per_tier(
    "histogram",
    "kvops_offload_tier_lookup_delay_seconds",
    f"Blocking time of one per-chunk tier lookup ({_TIERING}lookup_sync_delay_seconds).",
    "tier_lookup_delay",
)
TIER_PROMOTION_LATENCY = _per_tier(
    "histogram",
    "kvops_offload_tier_promotion_latency_seconds",
    f"Promotion job latency from creation to completion, queueing included, successes and failures "
    f"together ({_TIERING}promotion_latency_seconds, 0.33+).",
    "tier_promotion_latency",
)
PROMOTION_ALLOCATION_FAILURES = _engine(
    "counter",
    "kvops_offload_promotion_allocation_failures_total",
    f"Promotions refused because the CPU primary had no room ({_TIERING}promotion_allocation_failures).",
    field="promotion_allocation_failures",
)

# --- SGLang HiCache L3 storage and eviction (kvops/engines/sglang_storage.py) -----------------
STORAGE_TOKENS = _engine(
    "counter",
    "kvops_offload_storage_tokens_total",
    "Tokens moved between host memory and L3 storage (sglang:prefetched_tokens, backuped_tokens): "
    "direction=load (prefetched from storage) or store (backed up to it).",
    ("direction",),
    split=(("load", "storage_prefetched_tokens"), ("store", "storage_backed_up_tokens")),
)
STORAGE_UNFULFILLED = _engine(
    "counter",
    "kvops_offload_storage_unfulfilled_tokens_total",
    "Storage-hit tokens that did not become a usable prefetch, by SGLang's reason "
    "(sglang:storage_prefetch_unfulfilled_tokens; host_capacity, deadline, ...).",
    ("reason",),
    field="storage_unfulfilled_tokens",
    open_split=True,
)
STORAGE_OP_BANDWIDTH = _engine(
    "histogram",
    "kvops_offload_storage_op_bandwidth_bytes_per_second",
    "Per-op L3 wire bandwidth (sglang:{prefetch,backup}_bandwidth, GB/s converted to bytes/s): "
    "direction=load (prefetch) or store (backup).",
    ("direction",),
    split=(("load", "storage_prefetch_bandwidth"), ("store", "storage_backup_bandwidth")),
)
EVICTED_TOKENS = _engine(
    "counter",
    "kvops_offload_evicted_tokens_total",
    "Device KV token slots freed by eviction, backed up or not (sglang:evicted_tokens).",
    field="evicted_tokens",
)
EVICTION_SECONDS = _engine(
    "histogram",
    "kvops_offload_eviction_seconds",
    "Time one device eviction pass took (sglang:eviction_duration_seconds).",
    field="eviction_seconds",
)

# --- vLLM SimpleCPUOffloadConnector (kvops/engines/vllm_simple_offload.py): blocks, never bytes --
SIMPLE_SAVE_OUTCOMES = _engine(
    "counter",
    "kvops_offload_simple_save_outcomes_blocks_total",
    "Store decisions of SimpleCPUOffloadConnector by outcome, in blocks "
    "(vllm:simple_kv_offload_save_outcomes_total): outcome=dropped_cpu_full is the pool being full.",
    ("outcome",),
    field="save_outcomes",
    open_split=True,
)
SIMPLE_LOAD_BLOCKS = _engine(
    "counter",
    "kvops_offload_simple_load_blocks_total",
    "Blocks SimpleCPUOffloadConnector loaded back to the GPU (vllm:simple_kv_offload_load_blocks_total).",
    field="simple_load_blocks",
)
SIMPLE_BACKEND = _engine(
    "gauge",
    "kvops_offload_simple_backend_info",
    "SimpleCPUOffloadConnector's pool medium, value 1: backend=cpu (host tier) or disk "
    "(vllm:simple_kv_offload_info).",
    ("backend",),
    field="simple_backend",
    info=True,
)
SIMPLE_BLOCKS = _engine(
    "gauge", "kvops_offload_simple_blocks",
    "SimpleCPUOffloadConnector pool blocks: state=used (pinned by transfers or hits), pending_store, "
    "capacity (vllm:simple_kv_offload_{used_blocks,pending_store_blocks,info}).",
    ("state",),
    split=(("used", "simple_used_blocks"), ("pending_store", "simple_pending_store_blocks"),
           ("capacity", "simple_capacity_blocks")),
)  # fmt: skip
TRANSFER_SIZE = _engine(
    "histogram",
    "kvops_offload_transfer_size_bytes",
    "Size of one offload transfer job in bytes (vllm:kv_offload_{store,load}_size, "
    "vllm:kv_offload_size{transfer_type} 0.16-0.23).",
    ("direction",),
    split=(("store", "store_size"), ("load", "load_size")),
)
CPU_ALLOCATION_CHUNKS = _engine(
    "histogram",
    "kvops_offload_cpu_allocation_chunks",
    "CPU chunks requested by each offload store allocation (vllm:kv_offload_cpu_allocation_size, 0.26+).",
    field="cpu_allocation_chunks",
)
CPU_IN_FLIGHT = _engine(
    "gauge",
    "kvops_offload_cpu_in_flight_ratio",
    "Share of the CPU offload tier's chunks pinned by in-flight transfers, 0-1 "
    "(vllm:kv_offload_cpu_cache_{,read_,write_}usage_perc): NOT how full the tier is; op=any|read|write.",
    ("op",),
    split=(("any", "cpu_in_flight"), ("read", "cpu_in_flight_read"), ("write", "cpu_in_flight_write")),
)
WAITING_BY_REASON = _engine(
    "gauge",
    "kvops_vllm_requests_waiting_by_reason",
    "Waiting requests by why they wait (vllm:num_requests_waiting_by_reason, 0.20+): "
    "reason=capacity (no KV space), deferred.",
    ("reason",),
    field="requests_waiting_by_reason",
    open_split=True,
)
KV_FETCH_BY_STAGE = _engine(
    "gauge",
    "kvops_vllm_requests_kv_fetch_by_stage",
    "Requests fetching KV from the connector, by stage (vllm:num_requests_kv_fetch_by_stage, 0.32+, "
    "KV consumers only).",
    ("stage",),
    field="requests_kv_fetch_by_stage",
    open_split=True,
)
KV_BLOCK_LIFETIME = _engine(
    "histogram",
    "kvops_vllm_kv_block_lifetime_seconds",
    "GPU KV block lifetime, sampled (vllm:kv_block_lifetime_seconds, with --kv-cache-metrics).",
    field="kv_block_lifetime",
)
KV_BLOCK_IDLE_BEFORE_EVICT = _engine(
    "histogram",
    "kvops_vllm_kv_block_idle_before_evict_seconds",
    "Idle time of a GPU KV block before eviction, sampled (vllm:kv_block_idle_before_evict_seconds).",
    field="kv_block_idle_before_evict",
)
KV_BLOCK_REUSE_GAP = _engine(
    "histogram",
    "kvops_vllm_kv_block_reuse_gap_seconds",
    "Time between reuses of a GPU KV block, sampled (vllm:kv_block_reuse_gap_seconds).",
    field="kv_block_reuse_gap",
)
PROCESS_MEMORY = _g(
    "kvops_vllm_process_memory_bytes",
    "Memory of the target's process tree on this host, summed over processes "
    "(kind=rss_anon|rss_shmem|locked|pinned from /proc/PID/status).",
    ("target", "kind"),
)
PROCESS_NUMA_MEMORY = _g(
    "kvops_vllm_process_numa_memory_bytes",
    "Memory of the target's process tree per NUMA node (/proc/PID/numa_maps, read at most once a minute).",
    ("target", "node"),
)
PROCESS_NUMA_REMOTE = _g(
    "kvops_vllm_process_numa_remote_ratio",
    "Share of the target's process memory on NUMA nodes none of its GPUs sit on, 0-1: an offload pool "
    "on the far socket (playbooks/KvopsOffloadPoolRemoteNuma.md).",
    ("target",),
)
TARGET_GPU_INFO = _g(
    "kvops_target_gpu_info", "Joins a target to a GPU its processes use (value 1).", ("target", "gpu", "uuid")
)

# --- other engines' tiers (docs/tiers.md) ------------------------------------------------
TRANSFER_TOKENS = _engine(
    "counter",
    "kvops_offload_transfer_tokens_total",
    "Tokens copied by KV offloading, one rank's logical count (sglang:hicache_backup_tokens, "
    "sglang:load_back_tokens): direction=store into the offload tier, load back to the GPU.",
    ("direction",),
    split=(("store", "store_tokens"), ("load", "load_tokens")),
)
DROPPED_TOKENS = _engine(
    "counter",
    "kvops_offload_dropped_tokens_total",
    "KV tokens destroyed without a copy in the tier below (sglang:hicache_dropped_tokens): the "
    "offload tier could not take them.",
    field="dropped_tokens",
)
TIER_USED_TOKENS = _engine(
    "gauge",
    "kvops_offload_tier_used_tokens",
    "Tokens held by a tier (sglang:hicache_host_used_tokens); tier per docs/tiers.md.",
    ("tier",),
    field="tier_used_tokens",
    open_split=True,
)
TIER_CAPACITY_TOKENS = _engine(
    "gauge",
    "kvops_offload_tier_capacity_tokens",
    "Tokens a tier can hold (sglang:hicache_host_total_tokens).",
    ("tier",),
    field="tier_capacity_tokens",
    open_split=True,
)
TIER_USED_BYTES = _engine(
    "gauge",
    "kvops_offload_tier_used_bytes",
    "Bytes held by a tier (trtllm host KV cache, LMCache local and remote storage usage).",
    ("tier",),
    field="tier_used_bytes",
    open_split=True,
)
TIER_CAPACITY_BYTES = _engine(
    "gauge",
    "kvops_offload_tier_capacity_bytes",
    "Bytes a tier can hold, where the engine says.",
    ("tier",),
    field="tier_capacity_bytes",
    open_split=True,
)
TRANSFER_BLOCKS = _engine(
    "counter",
    "kvops_offload_transfer_blocks_total",
    "KV blocks moved between tiers, by edge (Dynamo KVBM: kvbm_offload_blocks_*, "
    "kvbm_onboard_blocks_*), edge=<from>_to_<to> with tiers per docs/tiers.md. Blocks, not "
    "bytes: the exposition does not give the block size.",
    ("edge",),
    field="transfer_blocks",
    open_split=True,
)
TRANSFER_BYTES_BY_EDGE = _engine(
    "counter",
    "kvops_offload_edge_bytes_total",
    "Bytes moved between tiers by edge, where the engine counts bytes per tier "
    "(trtllm_kv_cache_{offload,onboard}_bytes, llm-d's vllm:kv_offload_total_bytes_{cpu,sharedstorage}).",
    ("edge",),
    field="transfer_bytes_by_edge",
    open_split=True,
)
TRANSFER_SECONDS_BY_EDGE = _engine(
    "counter",
    "kvops_offload_edge_seconds_total",
    "Summed transfer time by edge, where the engine counts it per tier (llm-d's "
    "vllm:kv_offload_total_time_{cpu,sharedstorage}): with kvops_offload_edge_bytes_total, the "
    "bandwidth of that edge while transferring.",
    ("edge",),
    field="transfer_seconds_by_edge",
    open_split=True,
)
FAILED_BLOCKS_BY_EDGE = _engine(
    "counter",
    "kvops_offload_edge_failed_blocks_total",
    "KV blocks whose transfer failed, by edge (Dynamo KVBM: kvbm_object_write_failures -> "
    "gpu_to_storage, kvbm_object_read_failures -> storage_to_gpu). Blocks, not bytes.",
    ("edge",),
    field="failed_blocks_by_edge",
    open_split=True,
)
TIER_UTILIZATION = _engine(
    "gauge",
    "kvops_offload_tier_usage_ratio",
    "How full a tier is, 0-1, as the engine computes it (trtllm_kv_cache_host_utilization: "
    "host pool used / max blocks).",
    ("tier",),
    field="tier_utilization",
    open_split=True,
)
MATCHED_TOKENS = _engine(
    "counter",
    "kvops_offload_matched_tokens_total",
    "Tokens an offload manager found in its tiers (kvbm_matched_tokens). Inside vLLM these are "
    "the connector's hits vLLM already counts as tier=external: never add the two.",
    field="matched_tokens",
)
TIER_HIT_RATE = _engine(
    "gauge",
    "kvops_offload_tier_hit_rate_ratio",
    "A tier's hit rate as the engine computes it, 0-1 (kvbm_host_cache_hit_rate, "
    "kvbm_disk_cache_hit_rate): the engine's own window, not kvops's interval.",
    ("tier",),
    field="tier_hit_rate",
    open_split=True,
)

# --- LMCache (kept apart from the prefix-cache tiers: vLLM already counts connector hits
# as tier=external; adding these in would count them twice) ------------------------------
LMCACHE_REQUESTED_TOKENS = _c(
    "kvops_lmcache_requested_tokens_total",
    "Tokens requested from LMCache (lmcache:num_requested_tokens).",
    LMCACHE_LABELS,
    owner="lmcache",
    field="requested_tokens",
)
LMCACHE_HIT_TOKENS = _c(
    "kvops_lmcache_hit_tokens_total",
    "Tokens found in LMCache (lmcache:num_hit_tokens).",
    LMCACHE_LABELS,
    owner="lmcache",
    field="hit_tokens",
)
LMCACHE_STORED_TOKENS = _c(
    "kvops_lmcache_stored_tokens_total",
    "Tokens stored into LMCache (lmcache:num_stored_tokens).",
    LMCACHE_LABELS,
    owner="lmcache",
    field="stored_tokens",
)
LMCACHE_LOOKUP_TOKENS = _c(
    "kvops_lmcache_lookup_tokens_total",
    "Tokens looked up in LMCache (lmcache:num_lookup_tokens).",
    LMCACHE_LABELS,
    owner="lmcache",
    field="lookup_tokens",
)
LMCACHE_LOOKUP_HITS = _c(
    "kvops_lmcache_lookup_hits_tokens_total",
    "Lookup hits in LMCache, tokens (lmcache:num_lookup_hits).",
    LMCACHE_LABELS,
    owner="lmcache",
    field="lookup_hits",
)
LMCACHE_RETRIEVE_REQUESTS = _c(
    "kvops_lmcache_retrieve_requests_total",
    "Retrieve requests sent to LMCache.",
    LMCACHE_LABELS,
    owner="lmcache",
    field="retrieve_requests",
)
LMCACHE_STORE_REQUESTS = _c(
    "kvops_lmcache_store_requests_total",
    "Store requests sent to LMCache.",
    LMCACHE_LABELS,
    owner="lmcache",
    field="store_requests",
)
LMCACHE_LOOKUP_REQUESTS = _c(
    "kvops_lmcache_lookup_requests_total",
    "Lookup requests sent to LMCache.",
    LMCACHE_LABELS,
    owner="lmcache",
    field="lookup_requests",
)
LMCACHE_LOCAL_CACHE_USAGE = _g(
    "kvops_lmcache_local_cache_usage_bytes",
    "LMCache local cache usage (lmcache:local_cache_usage).",
    LMCACHE_LABELS,
    owner="lmcache",
    field="local_cache_usage_bytes",
)


def _lmcache(kind: str, name: str, help_: str, extra: tuple[str, ...] = (), **bind: Any) -> MetricSpec:
    make = {"gauge": _g, "counter": _c, "histogram": _h}[kind]
    return make(name, help_, (*LMCACHE_LABELS, *extra), owner="lmcache", **bind)


LMCACHE_VLLM_HIT_TOKENS = _lmcache(
    "counter",
    "kvops_lmcache_vllm_hit_tokens_total",
    "Tokens vLLM's own GPU prefix cache already held, as LMCache saw them (lmcache:num_vllm_hit_tokens).",
    field="vllm_hit_tokens",
)
LMCACHE_PROMPT_TOKENS = _lmcache(
    "counter",
    "kvops_lmcache_prompt_tokens_total",
    "Prompt tokens LMCache handled (lmcache:num_prompt_tokens).",
    field="prompt_tokens",
)
LMCACHE_REMOTE_BYTES = _lmcache(
    "counter",
    "kvops_lmcache_remote_bytes_total",
    "Bytes LMCache moved to and from its remote backend (lmcache:num_remote_{read,write}_bytes): "
    "direction=read (remote to local) or write.",
    ("direction",),
    split=(("read", "remote_read_bytes"), ("write", "remote_write_bytes")),
)
LMCACHE_EVICTIONS = _lmcache(
    "counter",
    "kvops_lmcache_evictions_total",
    "Evictions from LMCache's local CPU cache (lmcache:local_cpu_evict_count).",
    field="evictions",
)
LMCACHE_SLOW_RETRIEVALS = _lmcache(
    "counter",
    "kvops_lmcache_slow_retrievals_total",
    "Retrievals LMCache flagged slow (lmcache:num_slow_retrieval_by_{time,speed}); by=time|speed.",
    ("by",),
    split=(("time", "slow_retrievals_by_time"), ("speed", "slow_retrievals_by_speed")),
)
LMCACHE_STORAGE_USAGE = _lmcache(
    "gauge",
    "kvops_lmcache_storage_usage_bytes",
    "LMCache storage in use beyond the local CPU cache: tier=disk (lmcache:local_storage_usage), "
    "storage (remote backend, lmcache:remote_cache_usage).",
    ("tier",),
    split=(("disk", "local_storage_usage_bytes"), ("storage", "remote_cache_usage_bytes")),
)
LMCACHE_OPERATION_SECONDS = _lmcache(
    "histogram",
    "kvops_lmcache_operation_seconds",
    "Duration of LMCache operations in seconds: op=retrieve|store (lmcache:time_to_retrieve, "
    "time_to_store, seconds), remote_get|remote_put (lmcache:remote_time_to_{get,put}, exposed in "
    "milliseconds, converted).",
    ("op",),
    split=(
        ("retrieve", "retrieve_seconds"),
        ("store", "store_seconds"),
        ("remote_get", "remote_get_seconds"),
        ("remote_put", "remote_put_seconds"),
    ),
)
LMCACHE_HITS_BY_LEVEL = _lmcache(
    "counter",
    "kvops_lmcache_lookup_hits_by_level_tokens_total",
    "Lookup hit tokens by the LMCache level that held them (multi-process mode, "
    "lmcache_mp_lookup_hit_{l1,l2}_tokens): level=l1 (LMCache's memory) or l2 (its storage backends).",
    ("level",),
    split=(("l1", "l1_hit_tokens"), ("l2", "l2_hit_tokens")),
)
LMCACHE_L1_CHUNKS = _lmcache(
    "counter",
    "kvops_lmcache_l1_chunks_total",
    "Chunks read from, written to and evicted from LMCache's L1 (multi-process mode, "
    "lmcache_mp_l1_{read,write,evicted}_chunks); op=read|write|evict.",
    ("op",),
    split=(("read", "l1_read_chunks"), ("write", "l1_write_chunks"), ("evict", "l1_evicted_chunks")),
)
LMCACHE_L1_ALLOCATION_FAILURES = _lmcache(
    "counter",
    "kvops_lmcache_l1_allocation_failures_chunks_total",
    "Chunks LMCache's L1 could not allocate room for (multi-process mode, "
    "lmcache_mp_l1_allocation_failure_chunks): during=l1_store|l2_prefetch.",
    ("during",),
    field="l1_allocation_failures",
    open_split=True,
)
LMCACHE_L1_READ_FAILURES = _lmcache(
    "counter",
    "kvops_lmcache_l1_read_failures_chunks_total",
    "L1 reads that failed after a lookup found the chunk (lmcache_mp_l1_read_failure_chunks), "
    "by reason (not_found, write_locked); should stay near 0.",
    ("reason",),
    field="l1_read_failures",
    open_split=True,
)
LMCACHE_L2_PREFETCH_FAILURES = _lmcache(
    "counter",
    "kvops_lmcache_l2_prefetch_failures_chunks_total",
    "Chunks expected in L2 that failed to load into L1 (lmcache_mp_l2_prefetch_failure_chunks), "
    "by reason: l1_oom (no room in L1), l1_contended, not_found.",
    ("reason",),
    field="l2_prefetch_failures",
    open_split=True,
)
LMCACHE_L2_CHUNKS = _lmcache(
    "counter",
    "kvops_lmcache_l2_chunks_total",
    "Chunks stored to L2 and prefetched from it (lmcache_mp_l2_store_completed_objects_chunks, "
    "lmcache_mp_l2_prefetch_load_completed_chunks); op=store|prefetch.",
    ("op",),
    split=(("store", "l2_stored_chunks"), ("prefetch", "l2_prefetched_chunks")),
)
LMCACHE_L1_USAGE = _lmcache(
    "gauge",
    "kvops_lmcache_l1_usage_bytes",
    "Bytes held in LMCache's L1 (lmcache_mp_l1_memory_usage_bytes).",
    field="l1_usage_bytes",
)
LMCACHE_L1_USAGE_RATIO = _lmcache(
    "gauge",
    "kvops_lmcache_l1_usage_ratio",
    "LMCache's L1 used over total, 0-1 (lmcache_mp_l1_usage_ratio).",
    field="l1_usage_ratio",
)
LMCACHE_L2_USAGE = _lmcache(
    "gauge",
    "kvops_lmcache_l2_usage_bytes",
    "Bytes held in each L2 adapter (lmcache_mp_l2_usage_bytes), by l2_name.",
    ("l2_name",),
    field="l2_usage_bytes",
    open_split=True,
)
LMCACHE_SPEED = _lmcache(
    "histogram",
    "kvops_lmcache_speed_tokens_per_second",
    "LMCache retrieve and store speed in tokens per second (lmcache:{retrieve,store}_speed); "
    "op=retrieve|store.",
    ("op",),
    split=(("retrieve", "retrieve_speed"), ("store", "store_speed")),
)

# --- issue 42 (h42c): SGLang 0.5.23, LMCache legacy remote health, unread families ----------
OFFLOAD_STORAGE_PREFETCH_HIT_TOKENS = _engine(
    "counter",
    "kvops_offload_storage_prefetch_hit_tokens_total",
    "Tokens an L3 storage lookup found, before host allocation or transfer "
    "(sglang:storage_prefetch_hit_tokens); prefetched tokens are what became usable.",
    field="storage_prefetch_hit_tokens",
)
OFFLOAD_STORAGE_DEFERRED_TOKENS = _engine(
    "counter",
    "kvops_offload_storage_deferred_tokens_total",
    "L3 prefetch tokens deferred for later by a transient capacity reason "
    "(sglang:storage_prefetch_deferred_tokens; host_capacity, device_capacity).",
    ("reason",),
    field="storage_deferred_tokens",
    open_split=True,
)
OFFLOAD_STORAGE_BACKUP_DROPPED_TOKENS = _engine(
    "counter",
    "kvops_offload_storage_backup_dropped_tokens_total",
    "Backup tokens that never reached L3 storage (sglang:hicache_backup_dropped_tokens): the write "
    "path lagging device churn; the span is rewritten only on a later recompute.",
    field="backup_dropped_tokens",
)
OFFLOAD_STORAGE_AUX_ALLOC_FAILED_TOKENS = _engine(
    "counter",
    "kvops_offload_storage_aux_alloc_failed_tokens_total",
    "L3 prefetch tokens forfeited because an auxiliary host pool (SWA window, mamba) could not "
    "allocate staging (sglang:hicache_prefetch_aux_alloc_failed_tokens): the whole fetch is lost.",
    field="prefetch_aux_alloc_failed_tokens",
)
KV_POOL_TOKENS = _engine(
    "gauge",
    "kvops_kv_pool_tokens",
    "The GPU KV pool in tokens (sglang:kv_{available,evictable,used}_tokens): state=available (free), "
    "evictable (cached, reclaimable for new requests), used (locked by running requests).",
    ("state",),
    split=(
        ("available", "kv_available_tokens"),
        ("evictable", "kv_evictable_tokens"),
        ("used", "kv_used_tokens"),
    ),
)
KV_POOL_CAPACITY_TOKENS = _engine(
    "gauge",
    "kvops_kv_pool_capacity_tokens",
    "Tokens the GPU KV pool holds at most (sglang:max_total_num_tokens).",
    field="kv_capacity_tokens",
)
OFFLOAD_LOAD_BACK_SECONDS = _engine(
    "histogram",
    "kvops_offload_load_back_seconds",
    "Time one load-back from host memory to the GPU took, the lowest rank's "
    "(sglang:load_back_duration_seconds).",
    field="load_back_duration",
)
LMCACHE_REMOTE_FAILURES = _lmcache(
    "counter",
    "kvops_lmcache_remote_failures_total",
    "Failed operations on LMCache's remote backend (lmcache:put_failed_count, "
    "lmcache:get_blocking_failed_count: gauges holding the backend's running counts); op=put|get_blocking.",
    ("op",),
    split=(("put", "remote_put_failures"), ("get_blocking", "remote_get_blocking_failures")),
)
LMCACHE_REMOTE_PINGS = _lmcache(
    "counter",
    "kvops_lmcache_remote_pings_total",
    "Pings of LMCache's remote backend by outcome (lmcache:remote_ping_{successes,errors}); "
    "outcome=success|error.",
    ("outcome",),
    split=(("success", "remote_ping_successes"), ("error", "remote_ping_errors")),
)
LMCACHE_REMOTE_PING_LATENCY = _lmcache(
    "gauge",
    "kvops_lmcache_remote_ping_latency_seconds",
    "Latency of the latest ping of LMCache's remote backend (lmcache:remote_ping_latency, ms converted).",
    field="remote_ping_latency_seconds",
)
LMCACHE_LOCAL_CPU_EVICT_FAILURES = _lmcache(
    "counter",
    "kvops_lmcache_local_cpu_evict_failures_total",
    "Evictions LMCache's local CPU backend failed (lmcache:local_cpu_evict_failed_count).",
    field="local_cpu_evict_failures",
)
LMCACHE_FORCED_UNPINS = _lmcache(
    "counter",
    "kvops_lmcache_forced_unpins_total",
    "Pinned LMCache objects unpinned by timeout (lmcache:forced_unpin_count): a reader that never "
    "released them.",
    field="forced_unpins",
)
TARGET_UNREAD_FAMILIES = _g(
    "kvops_target_unread_families",
    "KV-related families on the target's page that no kvops reader consumes (from its # TYPE lines; "
    "`kvops top --once --json` lists them as unread_families).",
    ("target",),
)

# --- GPUs (collectors/nvidia.py, collectors/amd.py) ----------------------------------------
GPU_INFO = _g("kvops_gpu_info", "GPU identity (value 1).", (*GPU_LABELS, "name", "pci_bus_id"))
GPU_MEMORY_USED = _g(
    "kvops_gpu_memory_used_bytes", "GPU memory in use.", GPU_LABELS, owner="gpu", field="memory_used_bytes"
)
GPU_MEMORY_TOTAL = _g(
    "kvops_gpu_memory_total_bytes",
    "GPU memory installed.",
    GPU_LABELS,
    owner="gpu",
    field="memory_total_bytes",
)
GPU_UTILIZATION = _g(
    "kvops_gpu_utilization_ratio",
    "GPU busy fraction over the driver's sample period.",
    GPU_LABELS,
    owner="gpu",
    field="utilization",
)
GPU_PCIE_TX = _c(
    "kvops_gpu_pcie_transmit_bytes_total",
    "Bytes the GPU sent over PCIe (device to host).",
    GPU_LABELS,
    owner="gpu",
    field="pcie_tx_bytes",
)
GPU_PCIE_RX = _c(
    "kvops_gpu_pcie_receive_bytes_total",
    "Bytes the GPU received over PCIe (host to device).",
    GPU_LABELS,
    owner="gpu",
    field="pcie_rx_bytes",
)
GPU_PCIE_TX_RATE = _g(
    "kvops_gpu_pcie_transmit_bytes_per_second",
    "PCIe transmit throughput sampled by the driver, where the device has no byte counter.",
    GPU_LABELS,
    owner="gpu",
    field="pcie_tx_bytes_per_second",
)
GPU_PCIE_RX_RATE = _g(
    "kvops_gpu_pcie_receive_bytes_per_second",
    "PCIe receive throughput sampled by the driver, where the device has no byte counter.",
    GPU_LABELS,
    owner="gpu",
    field="pcie_rx_bytes_per_second",
)
GPU_PCIE_LINK_MAX = _g(
    "kvops_gpu_pcie_link_max_bytes_per_second",
    "Usable PCIe bandwidth per direction from the current link generation and width, after encoding.",
    GPU_LABELS,
    owner="gpu",
    field="pcie_link_max_bytes_per_second",
)
GPU_PCIE_REPLAYS = _c(
    "kvops_gpu_pcie_replay_total",
    "PCIe replays (link-level retransmissions).",
    GPU_LABELS,
    owner="gpu",
    field="pcie_replays",
)
GPU_NVLINK_TX = _c(
    "kvops_gpu_nvlink_transmit_bytes_total",
    "Bytes sent over an NVLink link.",
    (*GPU_LABELS, "link"),
    owner="gpu",
    field="nvlink_tx_bytes",
    open_split=True,
)
GPU_NVLINK_RX = _c(
    "kvops_gpu_nvlink_receive_bytes_total",
    "Bytes received over an NVLink link.",
    (*GPU_LABELS, "link"),
    owner="gpu",
    field="nvlink_rx_bytes",
    open_split=True,
)
GPU_XGMI_READ = _c(
    "kvops_gpu_xgmi_read_bytes_total",
    "Bytes read over an AMD XGMI link.",
    (*GPU_LABELS, "link"),
    owner="gpu",
    field="xgmi_read_bytes",
    open_split=True,
)
GPU_XGMI_WRITE = _c(
    "kvops_gpu_xgmi_write_bytes_total",
    "Bytes written over an AMD XGMI link.",
    (*GPU_LABELS, "link"),
    owner="gpu",
    field="xgmi_write_bytes",
    open_split=True,
)
GPU_PCIE_LINK_GENERATION = _g(
    "kvops_gpu_pcie_link_generation",
    "PCIe link generation; kind=current (drops at idle with power saving) or max (device and slot).",
    (*GPU_LABELS, "kind"),
    owner="gpu",
    split=(("current", "pcie_link_gen"), ("max", "pcie_link_gen_max")),
)
GPU_PCIE_LINK_WIDTH = _g(
    "kvops_gpu_pcie_link_width_lanes",
    "PCIe link width in lanes; kind=current or max.",
    (*GPU_LABELS, "kind"),
    owner="gpu",
    split=(("current", "pcie_link_width"), ("max", "pcie_link_width_max")),
)
GPU_GTT_USED = _g(
    "kvops_gpu_gtt_used_bytes", "AMD GTT in use: host memory mapped for the GPU (amdsmi).", GPU_LABELS
)
GPU_GTT_TOTAL = _g("kvops_gpu_gtt_total_bytes", "AMD GTT size: host memory the GPU may map.", GPU_LABELS)
GPU_PROCESS_MEMORY = _g(
    "kvops_gpu_process_memory_bytes",
    "GPU memory a process uses (NVML usedGpuMemory, amdsmi vram_mem); absent where the driver cannot say.",
    (*GPU_LABELS, "pid"),
)

# --- GPU host link (issue 45, collectors/nvidia_host_link.py): the link host<->GPU copies ride ----
HOST_LINK_LABELS: tuple[str, ...] = (*GPU_LABELS, "kind")
GPU_HOST_LINK_INFO = _g(
    "kvops_gpu_host_link_info",
    "The link that carries the GPU's host copies (value 1): kind=pcie, or c2c (NVLink-C2C, Grace).",
    HOST_LINK_LABELS,
    owner="gpu",
    field="host_link_kind",
    info=True,
)
GPU_HOST_LINK_MAX = _g(
    "kvops_gpu_host_link_max_bytes_per_second",
    "Usable host-link bandwidth per direction from the driver: PCIe generation x width, "
    "C2C link count x NVML field 172.",
    HOST_LINK_LABELS,
    owner="gpu",
    field="host_link_max_bytes_per_second",
    open_split=True,
)
GPU_HOST_LINK_TX = _c(
    "kvops_gpu_host_link_transmit_bytes_total",
    "Bytes the GPU sent over its host link (device to host); C2C: GPM data rate integrated between scrapes.",
    HOST_LINK_LABELS,
    owner="gpu",
    field="host_link_tx_bytes",
    open_split=True,
)
GPU_HOST_LINK_RX = _c(
    "kvops_gpu_host_link_receive_bytes_total",
    "Bytes the GPU received over its host link (host to device); C2C: GPM data rate integrated between "
    "scrapes.",
    HOST_LINK_LABELS,
    owner="gpu",
    field="host_link_rx_bytes",
    open_split=True,
)
GPU_HOST_LINK_TX_RATE = _g(
    "kvops_gpu_host_link_transmit_bytes_per_second",
    "Host-link transmit rate the driver measured (GPM over the last scrape interval, or the PCIe sample).",
    HOST_LINK_LABELS,
    owner="gpu",
    field="host_link_tx_bytes_per_second",
    open_split=True,
)
GPU_HOST_LINK_RX_RATE = _g(
    "kvops_gpu_host_link_receive_bytes_per_second",
    "Host-link receive rate the driver measured (GPM over the last scrape interval, or the PCIe sample).",
    HOST_LINK_LABELS,
    owner="gpu",
    field="host_link_rx_bytes_per_second",
    open_split=True,
)
GPU_HOST_LINK_ERRORS = _c(
    "kvops_gpu_host_link_errors_total",
    "Host-link health counters from the driver: counter=replay, l0_to_recovery, naks_received, bad_tlp, "
    "... (PCIe, NVML fields 169, 173-182), c2c_error_interrupts, c2c_replay, c2c_replay_b2b "
    "(fields 231-233).",
    (*HOST_LINK_LABELS, "counter"),
)
GPU_AMD_PCIE_BANDWIDTH = _g(
    "kvops_gpu_amd_pcie_bandwidth",
    "AMD GPU metrics table's PCIe bandwidth, both directions together, raw (figure=acc|inst; unit and "
    "metrics_table version as labels); absent where the firmware lacks it.",
    (*GPU_LABELS, "figure", "unit", "metrics_table"),
)
GPU_LINK_READ = _c(
    "kvops_gpu_link_read_bytes_total",
    "Bytes an AMD GPU read over one of its links (amdsmi_get_link_metrics, KB x 1024), with the peer.",
    (*GPU_LABELS, "link", "peer", "link_type"),
)
GPU_LINK_WRITE = _c(
    "kvops_gpu_link_write_bytes_total",
    "Bytes an AMD GPU wrote over one of its links (amdsmi_get_link_metrics, KB x 1024), with the peer.",
    (*GPU_LABELS, "link", "peer", "link_type"),
)
GPU_NUMA_NODE = _g(
    "kvops_gpu_numa_node",
    "Host NUMA node nearest the GPU (PCI sysfs numa_node; NVML where GPU memory is itself a node).",
    GPU_LABELS,
    owner="gpu",
    field="numa_node",
)

# --- host (collectors/host.py) ----------------------------------------------------------------
HOST_MEM_TOTAL = _g(
    "kvops_host_memory_total_bytes", "MemTotal from /proc/meminfo.", owner="host", field="memory_total_bytes"
)
HOST_MEM_AVAILABLE = _g(
    "kvops_host_memory_available_bytes",
    "MemAvailable from /proc/meminfo.",
    owner="host",
    field="memory_available_bytes",
)
HOST_MEM_SHMEM = _g(
    "kvops_host_memory_shmem_bytes",
    "Shmem from /proc/meminfo (tmpfs, /dev/shm, shared mmaps).",
    owner="host",
    field="shmem_bytes",
)
HOST_MEM_MLOCKED = _g(
    "kvops_host_memory_mlocked_bytes", "Mlocked from /proc/meminfo.", owner="host", field="mlocked_bytes"
)
HOST_SHM_FREE = _g(
    "kvops_host_shm_free_bytes", "Free space in /dev/shm.", owner="host", field="shm_free_bytes"
)
HOST_SHM_SIZE = _g(
    "kvops_host_shm_size_bytes", "Size of the /dev/shm filesystem.", owner="host", field="shm_total_bytes"
)
HOST_MEM_UNEVICTABLE = _g(
    "kvops_host_memory_unevictable_bytes",
    "Unevictable from /proc/meminfo (mlocked, ramfs, ...).",
    owner="host",
    field="unevictable_bytes",
)
HOST_HUGEPAGES = _g(
    "kvops_host_hugepages_bytes",
    "HugeTLB pool from /proc/meminfo, pages times Hugepagesize; state=total|free.",
    ("state",),
)
HOST_NUMA_MEM_TOTAL = _g(
    "kvops_host_numa_memory_total_bytes", "MemTotal of a NUMA node (/sys/devices/system/node).", ("node",)
)
HOST_NUMA_MEM_FREE = _g(
    "kvops_host_numa_memory_free_bytes", "MemFree of a NUMA node (/sys/devices/system/node).", ("node",)
)

# --- a KV store's own view (kvops/engines/mooncake_store.py: Mooncake's master) ----------------
# engine_kind="mooncake", model_name="", engine="0": the store is a target of its own, never an
# engine's tier (the vLLM connector's view of the same traffic is the connector's row).
_MOONCAKE = "Mooncake master: "
KV_STORE_ALLOCATED = _engine(
    "gauge",
    "kvops_kv_store_allocated_bytes",
    _MOONCAKE + "bytes allocated by medium (master_allocated_bytes, master_nof_allocated_bytes, "
    "master_allocated_file_size_bytes): medium=memory|ssd|file.",
    ("medium",),
    field="kv_store_allocated_bytes",
    open_split=True,
)
KV_STORE_CAPACITY = _engine(
    "gauge",
    "kvops_kv_store_capacity_bytes",
    _MOONCAKE + "capacity by medium (master_total_capacity_bytes, master_total_nof_capacity_bytes, "
    "master_total_file_capacity_bytes): medium=memory|ssd|file.",
    ("medium",),
    field="kv_store_capacity_bytes",
    open_split=True,
)
KV_STORE_SEGMENT_ALLOCATED = _engine(
    "gauge",
    "kvops_kv_store_segment_allocated_bytes",
    _MOONCAKE + "bytes allocated in one mounted memory segment (segment_allocated_bytes).",
    ("segment",),
    field="kv_store_segment_allocated_bytes",
    open_split=True,
)
KV_STORE_SEGMENT_CAPACITY = _engine(
    "gauge",
    "kvops_kv_store_segment_capacity_bytes",
    _MOONCAKE + "capacity of one mounted memory segment (segment_total_capacity_bytes).",
    ("segment",),
    field="kv_store_segment_capacity_bytes",
    open_split=True,
)
KV_STORE_KEYS = _engine(
    "gauge",
    "kvops_kv_store_keys",
    _MOONCAKE + "keys the store holds (master_key_count).",
    field="kv_store_keys",
)
KV_STORE_CACHED_VALUES = _engine(
    "gauge",
    "kvops_kv_store_cached_values",
    _MOONCAKE + "values held by medium (mem_cache_nums_, file_cache_nums_): medium=memory|file.",
    ("medium",),
    field="kv_store_cached_values",
    open_split=True,
)
KV_STORE_ACTIVE_CLIENTS = _engine(
    "gauge",
    "kvops_kv_store_active_clients",
    _MOONCAKE + "clients alive by their last ping (master_active_clients).",
    field="kv_store_active_clients",
)
KV_STORE_LOOKUPS = _engine(
    "counter",
    "kvops_kv_store_lookups_total",
    _MOONCAKE + "replica lookups of gets (total_get_nums_); a lookup of a missing key is a miss.",
    field="kv_store_lookups",
)
KV_STORE_LOOKUP_HITS = _engine(
    "counter",
    "kvops_kv_store_lookup_hits_total",
    _MOONCAKE + "lookups that found a completed replica (valid_get_nums_).",
    field="kv_store_lookup_hits",
)
KV_STORE_HITS = _engine(
    "counter",
    "kvops_kv_store_hits_total",
    _MOONCAKE + "lookups served by medium (mem_cache_hit_nums_, file_cache_hit_nums_): medium=memory|file.",
    ("medium",),
    field="kv_store_hits",
    open_split=True,
)
KV_STORE_HIT_BYTES = _engine(
    "counter",
    "kvops_kv_store_hit_bytes_total",
    _MOONCAKE + "bytes of the lookups served by medium (mem_cache_hit_bytes_total, "
    "file_cache_hit_bytes_total): medium=memory|file.",
    ("medium",),
    field="kv_store_hit_bytes",
    open_split=True,
)
KV_STORE_PUTS = _engine(
    "counter",
    "kvops_kv_store_puts_total",
    _MOONCAKE + "puts completed (master_put_end_requests_total plus batch put-end items).",
    field="kv_store_puts_ended",
)
KV_STORE_PUT_STARTS = _engine(
    "counter",
    "kvops_kv_store_put_starts_total",
    _MOONCAKE + "puts started (master_put_start_requests_total plus batch put-start items).",
    field="kv_store_put_starts",
)
KV_STORE_PUT_FAILURES = _engine(
    "counter",
    "kvops_kv_store_put_failures_total",
    _MOONCAKE + "failed put starts and ends, single and batch items (master_put_{start,end}_failures_total, "
    "master_batch_put_{start,end}_failed_items_total); a put of a key already held is one.",
    field="kv_store_put_failures",
)
KV_STORE_PUT_NO_SPACE = _engine(
    "counter",
    "kvops_kv_store_put_no_space_failures_total",
    _MOONCAKE
    + "put starts refused for want of space (master_put_start_alloc_failures_total): the store is full.",
    field="kv_store_put_no_space_failures",
)
KV_STORE_PUTS_ABANDONED = _engine(
    "counter",
    "kvops_kv_store_puts_abandoned_total",
    _MOONCAKE + "puts whose data never landed: revoked by the client after a failed write "
    "(master_put_revoke_requests_total, master_batch_put_revoke_items_total) or discarded after "
    "the release timeout (master_put_start_discard_cnt).",
    field="kv_store_puts_abandoned",
)
KV_STORE_GET_FAILURES = _engine(
    "counter",
    "kvops_kv_store_get_failures_total",
    _MOONCAKE + "failed replica lookups, single and batch items (master_get_replica_list_failures_total, "
    "master_batch_get_replica_list_failed_items_total); a missing key is one.",
    field="kv_store_get_failures",
)
KV_STORE_EVICTIONS = _engine(
    "counter",
    "kvops_kv_store_evictions_total",
    _MOONCAKE + "eviction passes that freed space (master_successful_evictions_total).",
    field="kv_store_evictions",
)
KV_STORE_EVICTED_KEYS = _engine(
    "counter",
    "kvops_kv_store_evicted_keys_total",
    _MOONCAKE + "keys evicted (master_evicted_key_count).",
    field="kv_store_evicted_keys",
)
KV_STORE_EVICTED_BYTES = _engine(
    "counter",
    "kvops_kv_store_evicted_bytes_total",
    _MOONCAKE + "bytes of the objects evicted (master_evicted_size_bytes).",
    field="kv_store_evicted_bytes",
)
KV_STORE_PROMOTIONS = _engine(
    "counter",
    "kvops_kv_store_promotions_total",
    _MOONCAKE + "promotions into memory completed (master_promotion_completed_total).",
    field="kv_store_promotions",
)
KV_STORE_PROMOTED_BYTES = _engine(
    "counter",
    "kvops_kv_store_promoted_bytes_total",
    _MOONCAKE + "bytes promoted into memory (master_promotion_completed_bytes_total).",
    field="kv_store_promoted_bytes",
)
KV_STORE_PROMOTION_FAILURES = _engine(
    "counter",
    "kvops_kv_store_promotion_failures_total",
    _MOONCAKE + "promotions that failed (master_promotion_failed_total).",
    field="kv_store_promotion_failures",
)

# --- bench (kvops bench dma --textfile: written for node_exporter's textfile collector) ----
BENCH_CASE_LABELS: tuple[str, ...] = (*GPU_LABELS, "direction", "memory", "block_bytes", "blocks")
BENCH_DMA_INFO = _g(
    "kvops_bench_dma_info",
    "The GPU and torch build a kvops bench dma run measured (value 1).",
    (*GPU_LABELS, "name", "backend", "runtime", "torch"),
)
BENCH_DMA_FINISHED = _g(
    "kvops_bench_dma_finished_timestamp_seconds", "Unix time the kvops bench dma run finished.", GPU_LABELS
)
BENCH_DMA_BANDWIDTH = _g(
    "kvops_bench_dma_bandwidth_bytes_per_second",
    "Median copy bandwidth over the timed repeats; direction=h2d|d2h|bidir (bidir sums both "
    "directions), memory=pinned|pageable host memory, blocks copied one per memcpy.",
    BENCH_CASE_LABELS,
)
BENCH_DMA_BANDWIDTH_MIN = _g(
    "kvops_bench_dma_bandwidth_min_bytes_per_second",
    "Slowest timed repeat's copy bandwidth.",
    BENCH_CASE_LABELS,
)
BENCH_DMA_BANDWIDTH_MAX = _g(
    "kvops_bench_dma_bandwidth_max_bytes_per_second",
    "Fastest timed repeat's copy bandwidth.",
    BENCH_CASE_LABELS,
)
BENCH_DMA_LINK_MAX = _g(
    "kvops_bench_dma_link_max_bytes_per_second",
    "Per-direction link bandwidth the run was compared with; source=nvidia|amd collector or flag.",
    (*GPU_LABELS, "source"),
)
BENCH_DMA_LINK_RATIO = _g(
    "kvops_bench_dma_link_ratio",
    "Median bandwidth over the link max (twice the per-direction max for bidir), 0-1.",
    BENCH_CASE_LABELS,
)


# --- issue 42 (h42a): vLLM tiering back-pressure, KV transfer and storage connectors, HiSparse ---
TIER_BACKPRESSURE_STORES_DROPPED = _per_tier(
    "counter",
    "kvops_offload_tier_backpressure_stores_dropped_total",
    f"Stores to a secondary tier its back-pressure detector dropped ({_TIERING}backpressure_stores_dropped).",
    "tier_backpressure_stores_dropped",
)
TIER_BACKPRESSURE_BLOCKS_DROPPED = _per_tier(
    "counter",
    "kvops_offload_tier_backpressure_blocks_dropped_total",
    f"Blocks in those dropped stores ({_TIERING}backpressure_blocks_dropped).",
    "tier_backpressure_blocks_dropped",
)
TIER_BACKPRESSURE_LATENCY_EMA = _per_tier(
    "gauge",
    "kvops_offload_tier_backpressure_store_latency_ema_seconds_per_mib",
    f"Store latency moving average the back-pressure detector decides on, in vLLM's unit, seconds per "
    f"MiB ({_TIERING}backpressure_store_latency_ema).",
    "tier_backpressure_latency_ema",
)
TIER_LOOKUP_ASYNC_DELAY = _per_tier(
    "histogram",
    "kvops_offload_tier_lookup_async_delay_seconds",
    f"Wait from a tier lookup's first retry until it resolved ({_TIERING}lookup_async_delay_seconds).",
    "tier_lookup_async_delay",
)


def _per_connector(kind: str, name: str, help_: str, field: str) -> MetricSpec:
    return _engine(kind, name, help_, ("connector",), field=field, open_split=True)


KV_TRANSFER_SECONDS = _per_connector(
    "histogram",
    "kvops_kv_transfer_seconds",
    "Duration of one KV transfer of a connector, connector=nixl|mooncake (vllm:nixl_xfer_time_seconds, "
    "vllm:mooncake_xfer_time_seconds): successful transfers only.",
    "transfer_seconds_by_connector",
)
KV_TRANSFER_POST_SECONDS = _per_connector(
    "histogram",
    "kvops_kv_transfer_post_seconds",
    "Time to post one KV transfer (vllm:nixl_post_time_seconds).",
    "transfer_post_seconds_by_connector",
)
KV_TRANSFER_SIZE = _per_connector(
    "histogram",
    "kvops_kv_transfer_size_bytes",
    "Bytes of one KV transfer (vllm:nixl_bytes_transferred, vllm:mooncake_bytes_transferred): the sum is "
    "the bytes moved.",
    "transfer_size_by_connector",
)
KV_TRANSFER_DESCRIPTORS = _per_connector(
    "histogram",
    "kvops_kv_transfer_descriptors",
    "Descriptors of one KV transfer (vllm:nixl_num_descriptors, vllm:mooncake_num_descriptors).",
    "transfer_descriptors_by_connector",
)
KV_TRANSFER_FAILURES = _per_connector(
    "counter",
    "kvops_kv_transfer_failures_total",
    "Failed KV transfers (vllm:nixl_num_failed_transfers: handshake and notification failures included; "
    "vllm:mooncake_num_failed_transfers).",
    "transfer_failures_by_connector",
)
KV_TRANSFER_FAILED_NOTIFICATIONS = _per_connector(
    "counter",
    "kvops_kv_transfer_failed_notifications_total",
    "Failed completion notifications (vllm:nixl_num_failed_notifications; also in the failures).",
    "transfer_failed_notifications_by_connector",
)
KV_TRANSFER_FAILED_RECEIVES = _per_connector(
    "counter",
    "kvops_kv_transfer_failed_receives_total",
    "Failed KV receives (vllm:mooncake_num_failed_recvs).",
    "transfer_failed_receives_by_connector",
)
KV_TRANSFER_EXPIRED_REQUESTS = _per_connector(
    "counter",
    "kvops_kv_transfer_expired_requests_total",
    "Requests whose KV expired on the prefill side before it was read (vllm:nixl_num_kv_expired_reqs, "
    "vllm:mooncake_num_kv_expired_reqs).",
    "transfer_expired_requests_by_connector",
)
KV_TRANSFER_LATE_NOTIFICATIONS = _per_connector(
    "counter",
    "kvops_kv_transfer_notifications_after_expiry_total",
    "Completion notifications for requests whose KV had expired: the blocks may have been reused "
    "(vllm:nixl_num_notifications_after_expiry).",
    "transfer_late_notifications_by_connector",
)


def _per_storage_op(kind: str, name: str, help_: str, field: str) -> MetricSpec:
    return _engine(kind, name, help_, ("operation",), field=field, open_split=True)


STORAGE_OPERATIONS = _per_storage_op(
    "counter",
    "kvops_offload_storage_operations_total",
    "Storage connector operations, operation=<store>/<op>: mooncake_store/save_put, load_get, save_exists, "
    "lookup_exists (vllm:mooncake_store_operation_total, every status), hf3fs/save, hf3fs/load.",
    "storage_op_count",
)
STORAGE_OPERATIONS_NOT_OK = _per_storage_op(
    "counter",
    "kvops_offload_storage_operations_not_ok_total",
    "Those whose status was not ok (error, partial_failure; vllm:hf3fs_num_failed_{save,load}).",
    "storage_op_not_ok",
)
STORAGE_OPERATION_KEYS = _per_storage_op(
    "counter",
    "kvops_offload_storage_operation_keys_total",
    "Keys the operations touched (vllm:mooncake_store_operation_keys_total).",
    "storage_op_keys",
)
STORAGE_OPERATION_FAILED_KEYS = _per_storage_op(
    "counter",
    "kvops_offload_storage_operation_failed_keys_total",
    "Keys that failed (vllm:mooncake_store_operation_failed_keys_total).",
    "storage_op_failed_keys",
)
STORAGE_OPERATION_BYTES = _per_storage_op(
    "counter",
    "kvops_offload_storage_operation_bytes_total",
    "Bytes the operations moved (vllm:mooncake_store_operation_bytes_total).",
    "storage_op_bytes",
)
STORAGE_OPERATION_SECONDS = _per_storage_op(
    "histogram",
    "kvops_offload_storage_operation_seconds",
    "Duration of one operation (vllm:mooncake_store_operation_time_seconds, every status; "
    "vllm:hf3fs_{save,load}_duration_seconds, successes).",
    "storage_op_seconds",
)
HISPARSE_LOOKUPS = _engine(
    "counter",
    "kvops_offload_hisparse_lookups_total",
    "HiSparse device hot-buffer lookups, result=hit|miss (vllm:hisparse_cache_{hits,misses}).",
    ("result",),
    split=(("hit", "hisparse_hits"), ("miss", "hisparse_misses")),
)
HISPARSE_HOST_TO_DEVICE_BYTES = _engine(
    "counter",
    "kvops_offload_hisparse_host_to_device_bytes_total",
    "Bytes HiSparse copied from its host pool to the device hot buffer (vllm:hisparse_host_to_device_bytes).",
    field="hisparse_host_to_device_bytes",
)
HISPARSE_HOST_USAGE = _engine(
    "gauge",
    "kvops_offload_hisparse_host_usage_ratio",
    "HiSparse host pool in use, 0-1, evictable blocks counted free (vllm:hisparse_host_cache_usage_perc).",
    field="hisparse_host_usage",
)
HISPARSE_PENDING_TRANSFERS = _engine(
    "gauge",
    "kvops_offload_hisparse_pending_transfers",
    "HiSparse page write-backs and restores not yet completed (vllm:hisparse_pending_page_transfers).",
    field="hisparse_pending_transfers",
)


def all_specs() -> list[MetricSpec]:
    """Every MetricSpec defined in this module, in definition order."""
    return [v for v in globals().values() if isinstance(v, MetricSpec)]


def by_name() -> dict[str, MetricSpec]:
    return {s.name: s for s in all_specs()}


@functools.cache
def bound(owner: Owner) -> tuple[MetricSpec, ...]:
    """The specs whose series carry a field of `owner`'s snapshot object, in definition order.
    Kept: the exporter asks on every scrape, and the specs are this module's constants."""
    return tuple(s for s in all_specs() if s.owner == owner)
