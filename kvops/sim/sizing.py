"""KV bytes per token for the simulated model, from a model's config.json when given."""

from __future__ import annotations

from kvops.errors import UsageError


def kv_bytes_per_token(path: str, dtype: str = "auto") -> int:
    """Whole-model KV bytes per token via kvops size's code (kvops.doctor.modelcfg)."""
    try:
        from kvops.doctor import modelcfg
    except ImportError:
        raise UsageError("--model needs kvops.doctor.modelcfg, which this build lacks") from None
    try:
        return int(modelcfg.load(path).kv_bytes_per_token(dtype))
    except UsageError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        raise UsageError(f"--model {path}: {exc}") from None
