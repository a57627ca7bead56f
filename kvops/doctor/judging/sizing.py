"""How big the CPU offload buffer should be: KV bytes per token, tokens to hold, and this host's room.

- `--kv-offloading-size` is GiB *summed over all TP ranks* (vLLM CacheConfig docstring); each rank
  offloads what it holds, so the total is per-GPU bytes x TP (MLA ranks each hold the whole latent).
- Leave 30–50 % of host RAM to the OS, the weights' page cache and the engine (seed guidance).
- One reporter measured the native pool's host footprint at 1.92x the requested size (vllm#53042).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kvops.doctor.reading.modelcfg import ModelInfo
from kvops.doctor.reading.platform import Platform
from kvops.units import GIB

# The AMD/ROCm seed guide's table: context length -> recommended --kv-offloading-size (GiB).
SEED_TABLE: tuple[tuple[int, int, int], ...] = ((32768, 32, 64), (65536, 64, 96), (131072, 96, 128))
MEASURED_FOOTPRINT_FACTOR = 1.92  # vllm#53042
RAM_KEEP_FREE = (0.30, 0.50)


@dataclass
class SizeReport:
    model: ModelInfo
    kv_cache_dtype: str
    max_model_len: int
    concurrency: int
    tensor_parallel_size: int
    platform: Platform | None

    @property
    def bytes_per_token(self) -> int:
        return self.model.kv_bytes_per_token(self.kv_cache_dtype)

    @property
    def bytes_per_token_per_gpu(self) -> int:
        return self.model.kv_bytes_per_token_per_gpu(self.tensor_parallel_size, self.kv_cache_dtype)

    @property
    def buffer_bytes(self) -> int:
        """Total over all ranks for max_model_len x concurrency tokens."""
        tokens = self.max_model_len * self.concurrency
        return self.bytes_per_token_per_gpu * self.tensor_parallel_size * tokens

    @property
    def recommended_gib(self) -> int:
        return max(1, math.ceil(self.buffer_bytes / GIB))

    def seed_row(self) -> tuple[int, int, int] | None:
        for row in SEED_TABLE:
            if self.max_model_len <= row[0]:
                return row
        return SEED_TABLE[-1] if self.max_model_len > SEED_TABLE[-1][0] else None

    def why(self) -> list[str]:
        m = self.model
        size = m.dtype_bytes(self.kv_cache_dtype)
        lines: list[str] = []
        if m.is_mla:
            latent = (m.kv_lora_rank or 0) + (m.qk_rope_head_dim or 0)
            lines.append(
                f"MLA: one compressed latent of kv_lora_rank {m.kv_lora_rank} + rope {m.qk_rope_head_dim}"
                f" = {latent} values per token per layer, not K and V for each of"
                f" {m.num_attention_heads} heads; the naive MHA formula would give"
                f" {m.naive_mha_bytes_per_token(self.kv_cache_dtype):,} B/token"
                f" ({m.naive_mha_bytes_per_token(self.kv_cache_dtype) / self.bytes_per_token:.0f}x more)."
            )
            if m.is_dsa:
                lines.append(
                    f"DSA: plus the sparse-attention indexer cache, {m.indexer_bytes_per_token_per_layer()}"
                    " B/token/layer (fp8 keys + fp32 scale per 128)"
                    + ("; fp8 MLA uses DSv3.2's 656 B/token/layer layout." if size == 1 else ".")
                )
            lines.append(
                "MLA under TP: every rank keeps the whole latent, so the per-GPU figure is not divided."
            )
        else:
            lines.append(
                f"{'GQA' if 'gqa' in m.kinds else 'MHA'}: 2 (K,V) x {m.attention_layers} layers"
                f" x {m.num_kv_heads} KV heads"
                f" x head_dim {m.head_dim} x {size} B"
            )
        if "hybrid" in m.kinds:
            lines.append(
                f"hybrid: only {m.attention_layers} of {m.num_layers} layers keep per-token KV;"
                " linear/Mamba layers keep a fixed state per sequence."
            )
        if m.sliding_window:
            lines.append(
                f"sliding window {m.sliding_window}: with the hybrid KV cache manager on, sliding layers"
                " keep at most the window; the figure here is the upper bound (all layers full)."
            )
        lines.extend(m.notes)
        return lines

    def host_checks(self) -> list[str]:
        """Warnings about this host; 'could not check' where the probe could not."""
        out: list[str] = []
        plat = self.platform
        need = self.recommended_gib * GIB
        if plat is None or plat.host_ram_bytes is None:
            out.append("host RAM: could not check")
        else:
            ram = min(plat.host_ram_bytes, plat.memory_limit_bytes or plat.host_ram_bytes)
            usable = ram * (1 - RAM_KEEP_FREE[0])
            footprint = need * MEASURED_FOOTPRINT_FACTOR
            verdict = "fits" if footprint <= usable else "does NOT fit"
            out.append(
                f"host RAM {ram / GIB:.0f} GiB: keep 30-50% free -> {ram * 0.5 / GIB:.0f}-{usable / GIB:.0f}"
                f" GiB for the buffer; {self.recommended_gib} GiB x {MEASURED_FOOTPRINT_FACTOR} measured"
                f" footprint = {footprint / GIB:.0f} GiB {verdict}"
            )
        if plat is None or plat.shm_free_bytes is None:
            out.append("/dev/shm: could not check")
        else:
            ok = plat.shm_free_bytes >= need
            out.append(
                f"/dev/shm free {plat.shm_free_bytes / GIB:.1f} GiB "
                + ("holds" if ok else "is smaller than")
                + f" the buffer ({self.recommended_gib} GiB) — native offload on recent vLLM maps it there"
                + ("" if ok else "; use docker --ipc=host or --shm-size, or a smaller size")
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        row = self.seed_row()
        plat = self.platform
        return {
            "model": self.model.path,
            "model_type": self.model.model_type,
            "attention": self.model.attention,
            "kinds": sorted(self.model.kinds),
            "num_layers": self.model.num_layers,
            "attention_layers": self.model.attention_layers,
            "kv_cache_dtype": self.kv_cache_dtype,
            "dtype_bytes": self.model.dtype_bytes(self.kv_cache_dtype),
            "kv_bytes_per_token": self.bytes_per_token,
            "kv_bytes_per_token_per_gpu": self.bytes_per_token_per_gpu,
            "naive_mha_bytes_per_token": self.model.naive_mha_bytes_per_token(self.kv_cache_dtype),
            "tensor_parallel_size": self.tensor_parallel_size,
            "max_model_len": self.max_model_len,
            "concurrency": self.concurrency,
            "buffer_bytes": self.buffer_bytes,
            "recommended_kv_offloading_size_gib": self.recommended_gib,
            "seed_guidance_gib": None
            if row is None
            else {"context": row[0], "min": row[1], "max": row[2], "source": "AMD/ROCm seed guide"},
            "host": None
            if plat is None
            else {
                "ram_bytes": plat.host_ram_bytes,
                "memory_limit_bytes": plat.memory_limit_bytes,
                "shm_free_bytes": plat.shm_free_bytes,
            },
            "host_checks": self.host_checks(),
            "why": self.why(),
        }

    def to_text(self) -> str:
        d = self.to_dict()
        m = self.model
        lines = [
            f"model: {m.path} ({m.model_type}, attention {m.attention}, {m.num_layers} layers)",
            f"KV bytes per token: {d['kv_bytes_per_token']:,} (whole model, {self.kv_cache_dtype} ="
            f" {d['dtype_bytes']} B)",
            f"per GPU at TP={self.tensor_parallel_size}: {d['kv_bytes_per_token_per_gpu']:,} B/token",
        ]
        lines += [f"  {w}" for w in self.why()]
        lines.append(
            f"buffer for {self.max_model_len:,} tokens x {self.concurrency} sequences:"
            f" {self.buffer_bytes / GIB:.1f} GiB over all ranks"
        )
        lines.append(f"recommended: --kv-offloading-size {self.recommended_gib}")
        row = self.seed_row()
        table = ", ".join(f"{c // 1024}K -> {lo}-{hi}" for c, lo, hi in SEED_TABLE)
        lines.append(
            f"seed guidance (AMD guide, GiB): {table}"
            + (f"; your context falls in the {row[0] // 1024}K row" if row else "")
        )
        lines += self.host_checks()
        return "\n".join(lines)
