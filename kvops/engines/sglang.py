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
sums in seconds, so bytes / seconds is the bandwidth while copying.
"""

from __future__ import annotations

from kvops.engines.common import Engine, Engines, Page, lowest_rank, summed
from kvops.exposition.parser import Labels, ParseResult
from kvops.snapshot import EngineSample

_SCALARS = {  # field -> scheduler gauge (one rank)
    "kv_cache_usage": "sglang:token_usage",
    "requests_running": "sglang:num_running_reqs",
    "requests_waiting": "sglang:num_queue_reqs",
}
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
    ]
)


def _dp(labels: Labels) -> str:
    return labels.get("dp_rank", "0")


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
    for sample in engines.samples():
        sample.offload_tier = "host"  # HiCache's L2 is host DRAM; L3 shows as cache_source=storage
    return engines.samples()


def read(result: ParseResult, page: Page) -> None:
    page.engines.extend(_samples(result, page.target))


def page_format(result: ParseResult) -> str | None:
    return "sglang" if any(name.startswith("sglang:") for name in result.types) else None


ENGINE = Engine(
    kind="sglang",
    title="SGLang",
    families=WANTED,
    page_format=page_format,
    tiers=("gpu", "host", "storage"),
    fixtures="sglang",
    read=read,
)
