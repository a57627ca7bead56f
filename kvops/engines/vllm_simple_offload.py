"""vLLM's SimpleCPUOffloadConnector (0.31+; `native` with VLLM_USE_SIMPLE_KV_OFFLOAD=1).

vllm/v1/simple_kv_offload/metrics.py: `vllm:simple_kv_offload_save_outcomes_total{outcome}`
(stored, dropped_cpu_full, dropped_request_gone, dropped_null_block, dropped_not_hashed,
skipped_already_cached, skipped_in_flight; each appears on its first positive count),
`..._load_blocks_total`, `..._used_blocks` (pinned by transfers or hits: capacity minus free),
`..._pending_store_blocks`, and `..._info{backend,page_cache,lazy_offload,capacity_blocks}`.
Everything is in blocks: the info series gives no block size, so kvops never turns them into
bytes. backend=cpu is the host tier, disk the disk tier (docs/tiers.md).
An open change (vllm-project/vllm#57251) labels the load count by phase (issued, completed):
only `completed` is read, and the family is reported as read in part (engines/common.guarded).
"""

from __future__ import annotations

from kvops.engines.common import (
    Engine,
    Page,
    add_by_label,
    add_to_field,
    engine_on_page,
    guarded,
    label_value,
    vllm_key,
)
from kvops.exposition.parser import Labels, ParseResult
from kvops.snapshot import EngineSample

_OUTCOMES = "vllm:simple_kv_offload_save_outcomes_total"
_SCALARS = {
    "simple_load_blocks": "vllm:simple_kv_offload_load_blocks_total",
    "simple_used_blocks": "vllm:simple_kv_offload_used_blocks",
    "simple_pending_store_blocks": "vllm:simple_kv_offload_pending_store_blocks",
}
_INFO = "vllm:simple_kv_offload_info"
_LOAD_BLOCKS = _SCALARS["simple_load_blocks"]

WANTED: frozenset[str] = frozenset([_OUTCOMES, *_SCALARS.values(), _INFO])


def read(result: ParseResult, page: Page) -> None:
    def owner(labels: Labels) -> EngineSample:
        return engine_on_page(page, vllm_key(labels), "vllm")

    add_by_label(result.get(_OUTCOMES), owner, "save_outcomes", label_value("outcome"))
    for field_name, name in _SCALARS.items():
        samples = result.get(name)
        if name == _LOAD_BLOCKS:  # vllm#57251 splits it by phase: completed is the load count
            samples = guarded(samples, name, owner)
        add_to_field(samples, owner, field_name)
    for labels, _ in result.get(_INFO):
        sample = engine_on_page(page, vllm_key(labels), "vllm")
        raw = labels.get("capacity_blocks", "")
        if raw.isascii() and raw.isdigit():
            sample.simple_capacity_blocks = float(raw)
        backend = labels.get("backend", "")
        sample.simple_backend = backend or None
        if backend in ("cpu", "disk"):
            sample.offload_tier = "host" if backend == "cpu" else "disk"


def page_format(result: ParseResult) -> str | None:
    return None  # a vLLM page: vllm.py names its naming generation


ENGINE = Engine(
    kind="vllm",
    title="vLLM SimpleCPUOffloadConnector",
    families=WANTED,
    page_format=page_format,
    tiers=("host", "disk"),
    fixtures="vllm-simple-offload",
    read=read,
)
