"""Scan a vLLM log, streamed line by line, for the playbooks' signatures.

vLLM prefixes every record `(EngineCore_DP0 pid=123) ERROR 10-14 17:00:48 [core.py:708] msg`
(vllm/logger.py _FORMAT; child processes' stdout gets the `(name pid=N)` part too), and a
traceback arrives one prefixed line per frame. A signature counts only when the playbook's
context regex (if any) matches within the same traceback neighbourhood — a window of lines
before and after — or in the serve command: the same KeyError means different things when
raised from register_kv_caches or from get_attn_backends_for_group.

Memory stays flat for any log size: a deque of recent lines and a short list of pending hits.
"""

from __future__ import annotations

import re
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import BinaryIO

from kvops.doctor.catalog import Playbook
from kvops.errors import UsageError

PREFIX = re.compile(
    r"^(?:\d{4}-\d\d-\d\dT\S+\s+)?"  # optional container/k8s timestamp (docker logs -t)
    r"(?:\((?P<proc>[\w.-]+(?: [\w.-]+)*?) pid=(?P<pid>\d+)\)\s*)?"
    r"(?:(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+\[[^\]]*\]\s?)?"
)
VERSION = re.compile(
    r"vLLM API server version (\S+)|vllm version (\d+\.\d+\S*)|Starting vLLM\S* v?(\d+\.\d+\S*)", re.I
)
ARGS_MARK = "non-default args: "  # vllm/entrypoints/utils.py log_non_default_args
BEFORE = 80  # a traceback's frames come before its last line
AFTER = 40  # ...and vLLM often logs "EngineCore failed to start" and the cause after it
MAX_EVIDENCE = 4
BLOCK = 2048  # lines per pre-filter block
MAX_LINE = 64 * 1024
BINARY_PROBE = 64 * 1024  # a pathological line is cut, not held whole


@dataclass
class LogHit:
    playbook: Playbook
    line_no: int
    line: str  # the matched line, prefix kept
    context_line: tuple[int, str] | None = None
    count: int = 1
    more: list[tuple[int, str]] = field(default_factory=list)

    def evidence(self) -> list[str]:
        out = [f"log line {self.line_no}: {self.line.strip()}"]
        out += [f"log line {n}: {text.strip()}" for n, text in self.more]
        if self.context_line:
            n, text = self.context_line
            out.append(f"log line {n} (context): {text.strip()}")
        if self.count > 1 + len(self.more):
            out.append(f"... {self.count} matching lines in all")
        return out


@dataclass
class LogScan:
    hits: dict[str, LogHit]
    version: str | None
    lines: int
    serve_args: str | None = None  # the dict of vLLM's first `non-default args: {...}` line


_META = set(".^$*+?{}[]()|")
_OPTIONAL = set("?*{")


