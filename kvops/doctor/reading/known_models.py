"""A model named on the serve line, read from a config kvops ships when no --model is given.

Most failure reports give only `vllm serve deepseek-ai/DeepSeek-V3.2 ...`, not the config.json;
the checks that hinge on the attention kind (MLA, DSA, hybrid) would then say nothing. For the
models whose architecture those checks are about, kvops ships the fields of their published
config.json (kvops/doctor/reading/repro_models/, provenance in its README). A served model is matched by
its Hugging Face id or by the last part of a local path (`/models/DeepSeek-V3.2`), case-insensitively;
fine-tunes and revisions that keep the architecture map to the same config.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from kvops.doctor.reading import modelcfg
from kvops.doctor.reading.modelcfg import ModelInfo

# last path component, lower case -> shipped config (same architecture: layer count, MLA/DSA/hybrid)
_BY_NAME: dict[str, str] = {
    "deepseek-v3.2": "deepseek-v3.2.json",
    "deepseek-v3.2-exp": "deepseek-v3.2.json",
    "deepseek-v3.2-speciale": "deepseek-v3.2.json",
    "deepseek-v3": "deepseek-v3.json",
    "deepseek-v3-0324": "deepseek-v3.json",
    "deepseek-v3.1": "deepseek-v3.json",
    "deepseek-v3.1-terminus": "deepseek-v3.json",
    "deepseek-r1": "deepseek-v3.json",
    "deepseek-r1-0528": "deepseek-v3.json",
    "qwen3-next-80b-a3b-instruct": "qwen3-next-80b-a3b.json",
    "qwen3-next-80b-a3b-thinking": "qwen3-next-80b-a3b.json",
    "qwen3-next-80b-a3b": "qwen3-next-80b-a3b.json",
}


def shipped_config_for(served: str | None) -> ModelInfo | None:
    """The shipped config of the model `served` names, or None when kvops has none for it."""
    if not served:
        return None
    name = served.rstrip("/").rsplit("/", 1)[-1].lower()
    for suffix in ("-fp8", "-fp4", "-nvfp4", "-awq", "-int4", "-int8", "-bf16"):
        name = name.removesuffix(suffix)  # quantised uploads keep the architecture
    shipped = _BY_NAME.get(name)
    if shipped is None:
        return None
    return modelcfg.load(shipped_model(shipped))


def shipped_model(name: str) -> Path:
    """A config.json kvops ships (kvops/doctor/reading/repro_models/): --repro's models, and the ones
    above."""
    return Path(str(resources.files("kvops.doctor.reading").joinpath("repro_models").joinpath(name)))
