"""vLLM's multi-tier offloading (`spec_name: TieringOffloadingSpec`, 0.26+) onto the tier model.

vLLM labels each tier `0:primary` (the CPU primary every transfer goes through) or
`f"{idx+1}:{tier_type}"` for a secondary tier (vllm/v1/kv_offload/tiering/metrics.py): `1:fs`
for vLLM's filesystem tier, `2:obj` for its object store, or the type an out-of-tree tier was
configured with (`1:StripedFileSystemTierManager`). docs/tiers.md: the primary is host, a
filesystem tier disk, a peer tier peer, any other (object store, KVCR, remote) storage.
Read bytes are promotions (tier -> primary), write bytes cascades (primary -> tier); the times
are summed transfer time of the jobs that report one. Failure counters appear on the first
failure (absent, not 0, until then). Every figure is kept under vLLM's own tier label, so two
tiers of one kind (`1:fs`, `2:fs`) stay apart; rates.py sums them into their kind.
Back-pressure (0.31+): stores and blocks a slow tier dropped, and the store latency EMA the
detector decides on, in vLLM's unit (seconds per MiB).
"""

from __future__ import annotations

from kvops.engines.common import Engine, Page, add_by_label, add_to_field, engine_on_page, vllm_key
from kvops.exposition.histograms import histograms, merged, sample_names
from kvops.exposition.parser import Labels, ParseResult
from kvops.snapshot import EngineSample, tier_kind

_P = "vllm:kv_offload_tiering_"
# EngineSample dict field -> counter/gauge sample, keyed by tier.
_BY_TIER: dict[str, str] = {
    "tier_chunk_queries": _P + "chunk_queries_total",
    "tier_chunk_hits": _P + "chunk_hits_total",
    "tier_read_bytes": _P + "read_bytes_total",
    "tier_read_seconds": _P + "read_time_total",
    "tier_write_bytes": _P + "write_bytes_total",
    "tier_write_seconds": _P + "write_time_total",
    "tier_promotion_failures": _P + "promotion_job_failures_total",
    "tier_cascade_failures": _P + "cascade_job_failures_total",
    "tier_active_promotions": _P + "active_promotion_jobs",
    "tier_active_cascades": _P + "active_cascade_jobs",
    "tier_primary_read_usage": _P + "primary_read_usage_perc",
    "tier_primary_write_usage": _P + "primary_write_usage_perc",
    "tier_backpressure_stores_dropped": _P + "backpressure_stores_dropped_total",
    "tier_backpressure_blocks_dropped": _P + "backpressure_blocks_dropped_total",
    "tier_backpressure_latency_ema": _P + "backpressure_store_latency_ema",
}
_HISTOGRAMS: dict[str, str] = {
    "tier_lookup_delay": _P + "lookup_sync_delay_seconds",
    "tier_promotion_latency": _P + "promotion_latency_seconds",
    "tier_lookup_async_delay": _P + "lookup_async_delay_seconds",
}
_ALLOCATION_FAILURES = _P + "promotion_allocation_failures_total"

WANTED: frozenset[str] = frozenset(
    [*_BY_TIER.values(), _ALLOCATION_FAILURES, *(n for f in _HISTOGRAMS.values() for n in sample_names(f))]
)


tier_of = tier_kind  # a vLLM tier label -> the tier of docs/tiers.md


def _tier_name(labels: Labels) -> str:
    return labels.get("tier", "")


def read(result: ParseResult, page: Page) -> None:
    def owner(labels: Labels) -> EngineSample:
        return engine_on_page(page, vllm_key(labels), "vllm")

    for field_name, name in _BY_TIER.items():
        add_by_label(result.get(name), owner, field_name, _tier_name)
    add_to_field(result.get(_ALLOCATION_FAILURES), owner, "promotion_allocation_failures")
    for field_name, family in _HISTOGRAMS.items():
        for labels, hist in histograms(result, family):  # promotion latency: result= merged
            by_tier = getattr(owner(labels), field_name)
            tier = _tier_name(labels)
            by_tier[tier] = merged(by_tier.get(tier), hist)


def page_format(result: ParseResult) -> str | None:
    return None  # a vLLM page: vllm.py names its naming generation


ENGINE = Engine(
    kind="vllm",
    title="vLLM multi-tier offloading",
    families=WANTED,
    page_format=page_format,
    tiers=("host", "disk", "storage", "peer"),
    fixtures="vllm-tiering",
    read=read,
)
