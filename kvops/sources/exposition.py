"""Prometheus text-format parser that keeps only the samples asked for.

A busy vLLM serves thousands of lines (histogram buckets, per-LoRA series) and kvops needs
a few dozen. prometheus_client's parser builds every family and parses every label set;
this one reads the sample name first and skips the line unless it is wanted, so labels and
values are parsed only for the samples kvops uses (benchmarks/parse_bench.py measures it).
Values equal prometheus_client's for the samples it keeps (tests/sources/test_exposition.py).

A malformed line is recorded with its 1-based line number and skipped: the rest survives.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

Labels = dict[str, str]

# One label pair: name="value" where value may hold escaped \\ \" \n.
_LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|\Z)')
_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
_UNESCAPE_RE = re.compile(r"\\[\\\"n]")


@dataclass
class ParseResult:
    """Samples by exposed sample name, in the order they appeared."""

    samples: dict[str, list[tuple[Labels, float]]] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)  # name on its # TYPE line -> type
    errors: list[tuple[int, str]] = field(default_factory=list)  # (line number, message)
    # True once one sample named with a counted prefix (vllm:, lmcache:) parsed: what makes
    # a target "up" (DESIGN.md). Unwanted lines are checked only until the first one passes.
    has_prefixed_sample: bool = False

    def get(self, name: str) -> list[tuple[Labels, float]]:
        return self.samples.get(name, [])


class ParseError(ValueError):
    pass


def _unescape(value: str) -> str:
    return _UNESCAPE_RE.sub(lambda m: _UNESCAPE[m.group(0)], value) if "\\" in value else value


def parse_labels(text: str) -> Labels:
    """Parse the inside of {...}. Raises ParseError on anything that is not label pairs."""
    labels: Labels = {}
    pos, end = 0, len(text)
    while pos < end:
        m = _LABEL_RE.match(text, pos)
        if m is None:
            if text[pos:].strip() == "":
                break
            raise ParseError(f"bad label set near {text[pos : pos + 40]!r}")
        labels[m.group(1)] = _unescape(m.group(2))
        pos = m.end()
    return labels


def _parse_value(token: str) -> float:
    try:
        return float(token)
    except ValueError:
        raise ParseError(f"bad sample value {token[:40]!r}") from None


def parse_sample_line(line: str) -> tuple[str, Labels, float]:
    """One sample line: name[{labels}] value [timestamp]."""
    brace = line.find("{")
    space = line.find(" ")
    if brace != -1 and (space == -1 or brace < space):
        name = line[:brace]
        close = line.rfind("}")
        if close < brace:
            raise ParseError("unterminated label set")
        labels = parse_labels(line[brace + 1 : close])
        rest = line[close + 1 :].split()
    else:
        if space == -1:
            raise ParseError("sample without a value")
        name = line[:space]
        labels = {}
        rest = line[space + 1 :].split()
    if not _NAME_RE.match(name):
        raise ParseError(f"bad metric name {name[:60]!r}")
    if not rest or len(rest) > 2:
        raise ParseError("expected a value and an optional timestamp")
    return name, labels, _parse_value(rest[0])


def parse(
    text: str,
    wanted: Collection[str] | Callable[[str], bool] | None = None,
    count_prefixes: tuple[str, ...] = ("vllm:", "lmcache:"),
) -> ParseResult:
    """Parse an exposition, keeping samples whose exposed name is in `wanted` (all if None).

    `wanted` may be a set of sample names (fast path) or a predicate on the name.
    """
    result = ParseResult()
    samples = result.samples
    if wanted is None:
        keep: Callable[[str], bool] = lambda _name: True  # noqa: E731
    elif callable(wanted):
        keep = wanted
    else:
        wanted_set = frozenset(wanted)
        keep = wanted_set.__contains__
    types = result.types
    errors = result.errors
    # A family's samples come in a run (histogram buckets): once one line is rejected, the
    # next lines that start with the same name and separator are rejected by startswith alone.
    rejected = "\0"
    # Lines end at "\n" only, as in the text format and prometheus_client's parser:
    # str.splitlines() would also cut at \x85, \u2028, \x0c... inside a label value.
    for line_no, line in enumerate(text.split("\n"), start=1):
        if not line or line.startswith(rejected):
            continue
        first = line[0]
        if first == " " or first == "\t" or first == "\r":
            line = line.strip()
            if not line:
                continue
            first = line[0]
        if first == "#":
            if line.startswith("# TYPE "):
                parts = line.split(None, 3)
                if len(parts) == 4:
                    types[parts[2]] = parts[3].strip()
                else:
                    errors.append((line_no, "TYPE line without a name and type"))
            continue
        # The name ends at '{' (a '{' after the name can only open its labels) or at the
        # first blank; most lines are rejected by the name alone, unparsed.
        cut = line.find("{")
        if cut == -1:
            cut = line.find(" ")
            if cut == -1:
                cut = line.find("\t")
                if cut == -1:
                    errors.append((line_no, f"sample without a value: {line[:60]!r}"))
                    continue
        name = line[:cut]
        if not keep(name):
            rejected = line[: cut + 1]
            if not result.has_prefixed_sample and count_prefixes and name.startswith(count_prefixes):
                try:
                    parse_sample_line(line)
                    result.has_prefixed_sample = True
                except ParseError as exc:
                    errors.append((line_no, str(exc)))
            continue
        try:
            name, labels, value = parse_sample_line(line)
        except ParseError as exc:
            errors.append((line_no, str(exc)))
            continue
        if count_prefixes and name.startswith(count_prefixes):
            result.has_prefixed_sample = True
        bucket = samples.get(name)
        if bucket is None:
            samples[name] = [(labels, value)]
        else:
            bucket.append((labels, value))
    return result
