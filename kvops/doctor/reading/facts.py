"""Evidence facts: words in a log, a report or a command that turn a generic message into a
specific claim (a playbook's `requires`), and what the user says they want. Read by logs.py (the
scan), catalog.py (which names a playbook may require) and diagnose.py."""

from __future__ import annotations

import re

from kvops.doctor.reading.weights import CAPACITY, GPU_NAME, LOADED

# Evidence a generic message needs before it becomes a specific claim (a playbook's `requires`).
FACTS: dict[str, re.Pattern[str]] = {
    "lmcache": re.compile(r"lmcache", re.I),
    "rocm": re.compile(
        r"\brocm|\bhip\b|gfx9\d\d|gfx1[01]\d\d|\bmi[23]\d\dx?\b|aiter|composable_kernel|ck_moe|ck_tile"
        r"|vllm_rocm_|\bamd\b|radeon|/dev/kfd|vllm-openai-rocm"
        # Composable Kernel's own words: CK is AMD's kernel library, built for ROCm only
        r"|wrong! device_gemm|device_gemm with the specified compilation",
        re.I,
    ),
    "fp8_kv": re.compile(
        r"kv[-_ ]?cache[-_ ]?dtype\W{1,3}fp8|fp8 kv|kv[-_ ]cache quant|fp8 kv[-_ ]cache|reshape_and_cache"
        r"|paged_attention|prefix_prefill|context_attention_fwd|decode_attention|unified_attention"
        r"|triton_attn|kv_cache_dtype=.?fp8",
        re.I,
    ),
    "dsa": re.compile(
        r"deepseek[-_ ]?v3\.2|deepseekv32|deepseek_v32|index_topk|indexer|glm[-_ ]?5|glm[-_]dsa|glm_moe_dsa"
        r"|mla_sparse|\bdsa\b",
        re.I,
    ),
    "mla": re.compile(
        r"\bmla\b|use mla: true|mlaattention|is_deepseek_mla|kv_lora_rank|deepseek[-_ ]?(?:v[23]|r1)"
        r"|kimi[-_ ]?k2|glm[-_ ]?4\.[5-9]|glm[-_ ]?5|mla_sparse",
        re.I,
    ),
    "pp": re.compile(
        r"pipeline[-_ ]parallel[-_ ]size\W{1,3}[2-9]|\bpp\s?[=:]?\s?[2-9]|pp rank [1-9]|_PP[1-9]"
        r"|VLLM_PP_LAYER_PARTITION",
        re.I,
    ),
    "offload": re.compile(
        r"kv[-_]offload|offloadingconnector|simplecpuoffload|vllm_offload_|cpu_bytes_to_use|num_cpu_blocks",
        re.I,
    ),
    # the user's own words asking for KV-cache offloading (a report's prose, a comment in a script)
    "kv_intent": re.compile(
        r"offload(?:ing)?\s+(?:of\s+)?(?:the\s+)?kv(?:[-_ ]?cache)?\b|\bkv[-_ ]?cache\s+(?:cpu\s+)?offload"
        r"|\bkv\s+offload|(?:cpu|host|ram)\s+kv[-_ ]?cache"
        r"|kv[-_ ]?cache\s+(?:to|on|in)\s+(?:the\s+)?(?:cpu|host|ram)",
        re.I,
    ),
    "gpu_memory": re.compile(f"{CAPACITY.pattern}|{GPU_NAME.pattern}"),
    "weights_loaded": LOADED,
}
