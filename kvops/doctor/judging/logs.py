"""Scan a vLLM log, streamed line by line, for the playbooks' signatures.

vLLM prefixes every record `(EngineCore_DP0 pid=123) ERROR 10-14 17:00:48 [core.py:708] msg`
(vllm/logger.py _FORMAT; child processes' stdout gets the `(name pid=N)` part too), and a
traceback arrives one prefixed line per frame. A signature counts only when the playbook's
context regex (if any) matches within the same traceback neighbourhood — a window of lines
before and after — or in the serve command: the same KeyError means different things when
raised from register_kv_caches or from get_attn_backends_for_group.

Logs as people paste them: a terminal or an issue tracker hard-wraps long lines ("KV cach" /
"e is needed", or a markdown quote continuing with "  > "), so a signature is also tried on up
to WRAP consecutive lines joined (without and with a space), continuation markers stripped.
Evidence facts (LMCache, a ROCm platform, an FP8 KV cache, a DSA model, KV offloading) are
read case-insensitively from the start-up block and from every block a signature is in: a
generic message only becomes a specific claim when its playbook's `requires` facts are there.

Memory stays flat for any log size: a deque of recent lines and a short list of pending hits.
"""

from __future__ import annotations

import functools
import html
import re
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import BinaryIO

from kvops.doctor.judging.catalog import Playbook
from kvops.doctor.reading import engines
from kvops.doctor.reading.facts import FACTS
from kvops.doctor.reading.fatal import HINTS as FATAL_HINTS
from kvops.doctor.reading.fatal import LINE_HINTS as FATAL_LINE_HINTS
from kvops.doctor.reading.fatal import Fatal
from kvops.doctor.reading.paste_release import PastedRelease, config_lines, pasted_release
from kvops.errors import UsageError
from kvops.termsafe import visible

PREFIX = re.compile(
    r"^(?:[\s|+>]*)"  # quote / CI-log gutters: "  | ", "> ", "+  > "
    r"(?:\[?\d{4}-\d\d-\d\d[T ][\d:.,]+Z?\]?\s*(?:\|\s*)?)?"  # docker -t / CI / compose timestamps
    r"(?:\[rank\d+\]:\s*)?"  # torch.distributed's "[rank0]: "
    r"(?:\((?P<proc>[\w.-]+(?: [\w.-]+)*?) pid=(?P<pid>\d+)(?:, ip=[\d.]+)?\)\s*)*"  # nested (name pid=N)
    r"(?:(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+"
    r"(?:\[[^\]]*\]|[\w./-]+:\d+\])\s?)?"  # [file.py:line] (V1) or file.py:line] (older releases)
)
# Every start-up banner form vLLM has used (vllm/entrypoints/openai/api_server.py, the ASCII-art
# banner of vllm/entrypoints/utils.py, vllm/v1/engine/core.py and the V0 llm_engine.py), plus
# collect_env's "vLLM Version:" and a pinned "vllm==X" that issue reports carry.
VERSION = re.compile(
    r"vLLM API server version v?(?P<api>\d+\.\d+[\w.+-]*)"
    r"|\u2588\s+version\s+v?(?P<art>\d+\.\d+[\w.+-]*)"
    r"|Initializing an? (?:V1 )?LLM engine \(v(?P<engine>\d+\.\d+[\w.+-]*)\)"
    r"|vLLM Version\s*:\s*v?(?P<env>\d+\.\d+[\w.+-]*)"
    r"|vllm version:? v?(?P<plain>\d+\.\d+[\w.+-]*)"
    r"|Starting vLLM\S* v?(?P<start>\d+\.\d+[\w.+-]*)"
    r"|\bvllm==(?P<pin>\d+\.\d+[\w.+-]*)"
    # `pip list` / `pip show`'s line as reports paste it ("vllm   0.13.0", aligned by blanks)
    r"|^[ \t]*vllm[ \t]{2,}v?(?P<piplist>\d+\.\d+\.\d+(?:\.\d+)?(?:rc\d+|\.post\d+)?)[ \t]*$",
    re.IGNORECASE,
)
_VERSION_HINTS = ("ersion", "LLM engine (v", "vllm==", "vllm  ")  # cheap tests before VERSION
MAX_VERSION = 40  # characters kept of a version read from a log
ARGS_MARK = "non-default args: "  # vllm/entrypoints/utils.py log_non_default_args
# A launch command a report carries (a code block of the issue, a terminal capture): its line and
# the `\\` continuations after it are kept, the first few, for the caller to read as --cmd.
LAUNCH_HINTS = ("vllm serve", "vllm.entrypoints.openai.api_server", "docker run", "podman run")
MAX_LAUNCHES = 5
# `\` then a comment: an annotation a report added to a continued line ("# <--- Trigger").
ANNOTATED = re.compile(r"\\[ \t]+#[^\n]*$")
MAX_LAUNCH_LINES = 60
BEFORE = 80  # a traceback's frames come before its last line
AFTER = 40  # ...and vLLM often logs "EngineCore failed to start" and the cause after it
WRAP = 3  # a signature hard-wrapped over at most this many lines is still found
# A wrapped match crosses a line break, so only the text near the breaks is joined: this many
# characters each side (far longer than any signature's match). Joining whole 64 KiB lines made
# every candidate line cost a search of ~200 KB per signature.
WRAP_SPAN = 1024
CONTINUATION = re.compile(r"^[\s>|+]*")  # what a wrapped line starts with besides its text
MAX_EVIDENCE = 4
BLOCK = 2048  # lines per pre-filter block
# A text this short is a report (an issue's body, a manifest and its logs) and is read whole for
# the vLLM release its image or install names; a longer one is a server's log, which names
# its release in its own version line.
REPORT_CHARS = 1 << 20
MAX_LINE = 64 * 1024
BINARY_PROBE = 64 * 1024  # a pathological line is cut, not held whole
NEEDLE_CHUNK = 16  # a long literal is sought by its head and tail, so a wrap inside it is seen
# Colour and cursor codes a terminal capture keeps (vLLM colours its prefix on a tty): removed
# before matching, so `\x1b[1;36m(EngineCore pid=1)\x1b[0m ERROR ...` reads like the plain line.
# Text copied out of a web page: typographic quotes for ' and ", HTML entities (&#39; &quot; &gt;).
QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
ENTITY = re.compile(r"&(?:#\d{1,6}|#x[0-9a-fA-F]{1,6}|quot|amp|lt|gt|apos);")
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")


