"""SGLang (HiCache) expositions -> EngineSamples (engine_kind="sglang"); docs/tiers.md.

From SGLang's own metrics module (sglang/srt/observability/metrics_collector.py, 0.5.x):
- scheduler gauges (token_usage, num_running_reqs, num_queue_reqs, hicache_host_*_tokens)
  carry model_name and tp_rank: every TP rank repeats them, one rank is read;
- tokenizer counters (prompt_tokens_total, cached_tokens_total{cache_source}) carry
  model_name, no rank;
- radix-cache counters (hicache_backup_*, load_back_*, hicache_dropped_tokens) carry
  tp_rank/dp_rank but no model_name. Their token counts repeat on every rank ("read one rank
  rather than summing ranks"); their bytes and durations are each rank's own shard: summed.
Backup is GPU -> host DRAM (store), load-back host -> GPU (load). Durations are histogram
sums in seconds, so bytes / seconds is the bandwidth while copying; the load-back histogram's
buckets give its p90 (the lowest rank's, as eviction: each rank times its own copies).
0.5.23's scheduler gauges kv_{available,evictable,used}_tokens split the GPU pool
(max_total_num_tokens, set once at start) in tokens.

SGLang's router (sgl-model-gateway /engine_metrics, sgl-project/sglang#12970) serves the same
families with `sglang_` for `sglang:` and each worker's series labelled `worker_addr`:
router_names() gives them their own names back before any reader looks, and each worker is an
engine of its own (engine "<worker_addr>/<dp_rank>").
"""

from __future__ import annotations

from kvops.engines import sglang_storage
from kvops.engines.common import Engine, Engines, Page, lowest_rank, rank_key, summed
from kvops.exposition.histograms import histograms, merged, sample_names
from kvops.exposition.parser import Labels, ParseResult
from kvops.snapshot import EngineSample, Histogram

_SCALARS = {  # field -> scheduler gauge (one rank)
    "kv_cache_usage": "sglang:token_usage",
    "requests_running": "sglang:num_running_reqs",
    "requests_waiting": "sglang:num_queue_reqs",
    # 0.5.23: the GPU pool in tokens (available + evictable + used <= max_total_num_tokens)
    "kv_available_tokens": "sglang:kv_available_tokens",
    "kv_evictable_tokens": "sglang:kv_evictable_tokens",
    "kv_used_tokens": "sglang:kv_used_tokens",
    "kv_capacity_tokens": "sglang:max_total_num_tokens",
}
_LOAD_BACK = "sglang:load_back_duration_seconds"
_HOST_USED = "sglang:hicache_host_used_tokens"
_HOST_TOTAL = "sglang:hicache_host_total_tokens"
_PROMPT = "sglang:prompt_tokens_total"
_CACHED = "sglang:cached_tokens_total"
_PER_RANK_SUMS = {  # field -> counter, each rank its own shard: summed over ranks
    "store_bytes": "sglang:hicache_backup_bytes_total",
    "store_seconds": "sglang:hicache_backup_duration_seconds_sum",
    "load_bytes": "sglang:load_back_bytes_total",
    "load_seconds": "sglang:load_back_duration_seconds_sum",
}
_ONE_RANK = {  # field -> counter every rank repeats
    "store_tokens": "sglang:hicache_backup_tokens_total",
    "load_tokens": "sglang:load_back_tokens_total",
    "dropped_tokens": "sglang:hicache_dropped_tokens_total",
}
# SGLang's cache_source values -> kvops's `source` (kept) and tier (docs/tiers.md).
CACHE_SOURCE_TIER = {"device": "gpu", "host": "host", "storage": "storage"}

WANTED: frozenset[str] = frozenset(
    [
        *_SCALARS.values(),
        _HOST_USED,
        _HOST_TOTAL,
        _PROMPT,
        _CACHED,
        *_PER_RANK_SUMS.values(),
        *_ONE_RANK.values(),
        *sample_names(_LOAD_BACK),
    ]
)
COLON, ROUTER = "sglang:", "sglang_"
WORKER_LABEL = "worker_addr"  # the router's label for the worker a series came from
# Every SGLang name kvops reads, as the router spells it: a router page is read through them.
ROUTER_WANTED: frozenset[str] = frozenset(
    ROUTER + name[len(COLON) :] for name in WANTED | sglang_storage.WANTED if name.startswith(COLON)
)


