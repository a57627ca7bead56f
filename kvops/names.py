"""Every kvops_* metric: name, type, HELP and labels. The one source of names.

The exporter builds its families from these specs, the dashboard generator and the alert
tests check their expressions against them. Names follow Prometheus conventions: base
units (bytes, seconds), 0-1 ratios, `_total` on counters, no colon.
docs/DESIGN.md's contract table is the part users depend on; do not rename or drop those.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MetricType = Literal["gauge", "counter"]

TARGET_LABELS: tuple[str, ...] = ("target", "model_name", "engine")
GPU_LABELS: tuple[str, ...] = ("gpu", "uuid", "vendor")
LMCACHE_LABELS: tuple[str, ...] = ("target", "model_name", "worker_id")


@dataclass(frozen=True)
class MetricSpec:
    name: str  # as exposed: counters end in _total
    type: MetricType
    help: str
    labels: tuple[str, ...] = ()

    @property
    def family_name(self) -> str:
        """The name prometheus_client's *MetricFamily wants (it appends _total to counters)."""
        if self.type == "counter" and self.name.endswith("_total"):
            return self.name[: -len("_total")]
        return self.name


def _g(name: str, help_: str, labels: tuple[str, ...] = ()) -> MetricSpec:
    return MetricSpec(name, "gauge", help_, labels)


def _c(name: str, help_: str, labels: tuple[str, ...] = ()) -> MetricSpec:
    assert name.endswith("_total"), name
    return MetricSpec(name, "counter", help_, labels)


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
KV_CACHE_USAGE = _g(
    "kvops_vllm_kv_cache_usage_ratio",
    "GPU KV cache usage, 0-1 (vllm:kv_cache_usage_perc, vllm:gpu_cache_usage_perc before 0.12).",
    TARGET_LABELS,
)
PREFIX_QUERIES = _c(
    "kvops_prefix_cache_queries_tokens_total",
    "Prefix-cache lookups in tokens; tier=local is GPU HBM, tier=external the KV connector "
    "(offload tier). As counted by vLLM: 0.11.x counts external queries over the whole prompt.",
    (*TARGET_LABELS, "tier"),
)
PREFIX_HITS = _c(
    "kvops_prefix_cache_hits_tokens_total",
    "Prefix-cache hits in tokens; tier=local is GPU HBM, tier=external the KV connector (offload tier).",
    (*TARGET_LABELS, "tier"),
)
TRANSFER_BYTES = _c(
    "kvops_offload_transfer_bytes_total",
    "Bytes moved by KV offloading, summed over workers; direction=store is GPU to offload tier, "
    "load is back to GPU.",
    (*TARGET_LABELS, "direction"),
)
TRANSFER_SECONDS = _c(
    "kvops_offload_transfer_seconds_total",
    "Summed transfer time of KV offloading jobs over workers (not wall time): "
    "bytes/seconds is the DMA bandwidth while transferring.",
    (*TARGET_LABELS, "direction"),
)
PREEMPTIONS = _c("kvops_vllm_preemptions_total", "Requests preempted by the vLLM scheduler.", TARGET_LABELS)
REQUESTS_RUNNING = _g("kvops_vllm_requests_running", "Requests in model execution batches.", TARGET_LABELS)
REQUESTS_WAITING = _g("kvops_vllm_requests_waiting", "Requests waiting to be scheduled.", TARGET_LABELS)
CPU_TIER_BYTES = _g(
    "kvops_offload_cpu_tier_bytes",
    "Configured size of the CPU offload tier in bytes (vllm:kv_offload_config_info, else "
    "vllm:cache_config_info kv_offloading_size).",
    TARGET_LABELS,
)
PROCESS_MEMORY = _g(
    "kvops_vllm_process_memory_bytes",
    "Memory of the target's process tree on this host, summed over processes "
    "(kind=rss_anon|rss_shmem|locked|pinned from /proc/PID/status).",
    ("target", "kind"),
)
TARGET_GPU_INFO = _g(
    "kvops_target_gpu_info", "Joins a target to a GPU its processes use (value 1).", ("target", "gpu", "uuid")
)

# --- LMCache (kept apart from the prefix-cache tiers: vLLM already counts connector hits
# as tier=external; adding these in would count them twice) ------------------------------
LMCACHE_REQUESTED_TOKENS = _c(
    "kvops_lmcache_requested_tokens_total",
    "Tokens requested from LMCache (lmcache:num_requested_tokens).",
    LMCACHE_LABELS,
)
LMCACHE_HIT_TOKENS = _c(
    "kvops_lmcache_hit_tokens_total", "Tokens found in LMCache (lmcache:num_hit_tokens).", LMCACHE_LABELS
)
LMCACHE_STORED_TOKENS = _c(
    "kvops_lmcache_stored_tokens_total",
    "Tokens stored into LMCache (lmcache:num_stored_tokens).",
    LMCACHE_LABELS,
)
LMCACHE_LOOKUP_TOKENS = _c(
    "kvops_lmcache_lookup_tokens_total",
    "Tokens looked up in LMCache (lmcache:num_lookup_tokens).",
    LMCACHE_LABELS,
)
LMCACHE_LOOKUP_HITS = _c(
    "kvops_lmcache_lookup_hits_tokens_total",
    "Lookup hits in LMCache, tokens (lmcache:num_lookup_hits).",
    LMCACHE_LABELS,
)
LMCACHE_RETRIEVE_REQUESTS = _c(
    "kvops_lmcache_retrieve_requests_total", "Retrieve requests sent to LMCache.", LMCACHE_LABELS
)
LMCACHE_STORE_REQUESTS = _c(
    "kvops_lmcache_store_requests_total", "Store requests sent to LMCache.", LMCACHE_LABELS
)
LMCACHE_LOOKUP_REQUESTS = _c(
    "kvops_lmcache_lookup_requests_total", "Lookup requests sent to LMCache.", LMCACHE_LABELS
)
LMCACHE_LOCAL_CACHE_USAGE = _g(
    "kvops_lmcache_local_cache_usage_bytes",
    "LMCache local cache usage (lmcache:local_cache_usage).",
    LMCACHE_LABELS,
)

