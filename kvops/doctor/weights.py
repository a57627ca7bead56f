"""Do a model's weights fit in GPU memory without `--cpu-offload-gb`? The evidence the
`cpu-offload-gb-is-weights` warning rests on.

`--cpu-offload-gb N` is right when the weights do not fit (vLLM's weight offloading), wrong when the
user wanted KV-cache offloading. Doctor only says "wrong" with evidence: weights that fit (their size
from the checkpoint's safetensors index or files, or from vLLM's own "Model loading took X GiB" line
plus the N GiB it moved to the host; the GPU's memory from this host's probe or the log), or the
user's own words asking for KV offloading. Without either it is an `info` naming what would tell.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

GIB = 1 << 30
# vLLM's default --gpu-memory-utilization, and the share of it the weights may take and still leave
# a useful KV cache and activation space (a judgement, stated in the evidence).
DEFAULT_UTILIZATION = 0.9
FITS_SHARE = 0.8
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
