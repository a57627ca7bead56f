"""A Hugging Face config.json read the way vLLM reads it: attention kind, layers, KV bytes per token.

Facts used here (sources in docs/research/failures.md):
- MLA: vLLM's `is_deepseek_mla` is `hf_text_config.model_type` in a fixed list *and* a non-null
  `kv_lora_rank`; the latent cache holds `kv_lora_rank + qk_rope_head_dim` values per token per layer.
- DSA (DeepSeek Sparse Attention): vLLM sets `is_v32 = hasattr(config, "index_topk")`; the lightning
  indexer keeps its own cache of fp8 keys plus one fp32 scale per 128 values (132 B/token/layer for
  index_head_dim 128), in every precision of the main cache.
- DSv3.2's fp8 MLA cache (`fp8_ds_mla`) is 656 B/token/layer: 512 fp8 + 16 B scales + 64 bf16 rope.
- Multimodal wrappers keep the language model under `text_config` (vLLM's hf_text_config).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvops.errors import UsageError

# vLLM's is_deepseek_mla list (vllm/config/model.py) plus glm_moe_dsa, which some releases carry.
MLA_MODEL_TYPES = frozenset(
    {
        "deepseek_v2",
        "deepseek_v3",
        "deepseek_v32",
        "deepseek_mtp",
        "kimi_k2",
        "kimi_linear",
        "longcat_flash",
        "pangu_ultra_moe",
        "glm_moe_dsa",
    }
)
DSA_MODEL_TYPES = frozenset({"deepseek_v32", "glm_moe_dsa"})

DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "float16": 2,
    "half": 2,
    "bfloat16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "fp8_ds_mla": 1,
}
DSV32_FP8_MLA_BYTES_PER_LAYER = 656  # vLLM DSv3.2 blog: 512 fp8 latent + 16 B scales + 128 B bf16 rope

# Layer-type names that hold per-token KV (the rest hold a fixed state per sequence).
_ATTENTION_LAYER_TYPES = {"full_attention", "attention", "sliding_attention", "chunked_attention"}
_LINEAR_MARKERS = ("linear", "mamba", "ssm", "gdn", "conv", "recurrent", "lightning")


@dataclass(frozen=True)
class ModelInfo:
    """What the KV cache of a model looks like, from its config.json alone."""

    path: str
    model_type: str
    architectures: tuple[str, ...]
    attention: str  # dsa | mla | hybrid | gqa | mha
    kinds: frozenset[str]  # every property that matters: mla, dsa, hybrid, sliding_window, moe, gqa, mha
    num_layers: int  # num_hidden_layers of the text model
    attention_layers: int  # layers that keep per-token KV (hybrids have fewer)
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    dtype: str  # the checkpoint's activation dtype; "auto" KV cache uses it
    max_position_embeddings: int | None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    index_head_dim: int | None = None
    mla_kv_head_dims: tuple[int, int] | None = None  # (K = qk_nope + qk_rope, V) once decompressed
    sliding_window: int | None = None
    moe_intermediate_size: int | None = None
    num_experts: int | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def is_mla(self) -> bool:
        return "mla" in self.kinds

    @property
    def is_dsa(self) -> bool:
        return "dsa" in self.kinds

    @property
    def is_moe(self) -> bool:
        return "moe" in self.kinds

    def dtype_bytes(self, kv_cache_dtype: str = "auto") -> int:
        name = self.dtype if kv_cache_dtype in ("auto", "", None) else kv_cache_dtype
        try:
            return DTYPE_BYTES[name]
        except KeyError:
            raise UsageError(f"unknown KV cache dtype {name!r} (expected auto, fp8, bfloat16, ...)") from None

    def kv_bytes_per_token_per_layer(self, kv_cache_dtype: str = "auto") -> int:
        """Bytes one token keeps in one attention layer, across all heads (before TP)."""
        size = self.dtype_bytes(kv_cache_dtype)
        if self.is_mla:
            assert self.kv_lora_rank is not None and self.qk_rope_head_dim is not None
            if self.is_dsa and size == 1:
                per_layer = DSV32_FP8_MLA_BYTES_PER_LAYER
            else:
                per_layer = (self.kv_lora_rank + self.qk_rope_head_dim) * size
            if self.is_dsa:
                per_layer += self.indexer_bytes_per_token_per_layer()
            return per_layer
        return 2 * self.num_kv_heads * self.head_dim * size

    def indexer_bytes_per_token_per_layer(self) -> int:
        """DSA indexer cache: fp8 keys + one fp32 scale per 128 values, whatever the KV dtype."""
        if not self.is_dsa or not self.index_head_dim:
            return 0
        return self.index_head_dim + self.index_head_dim // 128 * 4

    def kv_bytes_per_token(self, kv_cache_dtype: str = "auto") -> int:
        """KV bytes per token for the whole model (every attention layer), before tensor parallelism."""
        return self.attention_layers * self.kv_bytes_per_token_per_layer(kv_cache_dtype)

    def kv_bytes_per_token_per_gpu(self, tensor_parallel_size: int = 1, kv_cache_dtype: str = "auto") -> int:
        """What one GPU holds per token under TP.

        GQA/MHA shard KV heads across ranks (a head is replicated when there are fewer heads than
        ranks); MLA's latent vector has no head dimension, so every rank keeps all of it.
        """
        if tensor_parallel_size < 1:
            raise UsageError("--tensor-parallel-size must be at least 1")
        if self.is_mla:
            return self.kv_bytes_per_token(kv_cache_dtype)
        heads_per_rank = max(1, -(-self.num_kv_heads // tensor_parallel_size))
        return self.attention_layers * 2 * heads_per_rank * self.head_dim * self.dtype_bytes(kv_cache_dtype)

    def naive_mha_bytes_per_token(self, kv_cache_dtype: str = "auto") -> int:
        """The textbook formula — full K and V for every head of every layer — for comparison.

        For MLA this is what caching the decompressed K (qk_nope + qk_rope) and V per head would
        cost, the figure MLA exists to avoid.
        """
        size = self.dtype_bytes(kv_cache_dtype)
        heads = self.num_attention_heads
        if self.mla_kv_head_dims:
            k_dim, v_dim = self.mla_kv_head_dims
            return self.num_layers * heads * (k_dim + v_dim) * size
        return 2 * self.num_layers * heads * self.head_dim * size


MAX_CONFIG_BYTES = 8 << 20  # a config.json is kilobytes (DeepSeek-V3's: 1.7 KB); a bigger file is not one
MAX_CONFIG_INT = (1 << 31) - 1  # config.json's sizes are int32s in every loader; beyond is not a size
# sizes that make no KV cache unless positive (a negative head count would print negative bytes)
_POSITIVE = frozenset(
    {
        "num_hidden_layers",
        "num_layers",
        "n_layer",
        "n_layers",
        "num_attention_heads",
        "n_head",
        "num_heads",
        "num_key_value_heads",
        "num_kv_heads",
        "n_kv_heads",
        "hidden_size",
        "d_model",
        "n_embd",
        "head_dim",
        "kv_lora_rank",
        "qk_rope_head_dim",
        "qk_nope_head_dim",
        "v_head_dim",
        "index_head_dim",
        "max_position_embeddings",
        "max_seq_len",
        "seq_length",
    }
)


class BadValue(ValueError):
    """A config value out of range, naming its key; from_dict says it as a UsageError with the path."""


def read_config(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """Find and parse config.json; every failure is one UsageError line. At most
    MAX_CONFIG_BYTES are read: a 3 GB file named config.json is refused, never loaded."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise UsageError(f"model config not found: {p}")
    cap = f"{MAX_CONFIG_BYTES >> 20} MiB"
    try:
        with p.open("rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read model config {p}: {exc.strerror}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise UsageError(
            f"model config {p} is larger than {cap} (kvops reads at most that): not a config.json"
        )
    try:
        cfg = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise UsageError(f"model config {p} is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"model config {p} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    except ValueError as exc:  # an integer past Python's 4,300-digit conversion limit
        raise UsageError(f"model config {p} has a number too long to read ({str(exc)[:60]})") from None
    except RecursionError:
        raise UsageError(f"model config {p} is nested too deeply to read") from None
    if not isinstance(cfg, dict):
        raise UsageError(f"model config {p} is not a JSON object")
    return p, cfg


def _int(cfg: dict[str, Any], *keys: str) -> int | None:
    """The first of `keys` that holds an integer; BadValue when it is out of range (or not
    positive, for a size in _POSITIVE)."""
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, float) and value.is_integer():  # (inf and nan are not integers)
            value = int(value)
        if isinstance(value, int):
            if abs(value) > MAX_CONFIG_INT:
                digits = len(str(abs(value)))
                raise BadValue(f"{key} is a {digits}-digit number, beyond any model's (at most 2^31-1)")
            if key in _POSITIVE and value <= 0:
                raise BadValue(f"{key} is {value}: a model's sizes and counts are positive")
            return value
    return None


