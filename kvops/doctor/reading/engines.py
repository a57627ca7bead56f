"""Serving engines other than vLLM that doctor reads: SGLang and NVIDIA Dynamo.

Their KV offloading fails in its own ways (SGLang's HiCache, Dynamo's KVBM) and their reports look
like vLLM's: a launch command, a start-up banner, a version. This module says which engine a launch
command starts and which engine and release a log comes from; the catalog's playbooks say the rest.

Launch forms (from each project's docs): `python -m sglang.launch_server ...` and `sglang serve ...`
(SGLang); `python -m dynamo.vllm|dynamo.sglang|dynamo.trtllm|dynamo.frontend ...` (Dynamo; dynamo.vllm
passes vLLM's own flags through, plus its own such as `--connector kvbm`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

VLLM, SGLANG, DYNAMO = "vllm", "sglang", "dynamo"
SHOWN = {VLLM: "vLLM", SGLANG: "SGLang", DYNAMO: "Dynamo"}
_PYTHON = re.compile(r"(?:.*/)?python[\d.]*$")
_MODULES = {
    "sglang.launch_server": SGLANG,
    "sglang.launch_server_multi": SGLANG,
    "dynamo.vllm": DYNAMO,
    "dynamo.sglang": DYNAMO,
    "dynamo.trtllm": DYNAMO,
    "dynamo.frontend": DYNAMO,
    "dynamo.mocker": DYNAMO,
}


def other_launch(tokens: Sequence[str]) -> tuple[str, int] | None:
    """(engine, number of launch tokens) when `tokens` start an SGLang or Dynamo server."""
    if len(tokens) >= 2 and tokens[0].split("/")[-1] == "sglang" and tokens[1] == "serve":
        return SGLANG, 2
    if len(tokens) >= 3 and _PYTHON.match(tokens[0]) and tokens[1] == "-m" and tokens[2] in _MODULES:
        return _MODULES[tokens[2]], 3
    return None


def engine_of(launch: Sequence[str]) -> str:
    """The engine a command's launch tokens start (vLLM unless they name another)."""
    found = other_launch(launch)
    return found[0] if found else VLLM


# Start-up lines and environment reports that name the engine's release. SGLang: its collect-env
# (`python -m sglang.check_env`) prints `sglang: 0.5.8`, pip pins `sglang==0.5.8`, images are tagged
# `lmsysorg/sglang:v0.5.8-cu129`; issue templates say "SGLang version: ...". Dynamo: `ai-dynamo==0.7.0`,
# the image `nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.7.0`, and the KVBM wheel `kvbm 1.4.2` / `kvbm==1.4.2`.
_VERSION = {
    SGLANG: re.compile(
        r"(?:^|[\s`'\"(])sglang(?:\s+version)?\s*(?::|==|\s)\s*v?(?P<v>\d+\.\d+(?:\.\d+)?(?:\.post\d+|rc\d+)?)\b"
        r"|lmsysorg/sglang:v?(?P<img>\d+\.\d+(?:\.\d+)?(?:\.post\d+|rc\d+)?)",
        re.I,
    ),
    DYNAMO: re.compile(
        r"ai-dynamo(?:\[\w+\])?\s*(?:==|:)\s*v?(?P<v>\d+\.\d+(?:\.\d+)?(?:\.post\d+|rc\d+)?)\b"
        r"|ai-dynamo/\w+-runtime:v?(?P<img>\d+\.\d+(?:\.\d+)?)"
        r"|\bdynamo\s+(?:version\s*:?\s*)?v(?P<tag>\d+\.\d+(?:\.\d+)?)\b",
        re.I,
    ),
}
# What says a log comes from an engine at all (its module paths, its process names, its launch line).
_MARKS = {
    # server_args=ServerArgs(...) is the first line SGLang's launch_server logs (vLLM prints
    # "non-default args"); the scheduler's watchdog line is sglang/srt/utils/watchdog.py's.
    SGLANG: re.compile(
        r"sglang[/.](?:srt|launch_server)|\bsglang serve\b|Scheduler hit an exception|"
        r"\bserver_args=ServerArgs\(|Scheduler watchdog timeout",
        re.I,
    ),
    DYNAMO: re.compile(
        r"\bdynamo[./](?:vllm|sglang|trtllm|frontend|llm|runtime)\b|\bkvbm\b|DynamoConnector|DYN_KVBM_", re.I
    ),
}
HINTS = (
    "sglang",
    "SGLang",
    "dynamo",
    "Dynamo",
    "kvbm",
    "KVBM",
    "DYN_",
    "Scheduler hit",
    "ServerArgs(",
    "Scheduler watchdog",
)


def engine_in(line: str) -> str | None:
    """The engine a log line shows it comes from (SGLang or Dynamo), or None."""
    for engine, rx in _MARKS.items():
        if rx.search(line):
            return engine
    return None


def version_in(engine: str, line: str) -> str | None:
    rx = _VERSION.get(engine)
    m = rx.search(line) if rx else None
    if not m:
        return None
    return next(g for g in m.groups() if g)
