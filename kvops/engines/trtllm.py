"""TensorRT-LLM (trtllm-serve) expositions -> EngineSamples (engine_kind="trtllm").

From TensorRT-LLM's tensorrt_llm/metrics/collector.py (prometheus_client, prefix trtllm_,
labels engine_type and model_name; docs/tiers.md has the mapping and its source):
- kv_cache_offload_bytes: GPU -> host (secondary pool), the store direction;
  kv_cache_onboard_bytes: host -> GPU, the load direction. No transfer time is exposed, so no
  bandwidth: absent, never guessed;
- kv_cache_host_utilization: secondary (host) pool used / max blocks, 0-1;
- kv_cache_reused_blocks / missed_blocks are blocks; with kv_cache_tokens_per_block on the
  same page they become tokens (a block onboarded from the host counts as reused).
The host tier's dropped-before-reuse and evictable figures (TensorRT-LLM#14544) are in its
iteration stats only, not on /metrics: nothing to read here (docs/tiers.md).
"""

from __future__ import annotations

from kvops.engines.common import Engine, Engines, Page
from kvops.exposition.parser import Labels, ParseResult
from kvops.snapshot import EngineSample

_SCALARS = {
    "kv_cache_usage": "trtllm_kv_cache_utilization",
    "requests_running": "trtllm_num_requests_running",
    "requests_waiting": "trtllm_num_requests_waiting",
    "store_bytes": "trtllm_kv_cache_offload_bytes_total",
    "load_bytes": "trtllm_kv_cache_onboard_bytes_total",
}
_HOST_UTILIZATION = "trtllm_kv_cache_host_utilization"
_REUSED = "trtllm_kv_cache_reused_blocks_total"
_MISSED = "trtllm_kv_cache_missed_blocks_total"
_TOKENS_PER_BLOCK = "trtllm_kv_cache_tokens_per_block"
WANTED: frozenset[str] = frozenset(
    [*_SCALARS.values(), _HOST_UTILIZATION, _REUSED, _MISSED, _TOKENS_PER_BLOCK]
)


def _key(labels: Labels) -> tuple[str, str]:
    return (labels.get("model_name", ""), labels.get("engine", "0"))


def _samples(result: ParseResult, target: str) -> list[EngineSample]:
    engines = Engines(target, "trtllm")

    def by_key(name: str) -> dict[tuple[str, str], float]:
        out: dict[tuple[str, str], float] = {}
        for labels, value in result.get(name):
            out[_key(labels)] = out.get(_key(labels), 0.0) + value
        return out

    for field, name in _SCALARS.items():
        for key, value in by_key(name).items():
            setattr(engines.get(key), field, value)
    for key, value in by_key(_HOST_UTILIZATION).items():
        engines.get(key).tier_utilization["host"] = value
    per_block = by_key(_TOKENS_PER_BLOCK)
    reused, missed = by_key(_REUSED), by_key(_MISSED)
    for key, tokens in per_block.items():
        if key in reused and key in missed and tokens > 0:
            sample = engines.get(key)
            sample.local_hits = reused[key] * tokens
            sample.local_queries = (reused[key] + missed[key]) * tokens
    for sample in engines.samples():
        if sample.store_bytes is not None or sample.load_bytes is not None or sample.tier_utilization:
            sample.offload_tier = "host"
    return engines.samples()


def read(result: ParseResult, page: Page) -> None:
    page.engines.extend(_samples(result, page.target))


def page_format(result: ParseResult) -> str | None:
    return "trtllm" if any(name.startswith("trtllm_") for name in result.types) else None


ENGINE = Engine(
    kind="trtllm",
    title="TensorRT-LLM",
    families=WANTED,
    page_format=page_format,
    tiers=("gpu", "host"),
    fixtures="trtllm",
    read=read,
)