def router_names(result: ParseResult) -> None:
    """A page from SGLang's router (`sglang_` names) read as SGLang's own: its samples and TYPE
    lines renamed, in place, where the page has no `sglang:` series of that name."""
    for name in ROUTER_WANTED & result.samples.keys():
        own = COLON + name[len(ROUTER) :]
        if own not in result.samples:
            result.rename(name, own)
    for name in [n for n in result.types if n.startswith(ROUTER)]:
        own = COLON + name[len(ROUTER) :]
        result.types.setdefault(own, result.types[name])


def _dp(labels: Labels) -> str:
    worker = labels.get(WORKER_LABEL)
    return labels.get("dp_rank", "0") if worker is None else f"{worker}/{labels.get('dp_rank', '0')}"


def _samples(result: ParseResult, target: str) -> list[EngineSample]:
    engines = Engines(target, "sglang")
    models = {labels["model_name"] for name in (*_SCALARS.values(), _PROMPT, _CACHED)
              for labels, _ in result.get(name) if "model_name" in labels}  # fmt: skip
    # Radix-cache series have no model_name; one SGLang server serves one model.
    only_model = next(iter(models)) if len(models) == 1 else ""

    def key(labels: Labels) -> tuple[str, str]:
        return (labels.get("model_name", only_model), _dp(labels))

    def by_engine(name: str) -> dict[tuple[str, str], list[tuple[Labels, float]]]:
        out: dict[tuple[str, str], list[tuple[Labels, float]]] = {}
        for labels, value in result.get(name):
            out.setdefault(key(labels), []).append((labels, value))
        return out

    for field, name in _SCALARS.items():
        for k, items in by_engine(name).items():
            setattr(engines.get(k), field, summed(lowest_rank(items)))
    for tier, name, field in (
        ("host", _HOST_USED, "tier_used_tokens"),
        ("host", _HOST_TOTAL, "tier_capacity_tokens"),
    ):
        for k, items in by_engine(name).items():
            value = summed(lowest_rank(items))
            if value is not None:
                getattr(engines.get(k), field)[tier] = value
    for k, items in by_engine(_PROMPT).items():
        engines.get(k).prompt_tokens_by_source["total"] = summed(items) or 0.0
    for k, items in by_engine(_CACHED).items():
        cached = engines.get(k).prompt_tokens_cached_by_source
        for labels, value in items:
            source = labels.get("cache_source", "total")
            cached[source] = cached.get(source, 0.0) + value
    for field, name in _PER_RANK_SUMS.items():
        for k, items in by_engine(name).items():
            setattr(engines.get(k), field, summed(items))
    for field, name in _ONE_RANK.items():
        for k, items in by_engine(name).items():
            # Hybrid models add swa/mamba pools for the same tokens: the kv pool counts them.
            kv = [(labels, v) for labels, v in items if labels.get("pool", "kv") == "kv"]
            setattr(engines.get(k), field, summed(lowest_rank(kv or items)))
    by_rank: dict[tuple[str, str], list[tuple[Labels, Histogram]]] = {}
    for labels, hist in histograms(result, _LOAD_BACK):
        by_rank.setdefault(key(labels), []).append((labels, hist))
    for k, hists in by_rank.items():  # the lowest rank's copies (each rank times its own)
        low = min(rank_key(labels) for labels, _ in hists)
        for labels, hist in hists:
            if rank_key(labels) == low:
                owner = engines.get(k)
                owner.load_back_duration = merged(owner.load_back_duration, hist)
    for sample in engines.samples():
        sample.offload_tier = "host"  # HiCache's L2 is host DRAM; L3 shows as cache_source=storage
    return engines.samples()


def read(result: ParseResult, page: Page) -> None:
    router_names(result)
    page.engines.extend(_samples(result, page.target))


def page_format(result: ParseResult) -> str | None:
    return "sglang" if any(name.startswith(COLON) for name in result.types) else None


ENGINE = Engine(
    kind="sglang",
    title="SGLang",
    families=WANTED | ROUTER_WANTED,
    page_format=page_format,
    tiers=("gpu", "host", "storage"),
    fixtures="sglang",
    read=read,
)
