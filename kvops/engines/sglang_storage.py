"""SGLang HiCache's L3 storage pipeline and device eviction (0.5.x), onto the storage tier.

sglang/srt/observability/metrics_collector.py (0.5.23): `StorageMetricsCollector` counts
tokens prefetched from L3 storage into host memory (`sglang:prefetched_tokens_total`, a load
from storage) and backed up to it (`sglang:backuped_tokens_total`, a store), storage-hit tokens
that did not become a usable prefetch by reason (`sglang:storage_prefetch_unfulfilled_tokens_total`,
every reason pre-created at 0), and per-op wire bandwidth histograms in GB/s
(`sglang:{prefetch,backup}_bandwidth`, converted to bytes per second here).
`RadixCacheMetricsCollector` counts device KV evicted (`sglang:evicted_tokens_total`) and its
duration (`sglang:eviction_duration_seconds`); those series carry no model_name (the page's
one model is used). Storage series carry no model_name either (0.5.23 labels them
storage_backend, tp_rank, dp_rank, pp_rank, pp_size, attn_cp_rank, attn_cp_size): they belong to
the page's SGLang model. Every (pp, tp, attn_cp) rank repeats the logical token counts ("All
PP/TP ranks will get the same min_completed_tokens"), so the lowest rank's series are read; the
bandwidth histograms are each rank's own ops, and the lowest rank's are read too
(tests/fixtures/sglang-storage/ranks: TP 2 x PP 2).
"""

from __future__ import annotations

from kvops.engines.common import Engine, Page, engine_on_page, lowest_rank, rank_key, summed
from kvops.exposition.histograms import histograms, merged, sample_names
from kvops.exposition.parser import Labels, ParseResult
from kvops.snapshot import EngineSample, Histogram

_ONE_RANK = {
    "storage_prefetched_tokens": "sglang:prefetched_tokens_total",
    "storage_backed_up_tokens": "sglang:backuped_tokens_total",
    "evicted_tokens": "sglang:evicted_tokens_total",
    # 0.5.23: tokens an L3 lookup found, backups dropped before reaching L3, L3 fetches
    # forfeited because the auxiliary (SWA/mamba) host pool could not be allocated
    "storage_prefetch_hit_tokens": "sglang:storage_prefetch_hit_tokens_total",
    "backup_dropped_tokens": "sglang:hicache_backup_dropped_tokens_total",
    "prefetch_aux_alloc_failed_tokens": "sglang:hicache_prefetch_aux_alloc_failed_tokens_total",
}
_UNFULFILLED = "sglang:storage_prefetch_unfulfilled_tokens_total"
# field -> counter by reason (every rank repeats it): unfulfilled for good, or deferred for later
_BY_REASON = {
    "storage_unfulfilled_tokens": _UNFULFILLED,
    "storage_deferred_tokens": "sglang:storage_prefetch_deferred_tokens_total",
}
_EVICTION = "sglang:eviction_duration_seconds"
_BANDWIDTH = {
    "storage_prefetch_bandwidth": "sglang:prefetch_bandwidth",
    "storage_backup_bandwidth": "sglang:backup_bandwidth",
}
GB = 1e9

WANTED: frozenset[str] = frozenset(
    [
        *_ONE_RANK.values(),
        *_BY_REASON.values(),
        *sample_names(_EVICTION),
        *(n for f in _BANDWIDTH.values() for n in sample_names(f)),
    ]
)


def _key(labels: Labels, only_model: str) -> tuple[str, str]:
    worker = labels.get("worker_addr")  # a page through SGLang's router (sglang.py)
    dp = labels.get("dp_rank", "0")
    return (labels.get("model_name", only_model), dp if worker is None else f"{worker}/{dp}")


def _lowest_tp(hists: list[tuple[Labels, Histogram]]) -> list[tuple[Labels, Histogram]]:
    """The histograms of the lowest rank (each rank observes its own shard's ops)."""
    ranks = [rank_key(labels) for labels, _ in hists]
    low = min(ranks, default=())
    return [item for item, rank in zip(hists, ranks, strict=True) if rank == low]


def _page_model(result: ParseResult, page: Page) -> str:
    """The one model of an SGLang page: from an SGLang engine already read off it (sglang.py
    reads the tokenizer's and scheduler's model_name), else from this module's own series."""
    models = {s.model_name for s in page.engines if s.engine_kind == "sglang" and s.model_name}
    if not models:
        models = {
            labels["model_name"]
            for name in WANTED
            for labels, _ in result.get(name)
            if "model_name" in labels
        }
    return next(iter(models)) if len(models) == 1 else ""


def read(result: ParseResult, page: Page) -> None:
    only_model = _page_model(result, page)

    def sample(labels: Labels) -> EngineSample:
        return engine_on_page(page, _key(labels, only_model), "sglang")

    for field_name, name in _ONE_RANK.items():
        by_key: dict[tuple[str, str], list[tuple[Labels, float]]] = {}
        for labels, value in result.get(name):
            by_key.setdefault(_key(labels, only_model), []).append((labels, value))
        for items in by_key.values():
            setattr(sample(items[0][0]), field_name, summed(lowest_rank(items)))
    for field_name, name in _BY_REASON.items():
        by_reason: dict[tuple[str, str], list[tuple[Labels, float]]] = {}
        for labels, value in result.get(name):
            by_reason.setdefault(_key(labels, only_model), []).append((labels, value))
        for items in by_reason.values():
            tokens = getattr(sample(items[0][0]), field_name)
            for labels, value in lowest_rank(items):
                reason = labels.get("reason", "")
                tokens[reason] = tokens.get(reason, 0.0) + value
    for labels, hist in _lowest_tp(histograms(result, _EVICTION)):
        target = sample(labels)
        target.eviction_seconds = merged(target.eviction_seconds, hist)
    for field_name, family in _BANDWIDTH.items():
        for labels, hist in _lowest_tp(histograms(result, family)):
            in_bytes = Histogram(tuple((le * GB, c) for le, c in hist.buckets), hist.sum * GB, hist.count)
            target = sample(labels)
            setattr(target, field_name, merged(getattr(target, field_name), in_bytes))


ENGINE = Engine(
    kind="sglang",
    title="SGLang HiCache storage",
    families=WANTED,
    page_format=lambda result: None,  # an SGLang page: sglang.py names it
    tiers=("storage",),
    fixtures="sglang-storage",
    read=read,
)
