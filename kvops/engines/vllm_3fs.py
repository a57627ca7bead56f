"""vLLM's HF3FS connector (DeepSeek's 3FS as the `storage` tier, 0.20+).

vllm/distributed/kv_transfer/kv_connector/v1/hf3fs/hf3fs_connector.py (HF3FSPromMetrics):
histograms `vllm:hf3fs_save_duration_seconds` and `vllm:hf3fs_load_duration_seconds` (one
observation per successful task) and counters `vllm:hf3fs_num_failed_save`, `_num_failed_load`.
kvops keys them `hf3fs/save` and `hf3fs/load` beside MooncakeStoreConnector's operations: 3FS
counts no bytes or keys, so those stay unknown.
"""

from __future__ import annotations

from kvops.engines.common import Engine, Page, engine_on_page, vllm_key
from kvops.exposition.histograms import histograms, merged, sample_names
from kvops.exposition.parser import Labels, ParseResult
from kvops.snapshot import EngineSample

_DURATIONS = {
    "hf3fs/save": "vllm:hf3fs_save_duration_seconds",
    "hf3fs/load": "vllm:hf3fs_load_duration_seconds",
}
_FAILURES = {
    "hf3fs/save": "vllm:hf3fs_num_failed_save_total",
    "hf3fs/load": "vllm:hf3fs_num_failed_load_total",
}
WANTED: frozenset[str] = frozenset(
    [*_FAILURES.values(), *(n for family in _DURATIONS.values() for n in sample_names(family))]
)


def read(result: ParseResult, page: Page) -> None:
    def owner(labels: Labels) -> EngineSample:
        return engine_on_page(page, vllm_key(labels), "vllm")

    for key, family in _DURATIONS.items():
        for labels, hist in histograms(result, family):
            sample = owner(labels)
            sample.storage_op_seconds[key] = merged(sample.storage_op_seconds.get(key), hist)
            # successes are the histogram's count; failures are added below
            sample.storage_op_count[key] = sample.storage_op_count.get(key, 0.0) + hist.count
    for key, name in _FAILURES.items():
        for labels, value in result.get(name):
            sample = owner(labels)
            sample.storage_op_not_ok[key] = sample.storage_op_not_ok.get(key, 0.0) + value
            sample.storage_op_count[key] = sample.storage_op_count.get(key, 0.0) + value


def page_format(result: ParseResult) -> str | None:
    return None  # a vLLM page: vllm.py names its naming generation


ENGINE = Engine(
    kind="vllm",
    title="vLLM HF3FS connector",
    families=WANTED,
    page_format=page_format,
    tiers=("storage",),
    fixtures="vllm-connectors",
    read=read,
)