def clip(line: str, limit: int = 320) -> str:
    """An evidence line short enough to read: its head and its tail (where messages end)."""
    text = line.strip()
    return text if len(text) <= limit else f"{text[:80]} [...] {text[-(limit - 90) :]}"


@dataclass
class LogHit:
    playbook: Playbook
    line_no: int
    line: str  # the matched line, prefix kept
    context_line: tuple[int, str] | None = None
    count: int = 1
    more: list[tuple[int, str]] = field(default_factory=list)

    def evidence(self) -> list[str]:
        out = [f"log line {self.line_no}: {clip(self.line)}"]
        out += [f"log line {n}: {clip(text)}" for n, text in self.more]
        if self.context_line:
            n, text = self.context_line
            out.append(f"log line {n} (context): {clip(text)}")
        if self.count > 1 + len(self.more):
            out.append(f"... {self.count} matching lines in all")
        return out


@dataclass
class LogScan:
    hits: dict[str, LogHit]
    version: str | None
    lines: int
    serve_args: str | None = None  # the dict of vLLM's first `non-default args: {...}` line
    facts: dict[str, tuple[int, str]] = field(default_factory=dict)  # fact -> (line no, line)
    fatal: Fatal = field(default_factory=Fatal)  # the first fatal error, whether a playbook knows it
    engine: str | None = None  # sglang | dynamo when the log shows it comes from one (engines.py)
    engine_version: str | None = None  # that engine's release, when a line names it
    shm_bytes: int | None = None  # /dev/shm's size from a `df` line the log carries
    # (line number, text) of each of the first launch commands the log carries, `\\` lines joined
    launches: tuple[tuple[int, str], ...] = ()
    annotated_launches: frozenset[int] = frozenset()  # those whose `\\` lines carried a comment
    report: str | None = None  # the whole text, when it is short enough to be a report

    @functools.cached_property
    def named_release(self) -> PastedRelease | None:
        """The release a short text's vLLM image or pinned install names in its configuration
        lines (a report's manifest or compose file beside its log lines); None for a long log
        or one that names none. Read when asked: --vllm-version or a banner answer first."""
        if self.report is None:
            return None
        named = pasted_release(config_lines(self.report), "the report's")
        return named if named.release is not None else None


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


def needles_for(literals: list[str]) -> list[str]:
    """What the pre-filter looks for: a long literal by its head and its tail, so that a line
    hard-wrapped inside the literal still shows one of them."""
    out: set[str] = set()
    for lit in literals:
        if len(lit) >= 2 * NEEDLE_CHUNK:
            out.update((lit[:NEEDLE_CHUNK], lit[-NEEDLE_CHUNK:]))
        else:
            out.add(lit)
    return sorted(out)