def _split_top(pattern: str) -> list[str] | None:
    """Top-level alternatives of a regex; None if it uses flags or classes we do not parse."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":  # skip a character class whole
            j = pattern.find("]", i + 2)
            if j < 0:
                return None
            i = j + 1
            continue
        if c == "(":
            if pattern.startswith("(?", i) and not pattern.startswith(("(?:", "(?P<"), i):
                return None  # inline flags or look-around: no safe literal
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    parts.append(pattern[start:])
    return parts


def required_literal(alternative: str) -> str:
    """The longest run of plain characters outside groups that every match must contain."""
    best, run, depth, i = "", "", 0, 0
    while i < len(alternative):
        c = alternative[i]
        nxt = alternative[i + 1] if i + 1 < len(alternative) else ""
        if depth == 0 and c == "\\" and nxt and not nxt.isalnum():
            char, i = nxt, i + 2
        elif depth == 0 and c not in _META and c != "\\":
            char, i = c, i + 1
        else:
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            elif c == "[":
                i = alternative.find("]", i + 2)
            elif c == "\\":
                i += 1  # \d, \S ...: a class, ends the run
            best, run = max(best, run, key=len), ""
            i += 1
            continue
        if alternative[i : i + 1] in _OPTIONAL and alternative[i : i + 1]:
            best, run = max(best, run, key=len), ""  # the char just read is optional
            continue
        run += char
    return max(best, run, key=len)


def literals_for(patterns: Iterable[re.Pattern[str]]) -> list[str] | None:
    """Substrings one of which every match contains; None when some pattern has none usable."""
    out: list[str] = []
    for p in patterns:
        alternatives = _split_top(p.pattern) if not p.flags & re.IGNORECASE else None
        if alternatives is None:
            return None
        for alt in alternatives:
            lit = required_literal(alt)
            if len(lit) < 4:
                return None
            out.append(lit)
    return out


def strip_prefix(line: str) -> str:
    m = PREFIX.match(line)
    return line[m.end() :] if m else line


def open_log(path: str) -> tuple[BinaryIO, str]:
    if path == "-":
        return sys.stdin.buffer, "<stdin>"
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"log file not found: {path}")
    try:
        return p.open("rb"), str(p)
    except OSError as exc:
        raise UsageError(f"cannot read log {path}: {exc.strerror}") from None


def decoded_lines(stream: BinaryIO, name: str) -> Iterator[str]:
    """Text lines; NUL bytes in the first 64 KiB mean a binary file (UsageError).

    A line longer than MAX_LINE is cut there and the rest of it skipped, so a file with no
    newlines never has to fit in memory.
    """
    seen = 0
    while True:
        raw = stream.readline(MAX_LINE)
        if not raw:
            return
        if seen < BINARY_PROBE:
            if b"\x00" in raw[: BINARY_PROBE - seen]:
                raise UsageError(f"{name} looks binary (NUL bytes), not a text log")
            seen += len(raw)
        if len(raw) == MAX_LINE and not raw.endswith(b"\n"):
            while True:  # drop the rest of an over-long line
                rest = stream.readline(MAX_LINE)
                if not rest or rest.endswith(b"\n"):
                    break
        yield raw.decode("utf-8", errors="replace").rstrip("\r\n")


def scan(lines: Iterable[str], playbooks: Iterable[Playbook], command_text: str = "") -> LogScan:
    books = [pb for pb in playbooks if pb.kind == "failure" and pb.signatures]
    recent: deque[tuple[int, str]] = deque(maxlen=BEFORE)
    pending: list[tuple[Playbook, int, str, int]] = []  # (playbook, line_no, line, deadline)
    hits: dict[str, LogHit] = {}
    version: str | None = None
    serve_args: str | None = None
    n = 0

    def record(pb: Playbook, line_no: int, line: str, ctx: tuple[int, str] | None) -> None:
        hit = hits.get(pb.id)
        if hit is None:
            hits[pb.id] = LogHit(pb, line_no, line, ctx)
            return
        hit.count += 1
        if len(hit.more) < MAX_EVIDENCE - 1 and line.strip() != hit.line.strip():
            hit.more.append((line_no, line))

    def context_in_command(pb: Playbook) -> bool:
        return bool(command_text) and any(c.search(command_text) for c in pb.context)

    # Plain substring tests (fast, in C) pick candidate lines; only those meet the regexes.
    # A signature without a usable literal makes every line a candidate: slower, never wrong.
    needles = literals_for(s for pb in books for s in pb.signatures)
    it = iter(lines)
    n = 0
    while True:
        block = list(islice(it, BLOCK))
        if not block:
            break
        if needles is not None and not pending:
            # A block with no needle (and no version line still sought) is skipped whole:
            # one join and a few C substring searches instead of a Python loop per line.
            text = "\n".join(block)
            sought = (version is None and ("ersion" in text or "Starting vLLM" in text)) or (
                serve_args is None and ARGS_MARK in text
            )
            if not sought and not any(needle in text for needle in needles):
                recent.extend(enumerate(block[-BEFORE:], start=n + 1 + max(0, len(block) - BEFORE)))
                n += len(block)
                continue
        for line in block:
            n += 1
            if version is None and ("ersion" in line or "Starting vLLM" in line):
                m = VERSION.search(line)
                if m:
                    version = next(g for g in m.groups() if g)
            if serve_args is None and ARGS_MARK in line:
                serve_args = line.split(ARGS_MARK, 1)[1]
            # Pending hits waiting for their context in the lines after them.
            if pending:
                still = []
                for pb, at, hit_line, deadline in pending:
                    if any(c.search(line) for c in pb.context):
                        record(pb, at, hit_line, (n, line))
                    elif n < deadline:
                        still.append((pb, at, hit_line, deadline))
                pending = still
            if needles is not None and not any(needle in line for needle in needles):
                recent.append((n, line))
                continue
            msg = strip_prefix(line)
            for pb in books:
                if not any(s.search(msg) for s in pb.signatures):
                    continue
                if not pb.context:
                    record(pb, n, line, None)
                    continue
                ctx = next(
                    ((i, t) for i, t in reversed(recent) if any(c.search(t) for c in pb.context)), None
                )
                if ctx is None and any(c.search(line) for c in pb.context):
                    ctx = (n, line)
                if ctx is not None:
                    record(pb, n, line, ctx)
                elif context_in_command(pb):
                    record(pb, n, line, None)
                else:
                    pending.append((pb, n, line, n + AFTER))
            recent.append((n, line))
    return LogScan(hits, version, n, serve_args)


def scan_file(path: str, playbooks: Iterable[Playbook], command_text: str = "") -> LogScan:
    stream, name = open_log(path)
    try:
        return scan(decoded_lines(stream, name), playbooks, command_text)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
