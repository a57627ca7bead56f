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
BEFORE = 80  # a traceback's frames come before its last line
AFTER = 40  # ...and vLLM often logs "EngineCore failed to start" and the cause after it
MAX_EVIDENCE = 4
MAX_LINE = 64 * 1024  # a pathological line is cut, not held whole


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
    """Text lines; a log with NUL bytes in its first 64 KiB is binary and rejected (UsageError)."""
    first = True
    for raw in stream:
        if first:
            first = False
            if b"\x00" in raw[:65536]:
                raise UsageError(f"{name} looks binary (NUL bytes), not a text log")
        if len(raw) > MAX_LINE:
            raw = raw[:MAX_LINE]
        yield raw.decode("utf-8", errors="replace").rstrip("\r\n")


def scan(lines: Iterable[str], playbooks: Iterable[Playbook], command_text: str = "") -> LogScan:
    books = [pb for pb in playbooks if pb.kind == "failure" and pb.signatures]
    recent: deque[tuple[int, str]] = deque(maxlen=BEFORE)
    pending: list[tuple[Playbook, int, str, int]] = []  # (playbook, line_no, line, deadline)
    hits: dict[str, LogHit] = {}
    version: str | None = None
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

    # One combined pass finds candidate lines; only those are tried playbook by playbook.
    anything = re.compile("|".join(f"(?:{s.pattern})" for pb in books for s in pb.signatures) or "(?!)")
    for n, line in enumerate(lines, start=1):
        if version is None:
            m = VERSION.search(line)
            if m:
                version = next(g for g in m.groups() if g)
        # Pending hits waiting for their context in the lines after them.
        if pending:
            still = []
            for pb, at, text, deadline in pending:
                if any(c.search(line) for c in pb.context):
                    record(pb, at, text, (n, line))
                elif n < deadline:
                    still.append((pb, at, text, deadline))
            pending = still
        if not anything.search(line):
            recent.append((n, line))
            continue
        msg = strip_prefix(line)
        for pb in books:
            if not any(s.search(msg) for s in pb.signatures):
                continue
            if not pb.context:
                record(pb, n, line, None)
                continue
            ctx = next(((i, t) for i, t in reversed(recent) if any(c.search(t) for c in pb.context)), None)
            if ctx is None and any(c.search(line) for c in pb.context):
                ctx = (n, line)
            if ctx is not None:
                record(pb, n, line, ctx)
            elif context_in_command(pb):
                record(pb, n, line, None)
            else:
                pending.append((pb, n, line, n + AFTER))
        recent.append((n, line))
    return LogScan(hits, version, n)


def scan_file(path: str, playbooks: Iterable[Playbook], command_text: str = "") -> LogScan:
    stream, name = open_log(path)
    try:
        return scan(decoded_lines(stream, name), playbooks, command_text)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