def read_version(line: str) -> str | None:
    """The vLLM release a start-up line names; None for none, or for an unreleased dev build
    (`0.1.devN+g<sha>` is vLLM's version of a source checkout: it says nothing about the release)."""
    m = VERSION.search(line)
    if not m:
        return None
    value = next(g for g in m.groups() if g)[:MAX_VERSION].rstrip(".,;:'\")")
    return None if value.startswith("0.1.dev") else value


def _unwrapped(parts: list[str]) -> list[tuple[str, list[int]]]:
    """Joins of consecutive lines, without and with a space, and the offsets where lines meet:
    the first line's tail and the last line's head (WRAP_SPAN); none when a middle line is longer
    than that (a match across it would be too: the shorter windows hold any real one)."""
    first = strip_prefix(parts[0]).rstrip()[-WRAP_SPAN:]
    rest = [CONTINUATION.sub("", strip_prefix(p)).strip() for p in parts[1:]]
    if any(len(r) > WRAP_SPAN for r in rest[:-1]):
        return []
    rest[-1] = rest[-1][:WRAP_SPAN]
    out = []
    for sep in ("", " "):
        text, cuts = first, []
        for r in rest:
            cuts.append(len(text))
            text += sep + r
        out.append((text, cuts))
    return out


def strip_prefix(line: str) -> str:
    m = PREFIX.match(line)
    return line[m.end() :] if m else line


def open_log(path: str) -> tuple[BinaryIO, str]:
    """The log to read: a file, or a pipe (`--log <(kubectl logs POD)` names /dev/fd/63, a
    FIFO) or a device; a stream with NUL bytes is refused as binary when read."""
    if path == "-":
        return sys.stdin.buffer, "<stdin>"
    p = Path(path)
    try:
        if p.is_dir():
            raise UsageError(f"{visible(path)} is a directory, not a log file")
        return p.open("rb"), str(p)
    except FileNotFoundError:
        raise UsageError(f"log file not found: {visible(path)}") from None
    except OSError as exc:
        raise UsageError(f"cannot read log {visible(path)}: {exc.strerror}") from None


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
                raise UsageError(f"{visible(name)} looks binary (NUL bytes), not a text log")
            seen += len(raw)
        if len(raw) == MAX_LINE and not raw.endswith(b"\n"):
            while True:  # drop the rest of an over-long line
                rest = stream.readline(MAX_LINE)
                if not rest or rest.endswith(b"\n"):
                    break
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        yield normalised(line)


def normalised(line: str) -> str:
    """A line as vLLM printed it: terminal codes dropped, web-page quoting undone. Each step runs
    only when a cheap test says it can change something (most lines are plain ASCII)."""
    if "\x1b" in line:
        line = ANSI.sub("", line)
    if not line.isascii():
        line = line.translate(QUOTES)
    if "&" in line and ENTITY.search(line):
        line = html.unescape(line)
    return line


