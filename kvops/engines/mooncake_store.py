"""Mooncake store's master (`mooncake_master`'s own /metrics) -> one EngineSample of kind
"mooncake": a KV store, not an inference engine (docs/tiers.md, "Stores as engines").

The master serves the store's view of the `storage` tier: capacity and allocation by medium
(memory segments, NoF SSD, the 3FS/NFS file tier) and per mounted segment, keys, lookups and
hits by medium with bytes, evictions, promotions, put and get failures, active clients. It is a
target of its own: a vLLM MooncakeStoreConnector counts the same traffic from the client side,
and the two views are two rows, never added together.

Names are Mooncake's own (mooncake-store/include/master_metric_manager.h, as 0.3.13.post1's
master writes them), trailing underscores included (`mem_cache_hit_nums_`); its counters carry
no `_total` unless the name does. A get of a key the store does not hold is a failed
GetReplicaList: `get_failures` counts misses, `lookups - lookup_hits` too (docs/tiers.md). A put
of a key the store already holds fails its PutStart although the client is told it succeeded
(seen on the real master): `put_failures` counts those; `put_no_space_failures` (refused for want
of room) and `puts_abandoned` (revoked or discarded: the data never landed) are the failures that
lose data.
"""

from __future__ import annotations

from kvops.engines.common import Engine, Engines, Page, summed
from kvops.exposition.parser import ParseResult

KIND = "mooncake"

# medium -> (allocated, capacity) gauges
MEDIA = {
    "memory": ("master_allocated_bytes", "master_total_capacity_bytes"),
    "ssd": ("master_nof_allocated_bytes", "master_total_nof_capacity_bytes"),
    "file": ("master_allocated_file_size_bytes", "master_total_file_capacity_bytes"),
}
SEGMENT_ALLOCATED = "segment_allocated_bytes"  # {segment="host:port"}
SEGMENT_CAPACITY = "segment_total_capacity_bytes"
KEYS = "master_key_count"
ACTIVE_CLIENTS = "master_active_clients"
CACHED_VALUES = {"memory": "mem_cache_nums_", "file": "file_cache_nums_"}  # gauges
HITS = {"memory": "mem_cache_hit_nums_", "file": "file_cache_hit_nums_"}
HIT_BYTES = {"memory": "mem_cache_hit_bytes_total", "file": "file_cache_hit_bytes_total"}
LOOKUPS = "total_get_nums_"  # every GetReplicaList
LOOKUP_HITS = "valid_get_nums_"  # ... that returned a completed replica
# field -> counters summed into it (single and batch forms alike)
COUNTERS: dict[str, tuple[str, ...]] = {
    "kv_store_put_starts": ("master_put_start_requests_total", "master_batch_put_start_items_total"),
    "kv_store_puts_ended": ("master_put_end_requests_total", "master_batch_put_end_items_total"),
    "kv_store_put_failures": (
        "master_put_start_failures_total",
        "master_put_end_failures_total",
        "master_batch_put_start_failed_items_total",
        "master_batch_put_end_failed_items_total",
    ),
    "kv_store_put_no_space_failures": ("master_put_start_alloc_failures_total",),
    # Puts whose data never landed: revoked by the client (its write into a segment failed) or
    # started and abandoned (the master discarded the allocation after its release timeout).
    "kv_store_puts_abandoned": (
        "master_put_revoke_requests_total",
        "master_batch_put_revoke_items_total",
        "master_put_start_discard_cnt",
    ),
    "kv_store_get_failures": (
        "master_get_replica_list_failures_total",
        "master_batch_get_replica_list_failed_items_total",
    ),
    "kv_store_evictions": ("master_successful_evictions_total",),
    "kv_store_evicted_keys": ("master_evicted_key_count",),
    "kv_store_evicted_bytes": ("master_evicted_size_bytes",),
    "kv_store_promotions": ("master_promotion_completed_total",),
    "kv_store_promoted_bytes": ("master_promotion_completed_bytes_total",),
    "kv_store_promotion_failures": ("master_promotion_failed_total",),
}
WANTED: frozenset[str] = frozenset(
    [
        *(name for pair in MEDIA.values() for name in pair),
        SEGMENT_ALLOCATED,
        SEGMENT_CAPACITY,
        KEYS,
        ACTIVE_CLIENTS,
        *CACHED_VALUES.values(),
        *HITS.values(),
        *HIT_BYTES.values(),
        LOOKUPS,
        LOOKUP_HITS,
        *(name for names in COUNTERS.values() for name in names),
    ]
)
# A page is the master's when it holds these (a vLLM page never does).
_SIGNATURE = (KEYS, LOOKUPS, "master_total_capacity_bytes")


def _value(result: ParseResult, name: str) -> float | None:
    return summed(result.get(name))


def _sum(result: ParseResult, names: tuple[str, ...]) -> float | None:
    values = [v for v in (_value(result, n) for n in names) if v is not None]
    return sum(values) if values else None


def read(result: ParseResult, page: Page) -> None:
    if not any(result.samples.get(name) for name in WANTED):
        return
    sample = Engines(page.target, KIND).get(("", "0"))  # one master per port, unlabelled
    for medium, (allocated, capacity) in MEDIA.items():
        used, size = _value(result, allocated), _value(result, capacity)
        if used is not None:
            sample.kv_store_allocated_bytes[medium] = used
        if size is not None:
            sample.kv_store_capacity_bytes[medium] = size
    for field_name, family in (("kv_store_segment_allocated_bytes", SEGMENT_ALLOCATED),
                               ("kv_store_segment_capacity_bytes", SEGMENT_CAPACITY)):  # fmt: skip
        by_segment = getattr(sample, field_name)
        for labels, value in result.get(family):
            segment = labels.get("segment", "")
            by_segment[segment] = by_segment.get(segment, 0.0) + value
    for medium, name in CACHED_VALUES.items():
        count = _value(result, name)
        if count is not None:
            sample.kv_store_cached_values[medium] = count
    for field_name, media in (("kv_store_hits", HITS), ("kv_store_hit_bytes", HIT_BYTES)):
        for medium, name in media.items():
            count = _value(result, name)
            if count is not None:
                getattr(sample, field_name)[medium] = count
    sample.kv_store_keys = _value(result, KEYS)
    sample.kv_store_active_clients = _value(result, ACTIVE_CLIENTS)
    sample.kv_store_lookups = _value(result, LOOKUPS)
    sample.kv_store_lookup_hits = _value(result, LOOKUP_HITS)
    for field_name, names in COUNTERS.items():
        setattr(sample, field_name, _sum(result, names))
    sample.offload_tier = "storage"
    page.engines.append(sample)


def page_format(result: ParseResult) -> str | None:
    return "mooncake-master" if any(name in result.types for name in _SIGNATURE) else None


ENGINE = Engine(
    kind=KIND,
    title="Mooncake store master",
    families=WANTED,
    page_format=page_format,
    tiers=("storage",),
    fixtures="mooncake-master",
    read=read,
)
