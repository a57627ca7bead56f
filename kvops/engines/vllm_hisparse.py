"""vLLM's HiSparse connector (sparse attention's KV in a host pool, hot pages in a device
buffer; 0.32+): the `host` tier.

vllm/distributed/kv_transfer/kv_connector/v1/hisparse/stats.py (HiSparsePromMetrics, 0.33.0):
counters `vllm:hisparse_cache_hits`, `_cache_misses` (device hot-buffer hits and misses),
`_host_to_device_bytes`; gauges `vllm:hisparse_host_cache_usage_perc` (0-1, evictable cached
blocks counted free) and `_pending_page_transfers` (write-backs and restores in flight). The
host-block residency histograms (with --kv-cache-metrics) are not read.
"""

from __future__ import annotations

from kvops.engines.common import Engine, Page, add_to_field, engine_on_page, vllm_key
from kvops.exposition.parser import Labels, ParseResult
from kvops.snapshot import EngineSample

_P = "vllm:hisparse_"
_FIELDS = {
    "hisparse_hits": _P + "cache_hits_total",
    "hisparse_misses": _P + "cache_misses_total",
    "hisparse_host_to_device_bytes": _P + "host_to_device_bytes_total",
    "hisparse_host_usage": _P + "host_cache_usage_perc",
    "hisparse_pending_transfers": _P + "pending_page_transfers",
}
WANTED: frozenset[str] = frozenset(_FIELDS.values())


def read(result: ParseResult, page: Page) -> None:
    def owner(labels: Labels) -> EngineSample:
        return engine_on_page(page, vllm_key(labels), "vllm")

    for field_name, name in _FIELDS.items():
        add_to_field(result.get(name), owner, field_name)


def page_format(result: ParseResult) -> str | None:
    return None  # a vLLM page: vllm.py names its naming generation


ENGINE = Engine(
    kind="vllm",
    title="vLLM HiSparse connector",
    families=WANTED,
    page_format=page_format,
    tiers=("host",),
    fixtures="vllm-connectors",
    read=read,
)