class _Scanner:
    """One pass over a log: what has been found so far, and the hits still waiting for context.

    Lines come in blocks of BLOCK; plain substring tests (fast, in C) pick candidate lines and
    only those meet the regexes. A signature without a usable literal makes every line a
    candidate: slower, never wrong.
    """

    def __init__(self, playbooks: Iterable[Playbook], command_text: str) -> None:
        self.books = [pb for pb in playbooks if pb.kind == "failure" and pb.signatures]
        self.command_text = command_text
        self.recent: deque[tuple[int, str]] = deque(maxlen=BEFORE)
        self.pending: list[tuple[Playbook, int, str, int]] = []  # (playbook, line_no, line, deadline)
        self.hits: dict[str, LogHit] = {}
        self.facts: dict[str, tuple[int, str]] = {}
        self.version: str | None = None
        self.serve_args: str | None = None
        self.fatal = Fatal()
        self.engine: str | None = None
        self.engine_versions: dict[str, str] = {}
        self.shm_bytes: int | None = None
        self.launches: list[tuple[int, list[str]]] = []
        self.annotated: set[int] = set()  # launches whose lines carried an annotation after `\\`
        self.launch_open = False  # the last launch line ended with `\\`: the next line is its
        self.n = 0
        self.wrap_left = 0  # lines after a candidate that may continue a wrapped signature
        self.last_hit = 0  # a wrapped match never reuses a line that already matched on its own
        self.literals = literals_for(s for pb in self.books for s in pb.signatures)
        # Whole literals decide whether a block of a long log is skipped (long needles search
        # fastest); heads and tails pick the candidate lines, so a signature wrapped inside its
        # literal is seen.
        self.needles = needles_for(self.literals) if self.literals is not None else None

    def _launch_line(self, line: str) -> str:
        """A launch line as kept: a report's annotation after its `\\` (`--dcp 8 \\   # <--- Trigger`)
        is dropped so the command goes on, as the report means (a shell would end it there);
        the launch is remembered so the reader is told."""
        m = ANNOTATED.search(line)
        if m is None:
            return line[:MAX_LINE]
        self.annotated.add(self.launches[-1][0] if self.launch_open else self.n)
        return line[: m.start() + 1][:MAX_LINE]

    def result(self) -> LogScan:
        self.fatal.settle()
        engine_version = self.engine_versions.get(self.engine) if self.engine else None
        return LogScan(
            self.hits,
            self.version,
            self.n,
            self.serve_args,
            self.facts,
            self.fatal,
            self.engine,
            engine_version,
            self.shm_bytes,
            tuple((n, "\n".join(lines)) for n, lines in self.launches),
            annotated_launches=frozenset(self.annotated),
        )

    def feed(self, block: list[str], first_block: bool) -> None:
        if self.needles is not None and not self.pending and not self.wrap_left and not first_block:
            # A block with nothing sought in it is skipped whole: one join and a few C substring
            # searches instead of a Python loop per line.
            text = "\n".join(block)
            if not self._sought_in(text) and not any(lit in text for lit in self.literals or ()):
                n = self.n
                self.recent.extend(enumerate(block[-BEFORE:], start=n + 1 + max(0, len(block) - BEFORE)))
                self.n += len(block)
                return
        block_start, seen_hits = self.n + 1, self._hit_count()
        for line in block:
            self._line(line)
        if first_block or self._hit_count() != seen_hits or self.pending:
            self._read_facts(block, block_start)  # the start-up block and every block with a match

    def _hit_count(self) -> int:
        return sum(h.count for h in self.hits.values())

    def _sought_in(self, text: str) -> bool:
        """Whether a block may hold a start-up fact not yet read (version, args, engine...)."""
        return (
            (self.version is None and any(h in text for h in _VERSION_HINTS))
            or (self.serve_args is None and ARGS_MARK in text)
            or (not self.fatal.found and any(h in text for h in FATAL_HINTS))
            or (self.engine not in self.engine_versions and any(h in text for h in engines.HINTS))
            or (self.shm_bytes is None and "/dev/shm" in text)
            or self.launch_open
            or (len(self.launches) < MAX_LAUNCHES and any(h in text for h in LAUNCH_HINTS))
        )

    def _line(self, line: str) -> None:
        self.n += 1
        n = self.n
        self._read_start_up(n, line)
        if self.pending:
            self._settle_pending(n, line)
        candidate = self.needles is None or any(needle in line for needle in self.needles)
        if not candidate and not self.wrap_left:
            self.recent.append((n, line))
            return
        self.wrap_left = WRAP - 1 if candidate else self.wrap_left - 1
        msg = strip_prefix(line)
        signed = False  # a signature of some playbook on this line
        for pb in self.books:
            if any(s.search(msg) for s in pb.signatures):
                signed = True
                self._matched(pb, n, line)
        if signed:
            self.last_hit = n
        elif self.recent:
            window = [(i, t) for i, t in list(self.recent)[-(WRAP - 1) :] if i > self.last_hit]
            window.append((n, line))
            for size in range(2, len(window) + 1):
                if self._wrapped_match(window[-size:]):
                    self.last_hit = n  # these lines are spent: no second, longer window
                    break
        self.recent.append((n, line))

    def _read_start_up(self, n: int, line: str) -> None:
        """The first of each: release, serve args, engine and its release, /dev/shm size, fatal error."""
        if self.version is None and any(h in line for h in _VERSION_HINTS):
            self.version = read_version(line)
        if self.serve_args is None and ARGS_MARK in line:
            self.serve_args = line.split(ARGS_MARK, 1)[1]
        if self.engine not in self.engine_versions and any(h in line for h in engines.HINTS):
            self.engine = self.engine or engines.engine_in(line)
            for name in (engines.SGLANG, engines.DYNAMO):
                if name not in self.engine_versions and (found := engines.version_in(name, line)):
                    self.engine_versions[name] = found
        if self.shm_bytes is None and "/dev/shm" in line:
            self.shm_bytes = shm_size(line)
        if self.launch_open:
            kept = self.launches[-1][1]
            kept.append(self._launch_line(line))
            self.launch_open = kept[-1].rstrip().endswith("\\") and len(kept) < MAX_LAUNCH_LINES
        elif len(self.launches) < MAX_LAUNCHES and any(h in line for h in LAUNCH_HINTS):
            self.launches.append((n, [self._launch_line(line)]))
            self.launch_open = self.launches[-1][1][0].rstrip().endswith("\\")
        if not self.fatal.found and any(h in line for h in FATAL_LINE_HINTS):
            m = PREFIX.match(line)
            self.fatal.feed(n, line[m.end() :] if m else line, m.group("level") if m else None, line)

    def _settle_pending(self, n: int, line: str) -> None:
        """Pending hits waiting for their context in the lines after them."""
        still = []
        for pb, at, hit_line, deadline in self.pending:
            if any(c.search(line) for c in pb.context):
                self._record(pb, at, hit_line, (n, line))
            elif n < deadline:
                still.append((pb, at, hit_line, deadline))
        self.pending = still

    def _record(self, pb: Playbook, line_no: int, line: str, ctx: tuple[int, str] | None) -> None:
        hit = self.hits.get(pb.id)
        if hit is None:
            self.hits[pb.id] = LogHit(pb, line_no, line, ctx)
            return
        hit.count += 1
        if len(hit.more) < MAX_EVIDENCE - 1 and line.strip() != hit.line.strip():
            hit.more.append((line_no, line))

    def _read_facts(self, block: list[str], first_no: int) -> None:
        # a fact is a word in an ordinary line: a huge line is read by its head and tail only
        text = "\n".join(t if len(t) <= 2 * WRAP_SPAN else t[:WRAP_SPAN] + t[-WRAP_SPAN:] for t in block)
        for name, rx in FACTS.items():
            if name in self.facts:
                continue
            m = rx.search(text)
            if m:
                at = text.count("\n", 0, m.start())
                self.facts[name] = (first_no + at, block[at])

    def _matched(self, pb: Playbook, line_no: int, line: str) -> None:
        if not pb.context:
            self._record(pb, line_no, line, None)
            return
        ctx = next(((i, t) for i, t in reversed(self.recent) if any(c.search(t) for c in pb.context)), None)
        if ctx is None and any(c.search(line) for c in pb.context):
            ctx = (line_no, line)
        if ctx is not None:
            self._record(pb, line_no, line, ctx)
        elif self.command_text and any(c.search(self.command_text) for c in pb.context):
            self._record(pb, line_no, line, None)
        else:
            self.pending.append((pb, line_no, line, line_no + AFTER))

    def _wrapped_match(self, window: list[tuple[int, str]]) -> bool:
        """A signature that only matches across the lines of the window (a hard wrap)."""
        joins = _unwrapped([t for _, t in window])
        if not joins:
            return False
        shown = joins[1][0]  # the lines as one, continuation markers dropped
        for text, cuts in joins:
            for pb in self.books:
                for sig in pb.signatures:
                    m = sig.search(text)
                    if m and any(m.start() < c < m.end() for c in cuts):
                        self._matched(pb, window[0][0], shown)
                        return True
        return False