# --- GPUs (collectors/nvidia.py, collectors/amd.py) ----------------------------------------
GPU_INFO = _g("kvops_gpu_info", "GPU identity (value 1).", (*GPU_LABELS, "name", "pci_bus_id"))
GPU_MEMORY_USED = _g("kvops_gpu_memory_used_bytes", "GPU memory in use.", GPU_LABELS)
GPU_MEMORY_TOTAL = _g("kvops_gpu_memory_total_bytes", "GPU memory installed.", GPU_LABELS)
GPU_UTILIZATION = _g(
    "kvops_gpu_utilization_ratio", "GPU busy fraction over the driver's sample period.", GPU_LABELS
)
GPU_PCIE_TX = _c(
    "kvops_gpu_pcie_transmit_bytes_total", "Bytes the GPU sent over PCIe (device to host).", GPU_LABELS
)
GPU_PCIE_RX = _c(
    "kvops_gpu_pcie_receive_bytes_total", "Bytes the GPU received over PCIe (host to device).", GPU_LABELS
)
GPU_PCIE_TX_RATE = _g(
    "kvops_gpu_pcie_transmit_bytes_per_second",
    "PCIe transmit throughput sampled by the driver, where the device has no byte counter.",
    GPU_LABELS,
)
GPU_PCIE_RX_RATE = _g(
    "kvops_gpu_pcie_receive_bytes_per_second",
    "PCIe receive throughput sampled by the driver, where the device has no byte counter.",
    GPU_LABELS,
)
GPU_PCIE_LINK_MAX = _g(
    "kvops_gpu_pcie_link_max_bytes_per_second",
    "Usable PCIe bandwidth per direction from the current link generation and width, after encoding.",
    GPU_LABELS,
)
GPU_PCIE_REPLAYS = _c("kvops_gpu_pcie_replay_total", "PCIe replays (link-level retransmissions).", GPU_LABELS)
GPU_NVLINK_TX = _c(
    "kvops_gpu_nvlink_transmit_bytes_total", "Bytes sent over an NVLink link.", (*GPU_LABELS, "link")
)
GPU_NVLINK_RX = _c(
    "kvops_gpu_nvlink_receive_bytes_total", "Bytes received over an NVLink link.", (*GPU_LABELS, "link")
)
GPU_XGMI_READ = _c(
    "kvops_gpu_xgmi_read_bytes_total", "Bytes read over an AMD XGMI link.", (*GPU_LABELS, "link")
)
GPU_XGMI_WRITE = _c(
    "kvops_gpu_xgmi_write_bytes_total", "Bytes written over an AMD XGMI link.", (*GPU_LABELS, "link")
)
GPU_PCIE_LINK_GENERATION = _g(
    "kvops_gpu_pcie_link_generation",
    "PCIe link generation; kind=current (drops at idle with power saving) or max (device and slot).",
    (*GPU_LABELS, "kind"),
)
GPU_PCIE_LINK_WIDTH = _g(
    "kvops_gpu_pcie_link_width_lanes", "PCIe link width in lanes; kind=current or max.", (*GPU_LABELS, "kind")
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

# --- host (collectors/host.py) ----------------------------------------------------------------
HOST_MEM_TOTAL = _g("kvops_host_memory_total_bytes", "MemTotal from /proc/meminfo.")
HOST_MEM_AVAILABLE = _g("kvops_host_memory_available_bytes", "MemAvailable from /proc/meminfo.")
HOST_MEM_SHMEM = _g(
    "kvops_host_memory_shmem_bytes", "Shmem from /proc/meminfo (tmpfs, /dev/shm, shared mmaps)."
)
HOST_MEM_MLOCKED = _g("kvops_host_memory_mlocked_bytes", "Mlocked from /proc/meminfo.")
HOST_SHM_FREE = _g("kvops_host_shm_free_bytes", "Free space in /dev/shm.")
HOST_SHM_SIZE = _g("kvops_host_shm_size_bytes", "Size of the /dev/shm filesystem.")
HOST_MEM_UNEVICTABLE = _g(
    "kvops_host_memory_unevictable_bytes", "Unevictable from /proc/meminfo (mlocked, ramfs, ...)."
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


def all_specs() -> list[MetricSpec]:
    """Every MetricSpec defined in this module, in definition order."""
    return [v for v in globals().values() if isinstance(v, MetricSpec)]


def by_name() -> dict[str, MetricSpec]:
    return {s.name: s for s in all_specs()}
