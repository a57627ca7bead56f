"""vLLM's MooncakeConnector (P/D disaggregation over Mooncake's transfer engine, 0.33+).

vllm/distributed/kv_transfer/kv_connector/v1/mooncake/stats.py (MooncakePromMetrics):
histograms `vllm:mooncake_xfer_time_seconds`, `_bytes_transferred`, `_num_descriptors` (one
observation per successful transfer, on the prefill side: Mooncake pushes), counters
`vllm:mooncake_num_failed_transfers`, `_num_failed_recvs`, `_num_kv_expired_reqs`. No post time.
The connector is the `peer` tier's transport (docs/tiers.md). MooncakeStoreConnector's families
are vllm_mooncake_store.py's.
"""

from __future__ import annotations

from kvops.engines import vllm_kv_transfer
from kvops.engines.common import Engine
from kvops.exposition.parser import ParseResult

_HISTOGRAMS = {
    "transfer_seconds_by_connector": "vllm:mooncake_xfer_time_seconds",
    "transfer_size_by_connector": "vllm:mooncake_bytes_transferred",
    "transfer_descriptors_by_connector": "vllm:mooncake_num_descriptors",
}
_COUNTERS = {
    "transfer_failures_by_connector": "vllm:mooncake_num_failed_transfers_total",
    "transfer_failed_receives_by_connector": "vllm:mooncake_num_failed_recvs_total",
    "transfer_expired_requests_by_connector": "vllm:mooncake_num_kv_expired_reqs_total",
}
WANTED = vllm_kv_transfer.families(_HISTOGRAMS, _COUNTERS)


def page_format(result: ParseResult) -> str | None:
    return None  # a vLLM page: vllm.py names its naming generation


ENGINE = Engine(
    kind="vllm",
    title="vLLM MooncakeConnector",
    families=WANTED,
    page_format=page_format,
    tiers=("peer",),
    fixtures="vllm-connectors",
    read=vllm_kv_transfer.reader("mooncake", _HISTOGRAMS, _COUNTERS),
)
