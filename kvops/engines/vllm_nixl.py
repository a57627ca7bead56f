"""vLLM's NixlConnector (P/D disaggregation and peer KV transfer over NIXL, 0.11.1+).

vllm/distributed/kv_transfer/kv_connector/v1/nixl/stats.py (NixlPromMetrics): histograms
`vllm:nixl_xfer_time_seconds`, `_post_time_seconds`, `_bytes_transferred`, `_num_descriptors`
(one observation per successful transfer), counters `vllm:nixl_num_failed_transfers` (handshake
and notification failures included since 0.32), `_num_failed_notifications`,
`_num_kv_expired_reqs` (0.15+, on the prefill side), `_num_notifications_after_expiry` (0.32+).
The connector is the `peer` tier's transport (docs/tiers.md).
"""

from __future__ import annotations

from kvops.engines import vllm_kv_transfer
from kvops.engines.common import Engine
from kvops.exposition.parser import ParseResult

_HISTOGRAMS = {
    "transfer_seconds_by_connector": "vllm:nixl_xfer_time_seconds",
    "transfer_post_seconds_by_connector": "vllm:nixl_post_time_seconds",
    "transfer_size_by_connector": "vllm:nixl_bytes_transferred",
    "transfer_descriptors_by_connector": "vllm:nixl_num_descriptors",
}
_COUNTERS = {
    "transfer_failures_by_connector": "vllm:nixl_num_failed_transfers_total",
    "transfer_failed_notifications_by_connector": "vllm:nixl_num_failed_notifications_total",
    "transfer_expired_requests_by_connector": "vllm:nixl_num_kv_expired_reqs_total",
    "transfer_late_notifications_by_connector": "vllm:nixl_num_notifications_after_expiry_total",
}
WANTED = vllm_kv_transfer.families(_HISTOGRAMS, _COUNTERS)


def page_format(result: ParseResult) -> str | None:
    return None  # a vLLM page: vllm.py names its naming generation


ENGINE = Engine(
    kind="vllm",
    title="vLLM NixlConnector",
    families=WANTED,
    page_format=page_format,
    tiers=("peer",),
    fixtures="vllm-connectors",
    read=vllm_kv_transfer.reader("nixl", _HISTOGRAMS, _COUNTERS),
)
