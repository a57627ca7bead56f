"""vLLM's MooncakeStoreConnector (a shared Mooncake store as the `storage` tier, 0.22+).

vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/metrics.py (MooncakeStorePromMetrics):
one row per Mooncake RPC, labelled `operation` (save_exists, save_put, load_get, lookup_exists)
and `status` (ok, partial_failure, error): `vllm:mooncake_store_operation_time_seconds`
(histogram), `_operation_total`, `_operation_keys_total`, `_operation_bytes_total`,
`_operation_failed_keys_total`. kvops keys them `mooncake_store/<operation>`, statuses summed,
and counts the operations whose status is not ok apart. This is the connector's view; the
store's own /metrics (Mooncake's master) is another target, never added to this one.
"""

from __future__ import annotations

from kvops.engines.common import Engine, Page, engine_on_page, vllm_key
from kvops.exposition.histograms import histograms, merged, sample_names
from kvops.exposition.parser import Labels, ParseResult
from kvops.snapshot import EngineSample

_P = "vllm:mooncake_store_operation_"
_TIME = _P + "time_seconds"
_COUNTERS = {
    "storage_op_count": _P + "total",
    "storage_op_keys": _P + "keys_total",
    "storage_op_bytes": _P + "bytes_total",
    "storage_op_failed_keys": _P + "failed_keys_total",
}
WANTED: frozenset[str] = frozenset([*_COUNTERS.values(), *sample_names(_TIME)])


def _key(labels: Labels) -> str:
    return "mooncake_store/" + labels.get("operation", "")


def read(result: ParseResult, page: Page) -> None:
    def owner(labels: Labels) -> EngineSample:
        return engine_on_page(page, vllm_key(labels), "vllm")

    for field_name, name in _COUNTERS.items():
        for labels, value in result.get(name):
            sample, key = owner(labels), _key(labels)
            by_op = getattr(sample, field_name)
            by_op[key] = by_op.get(key, 0.0) + value
            if field_name == "storage_op_count":
                # every status is counted: one seen ok keeps a 0 of not-ok operations
                failed = 0.0 if labels.get("status", "ok") == "ok" else value
                sample.storage_op_not_ok[key] = sample.storage_op_not_ok.get(key, 0.0) + failed
    for labels, hist in histograms(result, _TIME):
        by_op = owner(labels).storage_op_seconds
        key = _key(labels)
        by_op[key] = merged(by_op.get(key), hist)


def page_format(result: ParseResult) -> str | None:
    return None  # a vLLM page: vllm.py names its naming generation


ENGINE = Engine(
    kind="vllm",
    title="vLLM MooncakeStoreConnector",
    families=WANTED,
    page_format=page_format,
    tiers=("storage",),
    fixtures="vllm-connectors",
    read=read,
)
