"""LMCache's multi-process mode, lmcache_mp_* -> LMCacheSamples (worker "0"); docs/tiers.md."""

from __future__ import annotations

from kvops.engines.common import Engine, Page, add_by_label, add_to_field, label_value
from kvops.exposition.parser import Labels, ParseResult
from kvops.snapshot import LMCacheSample

# LMCache's multi-process mode, served through OpenTelemetry's Prometheus reader (LMCache
# 0.5.x lmcache/v1/mp_observability/subscribers/metrics/): lookup series carry model_name,
# L1 series no model (the page's one model is used); no worker_id.
COUNTERS: dict[str, str] = {
    "lmcache_mp_lookup_requested_tokens_total": "lookup_tokens",
    "lmcache_mp_lookup_hit_tokens_total": "lookup_hits",
    "lmcache_mp_lookups_requests_total": "lookup_requests",
    "lmcache_mp_lookup_hit_l1_tokens_total": "l1_hit_tokens",
    "lmcache_mp_lookup_hit_l2_tokens_total": "l2_hit_tokens",
    "lmcache_mp_l1_read_chunks_total": "l1_read_chunks",
    "lmcache_mp_l1_write_chunks_total": "l1_write_chunks",
    "lmcache_mp_l1_evicted_chunks_total": "l1_evicted_chunks",
}
COUNTERS.update(
    {
        "lmcache_mp_l2_store_completed_objects_chunks_total": "l2_stored_chunks",
        "lmcache_mp_l2_prefetch_load_completed_chunks_total": "l2_prefetched_chunks",
        "lmcache_mp_l1_memory_usage_bytes": "l1_usage_bytes",
        "lmcache_mp_l1_usage_ratio": "l1_usage_ratio",
    }
)
# Health counters (subscribers/metrics/l1_failures.py, l2_failures.py) and the L2 usage gauge
# (distributed/storage_manager.py): LMCacheSample dict field -> (sample, the label keying it).
BY_LABEL: dict[str, tuple[str, str]] = {
    "l1_allocation_failures": ("lmcache_mp_l1_allocation_failure_chunks_total", "during"),
    "l1_read_failures": ("lmcache_mp_l1_read_failure_chunks_total", "reason"),
    "l2_prefetch_failures": ("lmcache_mp_l2_prefetch_failure_chunks_total", "reason"),
    "l2_usage_bytes": ("lmcache_mp_l2_usage_bytes", "l2_name"),
}
WANTED: frozenset[str] = frozenset([*COUNTERS, *(name for name, _ in BY_LABEL.values())])


def read(result: ParseResult, page: Page) -> None:
    models = {labels["model_name"] for name in WANTED for labels, _ in result.get(name)
              if "model_name" in labels}  # fmt: skip
    only_model = next(iter(models)) if len(models) == 1 else ""

    def owner(labels: Labels) -> LMCacheSample:
        return page.lmcache(labels.get("model_name", only_model), "0")

    for source_name, field_name in COUNTERS.items():
        add_to_field(result.get(source_name), owner, field_name)
    for field_name, (source_name, label) in BY_LABEL.items():
        add_by_label(result.get(source_name), owner, field_name, label_value(label))


ENGINE = Engine(
    kind="lmcache",
    title="LMCache multi-process",
    families=WANTED,
    page_format=lambda result: None,  # not told apart from LMCache's legacy page by `kvops top`
    tiers=("host", "storage"),
    fixtures="lmcache-mp",
    read=read,
)
