"""Read the installed vLLM's source (never import it: that pulls torch and CUDA) for facts a
version number cannot give, such as whether a build carries a fix.

PR #37090 changed OffloadingConnector's register_kv_caches to look layers up by
`AttentionLayerBase` instead of `Attention`; with `Attention`, the DSA indexer cache and (after
PR #25103) MLA layers are missing and the lookup raises KeyError (docs/research/failures.md §A).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

# Where register_kv_caches has lived: the connector itself (older) and its worker module (newer).
OFFLOADING_FILES = (
    "distributed/kv_transfer/kv_connector/v1/offloading_connector.py",
    "distributed/kv_transfer/kv_connector/v1/offloading/worker.py",
)
_FUNC = re.compile(r"def register_kv_caches\(.*?(?=\n\s*def |\nclass |\Z)", re.S)
_CALL = re.compile(r"get_layers_from_vllm_config\(\s*[\w.]+\s*,\s*([\w.]+)")


def installed_root() -> Path | None:
    """The installed vllm package folder, found without importing it."""
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def offloading_layer_filter(root: Path) -> str | None:
    """'Attention' (affected), 'AttentionLayerBase' (has the fix) or None (could not tell)."""
    for rel in OFFLOADING_FILES:
        try:
            text = (root / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for func in _FUNC.finditer(text):
            call = _CALL.search(func.group(0))
            if call is None:
                continue
            arg = call.group(1)
            if arg == "Attention":
                return "Attention"
            if "AttentionLayerBase" in arg or "AttentionLayerBase" in func.group(0):
                return "AttentionLayerBase"
    return None
