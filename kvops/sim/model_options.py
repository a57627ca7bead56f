"""Simulator options from a model's config.json, via the code behind `kvops size`."""

from __future__ import annotations

from kvops.errors import UsageError


def model_options(path: str, kv_cache_dtype: str = "auto") -> dict[str, int]:
    """kv_bytes_per_token (whole model, all layers) and max_model_len for SimConfig."""
    from kvops.doctor.reading import modelcfg  # UsageError (one line) on a missing or bad config

    try:
        info = modelcfg.load(path)
        options = {"kv_bytes_per_token": int(info.kv_bytes_per_token(kv_cache_dtype))}
    except (ValueError, KeyError) as exc:
        raise UsageError(f"--model {path}: {exc}") from None
    if info.max_position_embeddings:
        options["max_model_len"] = int(info.max_position_embeddings)
    return options