def _count_attention_layers(text: dict[str, Any], num_layers: int) -> tuple[int, bool, list[str]]:
    """Layers with per-token KV, whether the model is a hybrid, and notes on how it was decided."""
    layer_types = text.get("layer_types")
    if isinstance(layer_types, list) and layer_types and all(isinstance(t, str) for t in layer_types):
        linear = [t for t in layer_types if any(m in t.lower() for m in _LINEAR_MARKERS)]
        if linear:
            attn = sum(1 for t in layer_types if t in _ATTENTION_LAYER_TYPES)
            return (
                attn,
                True,
                [f"hybrid: {attn} of {len(layer_types)} layers keep per-token KV (layer_types)"],
            )
        return len(layer_types), False, []
    pattern = text.get("hybrid_override_pattern")  # Nemotron-H: M = Mamba, * = attention, - = MLP
    if isinstance(pattern, str) and "M" in pattern:
        attn = pattern.count("*")
        return attn, True, [f"hybrid: {attn} attention layers in hybrid_override_pattern"]
    interval = _int(text, "full_attention_interval")  # Qwen3-Next: one full-attention layer in N
    if interval and interval > 1:
        attn = num_layers // interval
        return attn, True, [f"hybrid: {attn} full-attention layers (one in {interval})"]
    period = _int(text, "attn_layer_period")  # Jamba
    if period and period > 1:
        attn = num_layers // period
        return attn, True, [f"hybrid: {attn} attention layers (one in {period})"]
    return num_layers, False, []


