"""Where a fatal message is raised: the error-site table (error_sites.json.gz, recorded from the
releases' own source by kvops/doctor/gen_error_sites.py) looked up by the message's text.

Loaded once, and only when a log has a fatal line to locate. A message is matched against each
template (placeholders are wildcards) whole, else as a prefix (a line cut short, or the first
line of a message that goes on over several); a message that wraps another (`Worker failed with
error 'X'`, `RuntimeError: ValueError: X`) is looked up at each level, the innermost first.

A location says where a release's code raises (or logs) that text: not that this run went
through that line, nor which caller reached it.
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

TABLE = Path(__file__).with_name("error_sites.json.gz")
WILD = "\x00"  # a template's placeholder (the table's header says so too)
FORMAT = 3
MAX_LOCATIONS = 3
MAX_MESSAGE = 2000
_IN_TESTS = re.compile(r"/tests?/|/test_[^/]*\.py$")
MIN_LITERAL = 12  # literal characters a match must cover: "Error: *" locates nothing
PREFIX_KEY = 4  # characters of a message's head that pick the templates it may be


@dataclass(frozen=True)
class Site:
    template: str  # WILD for each placeholder
    type: str  # the exception class, AssertionError, or logger.error / .exception / ...
    package: str
    path: str
    cls: str
    function: str
    releases: tuple[str, ...]  # ranges of the package's release list ("0.10.0..0.14.1")

    def to_dict(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "path": self.path,
            "class": self.cls or None,
            "function": self.function or None,
            "releases": list(self.releases),
        }

    def shown(self) -> str:
        where = ".".join(p for p in (self.cls, self.function) if p)
        return f"{self.path}{' (' + where + ')' if where else ''}, {self.package} {', '.join(self.releases)}"


@dataclass(frozen=True)
class Located:
    site: Site
    message: str  # the level of the log's message that matched
    whole: bool  # the whole message matched (False: its text is a prefix of the template's)
    literal: int  # literal characters of the template the message covers


class Table:
    """The table's row lines, sorted as text (`["<template>","<type>",<place>,"<ranges>"]`): the rows
    whose template starts with a given text are one run of lines, found by bisection. Loading is a
    gunzip and a split; only the lines a message may match are parsed."""

    def __init__(self, lines: list[str], places_line: str, releases: dict[str, list[str]], wild: str) -> None:
        self.lines = lines
        self._places_line = places_line
        self._places: list[list[str]] | None = None
        self.releases = releases
        self.wild = wild
        self._open: dict[str, list[int]] | None = None  # rows whose template starts with a wildcard

    @property
    def places(self) -> list[list[str]]:
        if self._places is None:
            self._places = json.loads(self._places_line)
        return self._places

    def row(self, i: int) -> list[Any]:
        parsed: list[Any] = json.loads(self.lines[i])
        return parsed

    def site(self, i: int) -> Site:
        template, kind, place, ranges = self.row(i)
        package, path, cls, function = self.places[place]
        return Site(template, kind, package, path, cls, function, tuple(ranges.split(",")))

    def starting(self, head: str) -> range:
        """The rows whose template starts with `head`."""
        key = '["' + json.dumps(head, ensure_ascii=False)[1:-1]
        lo = bisect.bisect_left(self.lines, key)
        return range(lo, bisect.bisect_left(self.lines, key + "\U0010ffff", lo))

    def _open_rows(self) -> dict[str, list[int]]:
        """Rows whose template starts with a wildcard, by their longest literal piece (built once)."""
        if self._open is None:
            self._open = {}
            for i in self.starting(self.wild):
                pieces = self.row(i)[0].split(self.wild)
                anchor = max(pieces, key=len)
                if len(anchor.strip()) >= 4:
                    self._open.setdefault(anchor, []).append(i)
        return self._open

    def candidates(self, message: str) -> set[int]:
        """Rows the message can match: a template starting with its first four characters, or with
        one to three of them and then a wildcard, or with a wildcard and a piece the message holds."""
        rows: set[int] = set(self.starting(message[:PREFIX_KEY]))
        for k in range(1, PREFIX_KEY):
            rows.update(self.starting(message[:k] + self.wild))
        rows.update(i for anchor, where in self._open_rows().items() if anchor in message for i in where)
        return rows

    def _match(self, i: int, message: str) -> Located | None:
        row = self.row(i)
        if _IN_TESTS.search(self.places[row[2]][1]):
            return None  # a release's own tests (sglang/test/...) mimic errors it never raises in service
        pieces = row[0].split(self.wild)
        literal = sum(len(p) for p in pieces)
        whole = _whole(pieces, message)
        if whole:
            return Located(self.site(i), message, True, literal) if literal >= MIN_LITERAL else None
        covered = _prefix(pieces, message)
        if covered >= MIN_LITERAL and covered >= min(literal, 20):
            return Located(self.site(i), message, False, covered)
        return None

    def lookup(
        self,
        message: str,
        kind: str | None = None,
        releases: dict[str, str | None] | None = None,
        engine: str | None = None,
    ) -> list[Located]:
        """The sites whose template the message is, best first: whole matches, the exception's
        own type, the user's release in the site's, the most literal text, the newest releases."""
        message = " ".join(message[:MAX_MESSAGE].split())
        if len(message) < PREFIX_KEY:
            return []
        found = [m for i in sorted(self.candidates(message)) if (m := self._match(i, message)) is not None]
        releases = releases or {}

        def rank(m: Located) -> tuple[Any, ...]:
            order = self.releases.get(m.site.package) or []
            having = _expand(m.site.releases, order)
            mine = releases.get(m.site.package)
            newest = order.index(having[-1]) if having else -1
            other = engine is not None and m.site.package != engine  # vLLM's log: vLLM's copy first
            return (
                not m.whole,
                other,
                m.site.type != kind,
                mine not in having,
                -m.literal,
                -newest,
                m.site.path,
            )

        found.sort(key=rank)
        return found


def _whole(pieces: list[str], message: str) -> bool:
    if len(pieces) == 1:
        return pieces[0] == message
    if not (message.startswith(pieces[0]) and message.endswith(pieces[-1])):
        return False
    if len(message) < len(pieces[0]) + len(pieces[-1]):
        return False
    pos, end = len(pieces[0]), len(message) - len(pieces[-1])
    for piece in pieces[1:-1]:
        at = message.find(piece, pos, end)
        if at < 0:
            return False
        pos = at + len(piece)
    return True


def _prefix(pieces: list[str], message: str) -> int:
    """Literal characters of the template the message covers when it is the template's head (the
    line was cut short or goes on); 0 when it is not."""
    first = pieces[0]
    if not message.startswith(first):
        return len(message) if first.startswith(message) and len(pieces) >= 1 else 0
    covered, pos = len(first), len(first)
    for piece in pieces[1:]:
        if not piece:
            continue
        at = message.find(piece, pos)
        if at < 0:
            tail = message[pos:]
            # the cut fell inside this piece: its head ends the message
            k = next((k for k in range(min(len(piece), len(tail)), 0, -1) if tail.endswith(piece[:k])), 0)
            return covered + k
        covered, pos = covered + len(piece), at + len(piece)
    return covered


@lru_cache(maxsize=1)
def load(path: Path = TABLE) -> Table | None:
    """The table, or None when it is missing or of another format (locating is then skipped)."""
    try:
        text = gzip.decompress(path.read_bytes()).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError):
        return None
    head, _, body = text.partition("\n")
    places_line, _, body = body.partition("\n")
    try:
        header = json.loads(head)
    except ValueError:
        return None
    if header.get("format") != FORMAT or header.get("wildcard") != WILD:
        return None
    return Table(body.splitlines(), places_line, header["releases"], header["wildcard"])


# ---- the levels of a log's message ------------------------------------------------------------------
EXCEPTION_HEAD = re.compile(
    r"^(?:[A-Za-z_]\w*\.){0,4}(?P<type>[A-Z]\w{0,60}(?:Error|Exception|Exit|Fault))(?::\s?|$)"
)
# `failed with error 'X'`, `error: "X"`: a message quoted inside another
QUOTED = re.compile(r"""(?:error|exception|failed|reason)\W{0,3}\s*(?P<q>['"])(?P<inner>.{8,})(?P=q)""", re.I)


def levels(text: str) -> list[tuple[str | None, str]]:
    """(type, message) of each level of an exception line, the innermost first: `RuntimeError:
    Worker failed with error 'X: y'` -> [(X, y), (RuntimeError, Worker failed with error 'X: y')]."""
    out: list[tuple[str | None, str]] = []
    rest, kind = text.strip(), None
    for _ in range(6):
        m = EXCEPTION_HEAD.match(rest)
        if m:
            kind, rest = m.group("type"), rest[m.end() :].strip()
        out.append((kind, rest))
        inner = QUOTED.search(rest)
        nested = re.search(r"\b(?:[A-Za-z_]\w*\.){0,4}[A-Z]\w{0,60}(?:Error|Exception): ", rest[1:])
        if inner is not None:
            rest, kind = inner.group("inner"), None
        elif nested is not None:
            rest, kind = rest[nested.start() + 1 :], None
        else:
            break
    return list(reversed(out))


def locate(
    exception_text: str, releases: dict[str, str | None] | None = None, engine: str | None = None
) -> list[Located]:
    """Up to MAX_LOCATIONS sites of the message, the innermost level's first; [] when the table
    does not know it (or is not shipped). `releases`: the user's release of each package, if known;
    `engine`: the package the log comes from (its sites come first)."""
    table = load()
    if table is None:
        return []
    out: list[Located] = []
    seen: set[tuple[str, str, str, str]] = set()
    for kind, message in levels(exception_text):
        for m in table.lookup(message, kind, releases, engine):
            key = (m.site.package, m.site.path, m.site.cls, m.site.function)
            if key in seen:
                continue
            seen.add(key)
            out.append(m)
            if len(out) >= MAX_LOCATIONS:
                return out
        if out:
            return out  # the innermost level that is known: outer levels only wrap it
    return out


# ---- releases ------------------------------------------------------------------------------------
def _expand(ranges: tuple[str, ...], order: list[str]) -> list[str]:
    out: list[str] = []
    for r in ranges:
        first, _, last = r.partition("..")
        if first not in order:
            continue
        a = order.index(first)
        b = order.index(last) if last in order else a
        out += order[a : b + 1]
    return out


def release_notes(found: list[Located], package: str, release: str | None) -> list[str]:
    """Hypotheses the table's releases support: the user's release lacks the message; the message
    is gone from a later release on. Never a confirmed fix: a reworded message may still fail."""
    table = load()
    if table is None or not found:
        return []
    order = table.releases.get(package) or []
    mine = [m for m in found if m.site.package == package]
    if not mine or not order:
        return []
    having = sorted({v for m in mine for v in _expand(m.site.releases, order)}, key=order.index)
    if not having:
        return []
    notes = []
    shown = mine[0].site.releases
    if release is not None and release in order and release not in having:
        notes.append(
            f"hypothesis: {package} {release}'s source has no such message (the table records it in"
            f" {', '.join(shown)}): the log may come from another release or a patched build"
        )
    last = order.index(having[-1])
    if last + 1 < len(order) and (release is None or release in having):
        gone = order[last + 1]
        notes.append(
            f"hypothesis: the message is not in {package}'s source from {gone} on (last in {having[-1]});"
            " a newer release may have changed this path, or only reworded it: not a confirmed fix"
        )
    return notes