def scan(lines: Iterable[str], playbooks: Iterable[Playbook], command_text: str = "") -> LogScan:
    scanner = _Scanner(playbooks, command_text)
    it = iter(lines)
    first_block = True
    short: list[str] | None = []  # the text while it is short enough to be a report
    chars = 0
    while block := list(islice(it, BLOCK)):
        if short is not None:
            chars += sum(map(len, block))
            if chars <= REPORT_CHARS:
                short.extend(block)
            else:
                short = None
        scanner.feed(block, first_block)
        first_block = False
    result = scanner.result()
    if short:
        result.report = "\n".join(short)
    return result


# `df -h /dev/shm` as people paste it: "shm  64M  0  64M  0% /dev/shm" (or tmpfs / none / overlay).
_DF_SHM = re.compile(
    r"^\s*\S+\s+(?P<size>\d+(?:\.\d+)?)(?P<unit>[KMGT])i?B?\s+\S+\s+\S+\s+\d+%\s+/dev/shm\s*$"
)
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def shm_size(line: str) -> int | None:
    """/dev/shm's size from a `df` output line, else None."""
    m = _DF_SHM.match(strip_prefix(line))
    return int(float(m.group("size")) * _UNITS[m.group("unit")]) if m else None


def scan_file(path: str, playbooks: Iterable[Playbook], command_text: str = "") -> LogScan:
    stream, name = open_log(path)
    try:
        return scan(decoded_lines(stream, name), playbooks, command_text)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
