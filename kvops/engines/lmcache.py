"""LMCache's legacy (in-process) exposition, lmcache:* -> LMCacheSamples; docs/tiers.md.

LMCache running inside vLLM *is* vLLM's external tier: its figures stay apart from the
engines' tiers (kvops_lmcache_*), never added to them (snapshot.py says why).
"""

from __future__ import annotations

from kvops.engines.common import Engine, Page, add_to_field
from kvops.exposition.histograms import histograms, merged, sample_names
from kvops.exposition.parser import Labels, ParseResult, families_of
from kvops.snapshot import Histogram

# lmcache:* sample -> LMCacheSample field.
COUNTERS: dict[str, str] = {
    "lmcache:num_requested_tokens_total": "requested_tokens",
    "lmcache:num_hit_tokens_total": "hit_tokens",
    "lmcache:num_stored_tokens_total": "stored_tokens",
    "lmcache:num_lookup_tokens_total": "lookup_tokens",
    "lmcache:num_lookup_hits_total": "lookup_hits",
    "lmcache:num_retrieve_requests_total": "retrieve_requests",
    "lmcache:num_store_requests_total": "store_requests",
    "lmcache:num_lookup_requests_total": "lookup_requests",
    "lmcache:local_cache_usage": "local_cache_usage_bytes",
    "lmcache:num_vllm_hit_tokens_total": "vllm_hit_tokens",
    "lmcache:num_prompt_tokens_total": "prompt_tokens",
    "lmcache:num_remote_read_bytes_total": "remote_read_bytes",
    "lmcache:num_remote_write_bytes_total": "remote_write_bytes",
    "lmcache:local_cpu_evict_count_total": "evictions",
    "lmcache:num_slow_retrieval_by_time_total": "slow_retrievals_by_time",
    "lmcache:num_slow_retrieval_by_speed_total": "slow_retrievals_by_speed",
    "lmcache:local_storage_usage": "local_storage_usage_bytes",
    "lmcache:remote_cache_usage": "remote_cache_usage_bytes",
}
# Remote-backend and local CPU health (0.5.6). put_failed_count and get_blocking_failed_count
# are gauges whose callback returns the remote backend's running count (remote_backend.py
# set_function): cumulative, so read like the counters beside them.
COUNTERS.update(
    {
        "lmcache:put_failed_count": "remote_put_failures",
        "lmcache:get_blocking_failed_count": "remote_get_blocking_failures",
        "lmcache:remote_ping_errors_total": "remote_ping_errors",
        "lmcache:remote_ping_successes_total": "remote_ping_successes",
        "lmcache:local_cpu_evict_failed_count_total": "local_cpu_evict_failures",
        "lmcache:forced_unpin_count_total": "forced_unpins",
    }
)
# The latest ping to the remote backend, a gauge in milliseconds -> seconds.
PING_LATENCY = "lmcache:remote_ping_latency"
# lmcache:* histogram -> (LMCacheSample field, factor to base units): LMCache's remote get/put
# times are milliseconds, its retrieve/store times seconds, its speeds tokens per second.
HISTOGRAMS: dict[str, tuple[str, float]] = {
    "lmcache:time_to_retrieve": ("retrieve_seconds", 1.0),
    "lmcache:time_to_store": ("store_seconds", 1.0),
    "lmcache:remote_time_to_get": ("remote_get_seconds", 1e-3),
    "lmcache:remote_time_to_put": ("remote_put_seconds", 1e-3),
    "lmcache:retrieve_speed": ("retrieve_speed", 1.0),
    "lmcache:store_speed": ("store_speed", 1.0),
}

WANTED: frozenset[str] = frozenset(
    [*COUNTERS, PING_LATENCY, *(n for f in HISTOGRAMS for n in sample_names(f))]
)
_FAMILIES = families_of(WANTED)


def _scaled(hist: Histogram, factor: float) -> Histogram:
    """A histogram in another unit: bounds and sum scaled, counts kept."""
    if factor == 1.0:
        return hist
    return Histogram(tuple((le * factor, c) for le, c in hist.buckets), hist.sum * factor, hist.count)


def _item_key(labels: Labels) -> tuple[str, str]:
    return (labels.get("model_name", labels.get("served_model_name", "")), labels.get("worker_id", "0"))


def read(result: ParseResult, page: Page) -> None:
    """LMCache's own figures per (model, worker), in base units (HISTOGRAMS)."""
    for source_name, field_name in COUNTERS.items():
        add_to_field(result.get(source_name), lambda labels: page.lmcache(*_item_key(labels)), field_name)
    for labels, value in result.get(PING_LATENCY):  # one series per worker: the latest ping
        page.lmcache(*_item_key(labels)).remote_ping_latency_seconds = value * 1e-3
    for family, (field_name, factor) in HISTOGRAMS.items():
        for labels, hist in histograms(result, family):
            sample = page.lmcache(*_item_key(labels))
            setattr(sample, field_name, merged(getattr(sample, field_name), _scaled(hist, factor)))


def page_format(result: ParseResult) -> str | None:
    return (
        "lmcache" if any(name.startswith("lmcache:") and name in _FAMILIES for name in result.types) else None
    )


ENGINE = Engine(
    kind="lmcache",
    title="LMCache",
    families=WANTED,
    page_format=page_format,
    tiers=("host", "disk", "storage"),
    fixtures="lmcache",
    read=read,
    up_prefix="lmcache:",
)
