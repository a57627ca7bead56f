"""The vLLM release a pasted command's container image names, where vLLM's project tags it.

vLLM publishes `vllm/vllm-openai` (and `vllm/vllm-openai-rocm`) tagged `v<release>` for each
release (v0.11.0, v0.10.1.1), beside `latest` and `nightly`, which name none; AMD's `rocm/vllm`
images carry it after `vllm_` (rocm/vllm:rocm6.4.1_vllm_0.9.1_20250715). Images that hold vLLM but
are tagged with another project's release (LMCache's lmcache/vllm-openai, NVIDIA's
nvcr.io/nvidia/vllm) are not read. A mirror (`registry.example/vllm/vllm-openai:v0.11.0`) counts
as the image it mirrors. Found in the text as given (docker run, compose or Kubernetes YAML, a
`bash -c` chain, prose), so the shape of the paste does not matter.
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


@dataclass(frozen=True)
class ImageRelease:
    release: str | None  # None: no such image, or images of more than one release
    images: tuple[str, ...]  # the image references found, as written


def image_release(text: str) -> ImageRelease:
    """The release every vLLM image in `text` names, with the references read."""
    found: dict[str, str] = {}  # image as written -> its release
    for pattern in _IMAGES:
        for m in pattern.finditer(text):
            found.setdefault(m.group(0), m.group("v"))
    releases = set(found.values())
    return ImageRelease(releases.pop() if len(releases) == 1 else None, tuple(found))
