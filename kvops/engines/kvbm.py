"""NVIDIA Dynamo KVBM expositions -> one EngineSample (engine_kind="dynamo-kvbm").

KVBM serves its own registry on its own port (DYN_KVBM_METRICS_PORT, e.g. :6880/metrics),
unlabelled, from ai-dynamo/dynamo lib/llm/src/block_manager/metrics_kvbm.rs: such a port is
a target of its own. Directions are KVBM's documented ones, not CUDA's naming:
offload d2h = device->host, h2d = host->disk, d2d = device->disk, d2o = device->object;
onboard h2d = host->device, d2d = disk->device, o2d = object->device.
Counts are blocks (the page gives no block size: not bytes), except the object-storage byte
counters. Object-storage failures (kvbm_object_{read,write}_failures, IntCounters counted in
blocks) are failed transfers on the storage edges: write = gpu_to_storage, read = storage_to_gpu.
kvbm_matched_tokens are the tokens KVBM found for the engine it serves: inside vLLM they are
vLLM's external hits again, so they stay in their own series (docs/tiers.md).

KVBM v2 (ai-dynamo/dynamo#8845, `CompatMetrics`) adds onboard d2h = disk->host: the G3->G2
staging step of a disk hit on its way to the GPU (the disk_to_host edge; the host->device step
after it is still onboard h2d). Dynamo's own dashboards read the same families under the
runtime's prefix, `dynamo_kvbm_*`: a page with either spelling is read the same.
"""

from __future__ import annotations

from kvops.engines.common import Engine, Engines, Page, summed
from kvops.exposition.parser import ParseResult
from kvops.snapshot import EngineSample

# kvbm_* counter -> edge (<from>_to_<to>, tiers of docs/tiers.md)
EDGES = {
    "kvbm_offload_blocks_d2h": "gpu_to_host",
    "kvbm_offload_blocks_h2d": "host_to_disk",
    "kvbm_offload_blocks_d2d": "gpu_to_disk",
    "kvbm_offload_blocks_d2o": "gpu_to_storage",
    "kvbm_onboard_blocks_d2h": "disk_to_host",  # v2: G3 -> G2 staging
    "kvbm_onboard_blocks_h2d": "host_to_gpu",
    "kvbm_onboard_blocks_d2d": "disk_to_gpu",
    "kvbm_onboard_blocks_o2d": "storage_to_gpu",
}
BYTE_EDGES = {"kvbm_offload_bytes_object": "gpu_to_storage", "kvbm_onboard_bytes_object": "storage_to_gpu"}
FAILED_EDGES = {
    "kvbm_object_write_failures": "gpu_to_storage",
    "kvbm_object_read_failures": "storage_to_gpu",
}
HIT_RATES = {
    "kvbm_host_cache_hit_rate": "host",
    "kvbm_disk_cache_hit_rate": "disk",
    "kvbm_object_cache_hit_rate": "storage",
}
MATCHED = "kvbm_matched_tokens"
# The Rust prometheus crate keeps a counter's name as registered (no _total added); a
# client that appends _total is accepted too.
_NAMES = [*EDGES, *BYTE_EDGES, *FAILED_EDGES, MATCHED]
DYNAMO_PREFIX = "dynamo_"  # Dynamo's runtime prefix: dynamo_kvbm_* (its kvbm.json dashboard)
_BARE: frozenset[str] = frozenset([*_NAMES, *(n + "_total" for n in _NAMES), *HIT_RATES])
WANTED: frozenset[str] = _BARE | frozenset(DYNAMO_PREFIX + n for n in _BARE)


def _value(result: ParseResult, name: str) -> float | None:
    for spelling in (name, name + "_total", DYNAMO_PREFIX + name, DYNAMO_PREFIX + name + "_total"):
        if result.get(spelling):
            return summed(result.get(spelling))
    return None


def _samples(result: ParseResult, target: str) -> list[EngineSample]:
    if not any(result.samples.get(name) for name in WANTED):
        return []
    engines = Engines(target, "dynamo-kvbm")
    sample = engines.get(("", "0"))  # unlabelled: one KVBM per port
    for name, edge in EDGES.items():
        value = _value(result, name)
        if value is not None:
            sample.transfer_blocks[edge] = value
    for name, edge in BYTE_EDGES.items():
        value = _value(result, name)
        if value is not None:
            sample.transfer_bytes_by_edge[edge] = value
    for name, edge in FAILED_EDGES.items():
        value = _value(result, name)
        if value is not None:
            sample.failed_blocks_by_edge[edge] = value
    for name, tier in HIT_RATES.items():
        value = summed(result.get(name) or result.get(DYNAMO_PREFIX + name))
        if value is not None:
            sample.tier_hit_rate[tier] = value
    sample.matched_tokens = _value(result, MATCHED)
    return engines.samples()


def read(result: ParseResult, page: Page) -> None:
    page.engines.extend(_samples(result, page.target))


def page_format(result: ParseResult) -> str | None:
    named = ("kvbm_", DYNAMO_PREFIX + "kvbm_")
    return "dynamo-kvbm" if any(name.startswith(named) for name in result.types) else None


ENGINE = Engine(
    kind="dynamo-kvbm",
    title="KVBM",
    families=WANTED,
    page_format=page_format,
    tiers=("host", "disk", "storage"),
    fixtures="dynamo-kvbm",
    read=read,
)
