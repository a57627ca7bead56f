"""Do a model's weights fit in GPU memory without `--cpu-offload-gb`? The evidence the
`cpu-offload-gb-is-weights` warning rests on.

`--cpu-offload-gb N` is right when the weights do not fit (vLLM's weight offloading), wrong when the
user wanted KV-cache offloading. Doctor only says "wrong" with evidence: weights that fit (their size
from the checkpoint's safetensors index or files, or from vLLM's own "Model loading took X GiB" line
plus the N GiB it moved to the host; the GPU's memory from this host's probe or the log), or the
user's own words asking for KV offloading. Without either it is an `info` naming what would tell.
The checkpoint's size is exact; the size from config.json alone is an estimate, so it decides only
with a margin (fits below 0.8 x 0.9 of the GPU, needs the flag above the GPU's whole memory).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kvops.units import GIB

# vLLM's default --gpu-memory-utilization, and the share of it the weights may take and still leave
# a useful KV cache and activation space (a judgement, stated in the evidence).
DEFAULT_UTILIZATION = 0.9
FITS_SHARE = 0.8
# The most memory one GPU has (B300: 288 GB): weights beyond it per rank need offloading on any GPU.
LARGEST_GPU = 288 * 10**9
LOADED = re.compile(r"Model loading took (?P<gib>\d{1,4}(?:\.\d+)?) ?GiB")
CAPACITY = re.compile(r"total capacity of (?P<gib>\d{1,4}(?:\.\d+)?) ?GiB")
# GPU names that carry their memory: "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "MI300X (192GB)"
GPU_NAME = re.compile(
    r"\b(?:A100|A800|H100|H800|H200|H20|B200|B300|GH200|L40S?|L4|A10G?|A40|A6000|RTX ?\w+|MI\d{3}X?)"
    r"[\w -]{0,20}?[ (-](?P<gb>\d{2,3}) ?GB\b"
)


def checkpoint_bytes(model_path: str) -> tuple[int, str] | None:
    """(bytes, where) of a local checkpoint's weights: the safetensors index's total_size, else the
    sum of its *.safetensors files; None when neither is there."""
    folder = Path(model_path)
    if folder.is_file():
        folder = folder.parent
    index = folder / "model.safetensors.index.json"
    try:
        if index.is_file():
            meta = json.loads(index.read_text(encoding="utf-8")[: 1 << 22]).get("metadata", {})
            total = meta.get("total_size")
            if isinstance(total, int) and total > 0:
                return total, f"{index.name} total_size"
        files = sorted(folder.glob("*.safetensors"))[:1000]
        size = sum(f.stat().st_size for f in files)
    except (OSError, ValueError, AttributeError):
        return None
    return (size, f"{len(files)} .safetensors files") if size > 1 << 20 else None


def gpu_bytes_in(line: str) -> int | None:
    """Per-GPU memory a log line states (torch's OOM message, a GPU name with its size)."""
    m = CAPACITY.search(line)
    if m:
        return int(float(m.group("gib")) * GIB)
    m = GPU_NAME.search(line)
    return int(m.group("gb")) * 10**9 if m else None


def loaded_bytes_in(line: str) -> int | None:
    """The GPU memory vLLM's weights took on one rank (its "Model loading took X GiB" line)."""
    m = LOADED.search(line)
    return int(float(m.group("gib")) * GIB) if m else None


def _positive(cfg: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1 << 40:
            return value
    return None


def config_bytes(cfg: dict[str, Any]) -> tuple[int, str] | None:
    """An estimate of the weights' bytes from config.json alone: embeddings, attention projections,
    MLP or MoE experts, in the checkpoint's dtype. None when a quantisation other than FP8 makes the
    bytes per parameter unknown, or a size the estimate needs is missing."""
    nested = cfg.get("text_config")
    text: dict[str, Any] = nested if isinstance(nested, dict) else cfg
    quant = text.get("quantization_config") or cfg.get("quantization_config")
    if quant is not None:
        method = str(quant.get("quant_method", "")) if isinstance(quant, dict) else ""
        if method != "fp8":
            return None  # 4-bit and mixed schemes: bytes per parameter not knowable here
        per_param = 1
    else:
        dtype = str(text.get("torch_dtype") or text.get("dtype") or cfg.get("torch_dtype") or "bfloat16")
        per_param = {"float32": 4, "float": 4}.get(dtype, 2)
    hidden = _positive(text, "hidden_size", "d_model", "n_embd")
    layers = _positive(text, "num_hidden_layers", "num_layers", "n_layer")
    heads = _positive(text, "num_attention_heads", "n_head")
    vocab = _positive(text, "vocab_size") or 0
    if hidden is None or layers is None or heads is None:
        return None
    kv_heads = _positive(text, "num_key_value_heads") or heads
    head_dim = _positive(text, "head_dim") or hidden // heads
    attention = hidden * head_dim * (2 * heads + 2 * kv_heads)
    inter = _positive(text, "intermediate_size", "ffn_dim") or 4 * hidden
    experts = _positive(text, "n_routed_experts", "num_experts", "num_local_experts")
    moe_inter = _positive(text, "moe_intermediate_size") or inter
    if experts:
        shared = _positive(text, "n_shared_experts") or 0
        dense_layers = _positive(text, "first_k_dense_replace") or 0
        moe = 3 * hidden * moe_inter * (experts + shared)
        mlp = dense_layers * 3 * hidden * inter + (layers - min(dense_layers, layers)) * moe
    else:
        mlp = layers * 3 * hidden * inter
    tied = bool(text.get("tie_word_embeddings", cfg.get("tie_word_embeddings", False)))
    params = layers * attention + mlp + vocab * hidden * (1 if tied else 2)
    return params * per_param, f"estimated from config.json ({params / 1e9:.1f} B parameters x {per_param} B)"