def _mla_dims(text: dict[str, Any], rope_dim: int | None) -> tuple[int, int] | None:
    nope, v = _int(text, "qk_nope_head_dim"), _int(text, "v_head_dim")
    return (nope + (rope_dim or 0), v) if nope and v else None


def _dimensions(text: dict[str, Any], path: str) -> tuple[int, int, int, int]:
    """(layers, attention heads, KV heads, head size): what any KV size needs, else UsageError."""
    num_layers = _int(text, "num_hidden_layers", "num_layers", "n_layer", "n_layers")
    heads = _int(text, "num_attention_heads", "n_head", "num_heads")
    if num_layers is None or heads is None:
        raise UsageError(f"model config {path} has no num_hidden_layers/num_attention_heads")
    if num_layers <= 0 or heads <= 0:  # a head size is hidden_size / heads: 0 heads is no model
        raise UsageError(f"model config {path}: num_hidden_layers and num_attention_heads must be positive")
    kv_heads = _int(text, "num_key_value_heads", "num_kv_heads", "n_kv_heads") or heads
    hidden = _int(text, "hidden_size", "d_model", "n_embd")
    head_dim = _int(text, "head_dim") or (hidden // heads if hidden else None)
    if head_dim is None:
        raise UsageError(f"model config {path} has neither head_dim nor hidden_size")
    return num_layers, heads, kv_heads, head_dim


def _attention(kinds: set[str]) -> str:
    """The one attention kind that decides the KV layout, most specific first."""
    for kind in ("dsa", "mla", "hybrid"):
        if kind in kinds:
            return kind
    return "gqa" if "gqa" in kinds else "mha"


def from_dict(cfg: dict[str, Any], path: str = "<config>") -> ModelInfo:
    """Build ModelInfo from a parsed config.json (text model under `text_config` if present);
    UsageError naming the key when a size is out of range."""
    try:
        return _from_dict(cfg, path)
    except BadValue as exc:
        raise UsageError(f"model config {path}: {exc}") from None


def _from_dict(cfg: dict[str, Any], path: str) -> ModelInfo:
    nested = cfg.get("text_config")
    text: dict[str, Any] = nested if isinstance(nested, dict) else cfg
    model_type = str(text.get("model_type") or cfg.get("model_type") or "unknown")
    archs = cfg.get("architectures") or text.get("architectures") or []
    architectures = tuple(a for a in archs if isinstance(a, str)) if isinstance(archs, list) else ()

    num_layers, heads, kv_heads, head_dim = _dimensions(text, path)
    dtype = str(text.get("torch_dtype") or text.get("dtype") or cfg.get("torch_dtype") or "bfloat16")
    if dtype not in DTYPE_BYTES:
        dtype = "bfloat16"

    kinds: set[str] = set()
    notes: list[str] = []
    kv_lora_rank = _int(text, "kv_lora_rank")
    rope_dim = _int(text, "qk_rope_head_dim")
    if model_type in MLA_MODEL_TYPES and kv_lora_rank is not None:
        kinds.add("mla")
        if rope_dim is None:
            rope_dim = 64
            notes.append("qk_rope_head_dim missing; assumed 64 (DeepSeek-V2/V3)")
    if "mla" in kinds and ("index_topk" in text or model_type in DSA_MODEL_TYPES):
        kinds.add("dsa")
    attention_layers, hybrid, _how = _count_attention_layers(text, num_layers)
    if hybrid:
        kinds.add("hybrid")
    sliding = _int(text, "sliding_window")
    layer_types = text.get("layer_types") or []
    uses_sliding = "sliding_attention" in layer_types if isinstance(layer_types, list) else False
    if sliding and (uses_sliding or text.get("use_sliding_window", True) is not False):
        kinds.add("sliding_window")
    else:
        sliding = None
    n_experts = _int(text, "n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts")
    if n_experts and n_experts > 1:
        kinds.add("moe")
    if "mla" not in kinds:
        kinds.add("gqa" if kv_heads < heads else "mha")

    return ModelInfo(
        path=path,
        model_type=model_type,
        architectures=architectures,
        attention=_attention(kinds),
        kinds=frozenset(kinds),
        num_layers=num_layers,
        attention_layers=attention_layers,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        dtype=dtype,
        max_position_embeddings=_int(text, "max_position_embeddings", "max_seq_len", "seq_length"),
        kv_lora_rank=kv_lora_rank if "mla" in kinds else None,
        qk_rope_head_dim=rope_dim if "mla" in kinds else None,
        index_head_dim=(_int(text, "index_head_dim") or 128) if "dsa" in kinds else None,
        mla_kv_head_dims=_mla_dims(text, rope_dim) if "mla" in kinds else None,
        sliding_window=sliding,
        moe_intermediate_size=_int(text, "moe_intermediate_size", "intermediate_size")
        if "moe" in kinds
        else None,
        num_experts=n_experts if "moe" in kinds else None,
        notes=tuple(notes),
    )


def load(path: str | Path) -> ModelInfo:
    """A model directory or config.json → ModelInfo. UsageError (one line) on a bad file."""
    p, cfg = read_config(path)
    return from_dict(cfg, str(p))
