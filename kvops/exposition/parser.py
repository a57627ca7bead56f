"""Prometheus text-format parser that keeps only the samples asked for.

A busy vLLM serves thousands of lines (histogram buckets, per-LoRA series) and kvops needs
a few dozen. prometheus_client's parser builds every family and parses every label set;
this one parses labels and values only for the samples kvops uses
(benchmarks/parse_bench.py measures it). Values equal prometheus_client's for the samples it
keeps (tests/sources/test_exposition.py).

The grammar is the one Prometheus's own parsers read (tests/sources/conformance/ holds the
cases of prometheus/common expfmt, prometheus/prometheus promparse and client_python, each
checked on both readers): blanks or tabs between tokens; metric and label names bare or
quoted (Prometheus 3's UTF-8 names, `{"a.b",l="v"}`); values in Go's float grammar (not
Python's float(): no `1_000`, no Unicode digits, `1e309` is an error rather than +Inf);
timestamps int64 milliseconds; duplicate label names and a `__name__` label rejected. Where
the suites disagree kvops reads what Prometheus's scraper (promparse) stores: an unknown
escape in a label value is kept as written, and a comma with no label before it (`{,}`) is an
error. A quoted metric or label name allows only the three escapes of the format (backslash,
quote, newline): expfmt rejects any other there, and a name is an identity.

With a set of wanted names, one regular expression (a trie of the names, run by re's C
engine) finds the wanted lines and their families' # TYPE lines, and no other line is
looked at from Python: per-line Python work was most of what `kvops top` spent on 16
targets. On a page of the usual shape up to 256 KiB, one findall hands Python the wanted
lines already split into name and labels, value, with no match object each (_read_found:
a vLLM 0.33 page in 0.42-0.75 against 0.57-1.12 ms, benchmarks/parse_bench.py, two runs).
Where setup.py could compile it, a C finder (_linescan.c) finds the same lines, group for
group, in less than half the time (a hash of the wanted names looked up once a line instead
of a trie tried by re), and once a page's label sets are known (_HEADS, after its first
scrape) reads its samples in C as well (_read_known); the expression and the Python loop stay
their reference and fallback (tests/sources/test_linescan.py). Anything else there (a line
to report, a quoted name first, the sample cap) and longer pages are read match by match,
with line numbers and looks at the clock (_read_matches).
Without a wanted set (or on a page with indented lines), every line is read in turn.

A malformed line is recorded with its 1-based line number and skipped: the rest survives.
Lines are malformed only if they are read: with a wanted set, a broken line of a family
kvops does not read is not reported (Prometheus reports it; kvops has no use for it), except
a last line that does not parse (a page cut off, in its value or inside a label set) and a
line that starts with `{` (its name is known only once it parses). Both readers decide
"up" the same way: the first sample with a counted prefix that parses, wherever it is.

`max_samples` caps the sample lines of wanted names read from one page (kvops exporter
--max-samples-per-target): past it reading stops and `ParseResult.over_limit` is set, as
Prometheus's sample_limit fails a scrape rather than store part of it. With a set of wanted
names, a page with more lines than the cap is first counted by one regular expression, so a
label explosion costs a scan of the page, not a parse of its first max_samples lines.
"""

from __future__ import annotations

import math
import re
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

try:  # the C line finder, built by setup.py where a compiler was at hand
    from kvops.exposition._linescan import Finder
except ImportError:  # pragma: no cover - the regular expression finds the same lines
    Finder = None  # type: ignore[assignment,misc]

Labels = dict[str, str]

# Possessive quantifiers (*+, ++) never give back what they took: no input, however long
# its runs of blanks or escapes, makes these expressions backtrack.
_STR_BODY = r'[^"\\]*+(?:\\.[^"\\]*+)*+'  # inside "...": runs of plain characters between escapes
_STR = rf'"{_STR_BODY}"'
_LABEL_NAME = r"[a-zA-Z_][a-zA-Z0-9_]*+"
_METRIC_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*+"
# One item of a label set: name="value" (the name bare or quoted), or a quoted metric name.
_ITEM = rf"(?:(?:{_LABEL_NAME}|{_STR})[ \t]*+=[ \t]*+{_STR}|{_STR})"
# The inside of {...}: items separated by commas, one trailing comma allowed after an item
# ({,} is an error, as in promparse and expfmt). A missing comma between two items is read as
# promparse reads it (its test calls that unintended, but it is what Prometheus stores).
_LABEL_SET_RE = re.compile(rf"[ \t]*+(?:{_ITEM}(?:[ \t]*+,?+[ \t]*+{_ITEM})*+[ \t]*+(?:,[ \t]*+)?)?")
# The usual label set, bare names only: read with one findall, as before quoted names.
_PAIR = rf"{_LABEL_NAME}[ \t]*+=[ \t]*+{_STR}"
_BARE_SET_RE = re.compile(rf"[ \t]*+(?:{_PAIR}(?:[ \t]*+,?+[ \t]*+{_PAIR})*+[ \t]*+(?:,[ \t]*+)?)?")
_BARE_PAIR_RE = re.compile(rf'({_LABEL_NAME})[ \t]*+=[ \t]*+"({_STR_BODY})"')
_ITEM_RE = re.compile(rf'(?:({_LABEL_NAME})|"({_STR_BODY})")[ \t]*+=[ \t]*+"({_STR_BODY})"|"({_STR_BODY})"')
_NAME_RE = re.compile(rf"{_METRIC_NAME}\Z")
_HEAD_RE = re.compile(rf"(?:({_METRIC_NAME})[ \t]*+)?\Z")  # what comes before "{"
_PLAIN_RE = re.compile(rf"({_METRIC_NAME})[ \t]++([^ \t]++)(?:[ \t]++([^ \t]++))?[ \t]*+\Z")
_TAIL_RE = re.compile(r"[ \t]*+([^ \t]++)(?:[ \t]++([^ \t]++))?[ \t]*+\Z")  # after "}"
# Go's strconv.ParseFloat as Prometheus calls it: decimal only (promparse refuses p, P and _),
# ASCII digits, Inf/Infinity/NaN in any case; a sign before NaN is not Go's.
_VALUE = (
    r"[+-]?+(?:[0-9]++(?:\.[0-9]*+)?+(?:[eE][+-]?+[0-9]++)?+|\.[0-9]++(?:[eE][+-]?+[0-9]++)?+"
    r"|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?+)|[nN][aA][nN]"
)
_VALUE_RE = re.compile(_VALUE)
_TIMESTAMP_RE = re.compile(r"[+-]?+[0-9]++")  # strconv.ParseInt(s, 10, 64)
_INT64 = 1 << 63
# "# TYPE name type" / "# HELP name text": blanks or tabs around the keyword and the name.
_META_RE = re.compile(r"#[ \t]*+(TYPE|HELP)(?:[ \t]++(.*+))?\Z")
_TYPE_BODY_RE = re.compile(rf'(?:({_METRIC_NAME})|"({_STR_BODY})")[ \t]++([a-zA-Z_]++)[ \t]*+\Z')
_HELP_BODY_RE = re.compile(rf"(?:{_METRIC_NAME}|{_STR})(?:[ \t].*+)?\Z")
# The text format's types; gaugehistogram and gauge_histogram as expfmt spells them.
_TYPES = frozenset(
    ["counter", "gauge", "histogram", "gaugehistogram", "gauge_histogram", "summary", "untyped"]
)
_NAME_STOP_RE = re.compile(r"[{ \t]")
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
_UNESCAPE_RE = re.compile(r"\\[\\\"n]")  # any other escape is kept as written (promparse)
_BAD_ESCAPE_RE = re.compile(r"\\[^\\\"n]")  # searched once escaped backslashes are removed


@dataclass
class ParseResult:
    """Samples by exposed sample name, in the order they appeared.

    A sample's labels dict is read-only: a line whose label set was read before gets the dict
    kept for it (_HEADS), shared with every later page that has that line. A copy per line
    was a quarter of a parse (16 simulated vLLM pages: 0.76 against 0.60 ms, best of 7 × 50),
    most of it touching every key and value again on a round that starts cold."""

    samples: dict[str, list[tuple[Labels, float]]] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)  # name on its # TYPE line -> type
    errors: list[tuple[int, str]] = field(default_factory=list)  # (line number, message)
    # True once one sample named with a counted prefix (vllm:, lmcache:) parsed: what makes
    # a target "up" (docs/DESIGN.md). Unwanted lines are checked only until the first one passes.
    has_prefixed_sample: bool = False
    read: int = 0  # sample lines of wanted names read (kept, or reported broken)
    over_limit: bool = False  # more than max_samples of them: reading stopped there
    out_of_time: bool = False  # the deadline passed while reading: reading stopped there
    # False when every value read started with a digit or "." (so none is NaN, ±Inf or -0):
    # known_only() then has nothing to look at. Set by the whole-page reader only.
    maybe_unknown: bool = True
    renamed: bool = False  # rename() was called: the page's names are not the parsed ones

    def get(self, name: str) -> list[tuple[Labels, float]]:
        return self.samples.get(name, [])

    def rename(self, name: str, new: str) -> None:
        """Samples of `name` read as `new` from here on (a reader of another engine's spelling):
        `renamed` tells kvops.engines.registry to look again at which engines the page has."""
        self.samples[new] = self.samples.pop(name)
        self.renamed = True

    def known_only(self) -> ParseResult:
        """Drops NaN and ±Inf samples (here they mean "unknown", and a store can hold them) and
        makes -0 a 0, in place: what every decoder of a page into figures reads."""
        if not self.maybe_unknown:
            return self
        for name, samples in self.samples.items():
            if any(not math.isfinite(v) or (v == 0 and math.copysign(1.0, v) < 0) for _, v in samples):
                self.samples[name] = [(labels, v + 0.0) for labels, v in samples if math.isfinite(v)]
        return self


class ParseError(ValueError):
    pass


def _unescape(value: str) -> str:
    return _UNESCAPE_RE.sub(lambda m: _UNESCAPE[m.group(0)], value) if "\\" in value else value


def _unescape_name(quoted: str) -> str:
    """A quoted metric or label name, unescaped; ParseError on an escape the format does not have."""
    if "\\" in quoted and _BAD_ESCAPE_RE.search(quoted.replace("\\\\", "")):
        raise ParseError(f"invalid escape sequence in quoted name {quoted[:40]!r}")
    return _unescape(quoted)


# A series' label set is the same text scrape after scrape (its value is what changes), and
# vLLM's *_config_info lines carry 40 labels: parsed sets are kept, bounded, and copied out.
_LABEL_SETS: dict[str, tuple[Labels, str | None]] = {}
_LABEL_SETS_MAX = 8192


def parse_label_set(text: str) -> tuple[Labels, str | None]:
    """The inside of {...}: its labels and the quoted metric name it holds, if any.
    Raises ParseError on anything else, on a repeated label name and on a `__name__` label."""
    known = _LABEL_SETS.get(text)
    if known is not None:
        return known[0].copy(), known[1]  # a copy: a caller may change its dict
    if _BARE_SET_RE.fullmatch(text) is not None:
        pairs = _BARE_PAIR_RE.findall(text)
        labels = dict(pairs) if "\\" not in text else {name: _unescape(value) for name, value in pairs}
        if len(labels) != len(pairs):
            seen: set[str] = set()
            for twice, _ in pairs:  # the first name seen a second time
                if twice in seen:
                    break
                seen.add(twice)
            raise ParseError(f"duplicate label name {twice[:40]!r}")
        if "__name__" in labels:
            raise ParseError("label name __name__ is reserved")
        return _remember(text, labels, None)
    if _LABEL_SET_RE.fullmatch(text) is None:
        raise ParseError(_label_set_problem(text))
    labels = {}
    metric: str | None = None
    for m in _ITEM_RE.finditer(text):
        if m.lastindex == 4:  # a quoted metric name
            if metric is not None:
                raise ParseError("two metric names in one label set")
            metric = _unescape_name(m.group(4))
            if not metric:
                raise ParseError("empty metric name")
            continue
        name = m.group(1)
        if name is None:
            name = _unescape_name(m.group(2))
            if not name:
                raise ParseError("empty label name")
        if name == "__name__":
            raise ParseError("label name __name__ is reserved")
        if name in labels:
            raise ParseError(f"duplicate label name {name[:40]!r}")
        labels[name] = _unescape(m.group(3))
    return _remember(text, labels, metric)


def _remember(text: str, labels: Labels, metric: str | None) -> tuple[Labels, str | None]:
    if len(_LABEL_SETS) >= _LABEL_SETS_MAX:  # churning label values: start over
        _LABEL_SETS.clear()
    _LABEL_SETS[text] = (labels, metric)
    return labels.copy(), metric


def _label_set_problem(text: str) -> str:
    """Where a label set stops being one, for the error message."""
    pos = 0
    item = re.compile(rf"[ \t]*+{_ITEM}[ \t]*+(?:,|\Z)")
    while (m := item.match(text, pos)) is not None and m.end() > pos:
        pos = m.end()
    rest = text[pos:]
    if rest.count('"') % 2:
        return f"unterminated string in label set near {rest[:40]!r}"
    return f"bad label set near {rest[:40]!r}"


def _parse_value(token: str) -> float:
    if _VALUE_RE.fullmatch(token) is None:
        raise ParseError(f"bad sample value {token[:40]!r}")
    value = float(token)
    if math.isinf(value) and token[-1] not in "fFyY":  # Go's ParseFloat: out of range
        raise ParseError(f"sample value out of range {token[:40]!r}")
    return value


def _check_timestamp(token: str) -> None:
    if _TIMESTAMP_RE.fullmatch(token) is None:
        raise ParseError(f"bad timestamp {token[:40]!r} (integer milliseconds)")
    digits = token.lstrip("+-").lstrip("0")
    if len(digits) > 19 or not -_INT64 <= int(token) < _INT64:  # int() only on short ones
        raise ParseError(f"timestamp out of range {token[:40]!r}")


def parse_sample_line(line: str) -> tuple[str, Labels, float]:
    """One sample line without its leading blanks: name[{labels}] value [timestamp], or
    {"name",labels} value [timestamp]. Raises ParseError."""
    brace = line.find("{")
    if brace == -1:
        m = _PLAIN_RE.match(line)
        if m is None:
            if _NAME_STOP_RE.search(line) is None:
                raise ParseError(f"sample without a value: {line[:60]!r}")
            name = _NAME_STOP_RE.split(line, 1)[0]
            if _NAME_RE.match(name) is None:
                raise ParseError(f"bad metric name {name[:60]!r}")
            raise ParseError("expected a value and an optional timestamp")
        name, token, timestamp = m.groups()
        labels: Labels = {}
    else:
        close = line.rfind("}")
        if close < brace:
            raise ParseError(f"label set not closed (page cut off?) near {line[brace : brace + 40]!r}")
        head = _HEAD_RE.match(line, 0, brace)
        if head is None:
            raise ParseError(f"bad metric name {line[:brace][:60]!r}")
        inside = line[brace + 1 : close]
        known = _LABEL_SETS.get(inside)  # parse_label_set's cache, looked up here: the usual case
        labels, quoted = (known[0].copy(), known[1]) if known is not None else parse_label_set(inside)
        name = head.group(1)
        if name is None:
            if quoted is None:
                raise ParseError("metric name not set")
            name = quoted
        elif quoted is not None:
            raise ParseError("two metric names")
        tail = _TAIL_RE.match(line, close + 1)
        if tail is None:
            raise ParseError("expected a value and an optional timestamp")
        token, timestamp = tail.groups()
    if timestamp is not None:
        _check_timestamp(timestamp)
    return name, labels, _parse_value(token)


# A page's # TYPE lines are the same text every scrape (~50 a vLLM page, each three regular
# expressions): a line that read well -> (name, type). Bounded like the label sets.
_TYPE_LINES: dict[str, tuple[str, str]] = {}
_TYPE_LINES_MAX = 4096


def _read_meta(line: str, types: dict[str, str]) -> str | None:
    """A # TYPE line into types; what is wrong with a TYPE or HELP line, if anything. Other
    comments, and a bare "# TYPE" or "# HELP" (expfmt reads them as comments), pass."""
    known = _TYPE_LINES.get(line)
    if known is not None:
        types[known[0]] = known[1]
        return None
    m = _META_RE.match(line)
    if m is None or not m.group(2):
        return None
    body = m.group(2)
    if m.group(1) == "TYPE":
        t = _TYPE_BODY_RE.match(body)
        if t is None:
            return f"TYPE line without a name and a type: {body[:60]!r}"
        kind = t.group(3).lower()
        if kind not in _TYPES:
            return f"unknown metric type {t.group(3)[:20]!r}"
        try:
            name = t.group(1) if t.group(1) is not None else _unescape_name(t.group(2))
        except ParseError as exc:
            return str(exc)
        types[name] = kind
        if len(_TYPE_LINES) >= _TYPE_LINES_MAX:
            _TYPE_LINES.clear()
        _TYPE_LINES[line] = (name, kind)
    elif _HELP_BODY_RE.match(body) is None:
        return f"HELP line without a metric name: {body[:60]!r}"
    return None


def parse(
    text: str,
    wanted: Collection[str] | Callable[[str], bool] | None = None,
    count_prefixes: tuple[str, ...] = ("vllm:", "lmcache:"),
    max_samples: int | None = None,
    deadline: float | None = None,
    work_after: float = 0.0,
) -> ParseResult:
    """Parse an exposition, keeping samples whose exposed name is in `wanted` (all if None).

    `wanted` may be a set of sample names (fast path: `types` then holds the TYPE of their
    families only) or a predicate on the name. Past `max_samples` sample lines of wanted names
    reading stops and the result says so (`over_limit`). With a `deadline` (time.monotonic()),
    reading stops likewise (`out_of_time`) once the parse so far says it would not end by
    then followed by `work_after` times its own time (what the caller does next), looked at
    every _CHECK_EVERY lines: a page that cannot be served in time costs a fraction of its parse.
    """
    if "\r" in text:  # CRLF pages: a line ends at "\n", its "\r" is not part of the value
        text = text.replace("\r\n", "\n")
        if text.endswith("\r"):
            text = text[:-1]
    limit = max_samples if max_samples is not None else -1
    result: ParseResult | None = None
    clock = _Clock(deadline, work_after, len(text)) if deadline is not None else None
    if wanted is not None and not callable(wanted):
        wanted = frozenset(wanted)
        if (
            limit >= 0
            and _may_hold_more_wanted_lines(text, wanted, limit)
            and limit < text.count("\n")
            and _count_wanted_lines(text, wanted, limit) > limit
        ):
            return ParseResult(read=limit, over_limit=True)
        result = _parse_wanted(text, wanted, count_prefixes, limit, clock)
    if result is None:
        result = _parse_every_line(text, wanted, count_prefixes, limit, clock)
    if not result.over_limit and not result.out_of_time:
        _check_last_line(text, result)
    return result


# Lines between looks at the clock: a scrape's parse ends within a few ms of its deadline (a
# thread cannot be stopped from outside), and a look costs nothing beside 4,096 lines.
_CHECK_EVERY = 4096


class _Clock:
    """Whether a parse, `done` characters of `size` in, would end with the work after it by
    the deadline (progress is linear in characters: the page's lines are alike in cost)."""

    def __init__(self, deadline: float, work_after: float, size: int) -> None:
        self.deadline, self.work_after, self.size = deadline, work_after, max(1, size)
        self.start = time.monotonic()

    def late(self, done: int) -> bool:
        now = time.monotonic()
        spent = now - self.start
        whole = spent * self.size / max(1, done)  # the whole parse, at this pace
        return now + (whole - spent) + self.work_after * whole > self.deadline


_COUNT_PATTERNS: dict[frozenset[str], re.Pattern[str]] = {}
# Lines of unwanted counted families tried for "up" before giving up: a real page's first
# one parses; a page of broken ones must not cost a parse per line (both readers stop here).
_UP_TRIES = 1000


_SHORTEST_NAME: dict[frozenset[str], int] = {}


def _may_hold_more_wanted_lines(text: str, wanted: frozenset[str], limit: int) -> bool:
    """False where the page is too short to hold limit + 1 lines _count_wanted_lines counts
    and limit + 1 newlines, which the count also asks for: each such line is a wanted name
    and a separator. Then neither the count nor the page's newlines need be looked at: under
    the default cap, any page below ~600 kB (16 pages of 77 kB: 0.5 ms a round counting
    newlines). The cap holds either way; the count is what stops an explosion early."""
    if not wanted:
        return False
    shortest = _SHORTEST_NAME.get(wanted)
    if shortest is None:
        shortest = min(len(name) for name in wanted)
        if len(_SHORTEST_NAME) < 64:
            _SHORTEST_NAME[wanted] = shortest
    return len(text) >= (limit + 1) * (shortest + 2)


def _count_wanted_lines(text: str, wanted: frozenset[str], limit: int) -> int:
    """Lines that start (after blanks) with a wanted name and a separator, counted up to
    limit + 1 without parsing any."""
    pattern = _COUNT_PATTERNS.get(wanted)
    if pattern is None:
        pattern = re.compile(rf"(?:\A|\n)[ \t]*+(?:{_trie(wanted)})(?=[{{ \t])" if wanted else r"(?!)")
        if len(_COUNT_PATTERNS) < 64:
            _COUNT_PATTERNS[wanted] = pattern
    count = 0
    for _ in pattern.finditer(text):
        count += 1
        if count > limit:
            break
    return count


def _check_last_line(text: str, result: ParseResult) -> None:
    """A last line that does not parse is reported whatever its family: the page was cut."""
    end = len(text)
    while end and text[end - 1] == "\n":
        end -= 1
    start = text.rfind("\n", 0, end) + 1
    last = text[start:end].strip(" \t")
    if not last or last[0] == "#":
        return
    try:
        parse_sample_line(last)
    except ParseError as exc:
        line_no = text.count("\n", 0, start) + 1
        if not result.errors or result.errors[-1][0] != line_no:
            result.errors.append((line_no, str(exc)))


# Suffixes a sample name adds to its family's name (TYPE lines name the family).
_SAMPLE_SUFFIXES = ("_total", "_created", "_bucket", "_count", "_sum", "_info", "_gsum", "_gcount")


def _trie(words: Collection[str]) -> str:
    """A regular expression matching exactly `words`, factored as a trie: re tries the
    alternatives of a group one after another, so 90 names in a flat alternation cost ~4x
    this on every line of the page."""
    root: dict[str, dict] = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def build(node: dict[str, dict]) -> str:
        branches = []
        for char in sorted(k for k in node if k):
            child, run = node[char], re.escape(char)
            while len(child) == 1 and "" not in child:  # a chain without branching: one literal
                ((char, child),) = child.items()
                run += re.escape(char)
            branches.append(run + build(child))
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return build(root)


_PATTERNS: dict[frozenset[str], re.Pattern[str]] = {}
_PREFIX_PATTERNS: dict[tuple[str, ...], re.Pattern[str]] = {}


def families_of(names: Collection[str]) -> frozenset[str]:
    """The family names (as # TYPE lines give them) that sample names may belong to."""
    families = set(names)
    for name in names:
        families.update(name[: -len(s)] for s in _SAMPLE_SUFFIXES if name.endswith(s))
    return frozenset(families)


def _wanted_lines(wanted: frozenset[str]) -> re.Pattern[str]:
    """Line starts (after a newline) with a wanted sample name and a separator, # TYPE lines
    of a wanted sample's family, lines that start with "{" (a quoted name: known once
    parsed), and lines that start with a blank (then every line is read: the line-by-line
    reader strips blanks)."""
    pattern = _PATTERNS.get(wanted)
    if pattern is None:
        families = families_of(wanted)
        named = ""  # no wanted name: only the lines every reader reads
        if wanted:
            # The usual line, `name{labels} value` or `name value` with one blank and no
            # timestamp, is split here, in C, its value checked: (?P<value>) is then the last
            # group. The label set runs to the line's last "}" (possessive: no retrying).
            # Any other form of a wanted line is read by parse_sample_line.
            named = (
                rf"(?P<sample>{_trie(wanted)})"
                rf"(?:(?P<labels>\{{[^\n]*\}})?+ (?P<value>{_VALUE})(?=\n|\Z)|(?=[{{ \t]))"
                rf'|#[ \t]*TYPE[ \t]+"?(?P<family>{_trie(families)})"?[ \t]|'
            )
        # "{" and blanks in one class: one alternative fewer tried at every line start.
        pattern = re.compile(rf"\n(?:{named}(?P<other>[{{ \t\r]))")
        if len(_PATTERNS) < 64:  # a few fixed sets in practice; bounded all the same
            _PATTERNS[wanted] = pattern
    return pattern


def _parse_wanted(
    text: str, wanted: frozenset[str], count_prefixes: tuple[str, ...], limit: int, clock: _Clock | None
) -> ParseResult | None:
    """The fast path; None where it cannot give what reading every line would (indented lines)."""
    result = None
    if len(text) <= _KNOWN_MAX_CHARS:
        result = _read_known(text, wanted, count_prefixes, limit, clock)
    if result is None and len(text) <= _FOUND_MAX_CHARS:
        result = _read_found(text, wanted, count_prefixes, limit, clock)
    if result is None:
        result = _read_matches("\n" + text, _wanted_lines(wanted), wanted, count_prefixes, limit, clock)
    if result is None:
        return None
    if count_prefixes and not result.has_prefixed_sample and not result.over_limit and not result.out_of_time:
        # "up" needs one prefixed sample that parses, wanted or not: the first that does.
        prefixed = _PREFIX_PATTERNS.get(count_prefixes)
        if prefixed is None:
            alternatives = "|".join(re.escape(p) for p in count_prefixes)
            pattern = re.compile(rf"\n[ \t]*+(?:{alternatives})")  # indented too: no wanted name
            if len(_PREFIX_PATTERNS) < 64:
                _PREFIX_PATTERNS[count_prefixes] = pattern
            prefixed = pattern
        # The lines the line-by-line reader tries, in the same order and number: lines of
        # unwanted counted families (wanted ones and lines that start with "{" were read).
        tries, body = 0, "\n" + text
        for m in prefixed.finditer(body):
            end = body.find("\n", m.end())
            line = body[m.start() + 1 : end if end != -1 else len(body)].lstrip(" \t")
            stop = _NAME_STOP_RE.search(line)
            if stop is None or line[: stop.start()] in wanted:
                continue
            tries += 1
            if tries > _UP_TRIES:
                break
            try:
                parse_sample_line(line)
            except ParseError:
                continue
            result.has_prefixed_sample = True
            break
    return result


# Pages up to this size are read by _read_found (a real vLLM page is 60-80 kB); longer ones
# match by match, which can stop at the deadline part-way through the scan. The C reader
# (_read_known) takes longer pages too: it gives up past the lines a reader reads between
# looks at the clock, so a page it cannot finish costs it at most one scan in C (parse_bench's
# 13.4 MB page with no wanted line in it: 18 ms, best of 5).
_FOUND_MAX_CHARS = 256 * 1024
_KNOWN_MAX_CHARS = 64 * 1024 * 1024
_FOUND_PATTERNS: dict[frozenset[str], tuple[re.Pattern[str], Finder | None]] = {}
_NOT_DIGIT_START = frozenset("+-iInN")  # how a NaN, an ±Inf or a -0 token starts
_FLOAT_MAX = sys.float_info.max


def _found_lines(wanted: frozenset[str]) -> tuple[re.Pattern[str], Finder | None]:
    """_wanted_lines's lines, as groups findall returns without a match object each:
    (name and label set, name, value) for the usual sample line; the rest of a wanted
    line that is not the usual form; a wanted family's # TYPE line; a line that starts with
    "{" or a blank (those are left to _read_matches). With it, the C finder of the same
    lines (kvops/exposition/_linescan.c), where it was built and takes these names."""
    compiled = _FOUND_PATTERNS.get(wanted)
    if compiled is None:
        families = families_of(wanted)
        pattern = re.compile(
            rf"\n(?:(?P<key>(?P<sample>{_trie(wanted)})(?:\{{[^\n]*\}})?+)"
            rf"(?: (?P<value>{_VALUE})(?=\n|\Z)|(?P<rest>(?<=\}})[^\n]*+|[{{ \t][^\n]*+))"
            rf'|(?P<type>#[ \t]*TYPE[ \t]+"?{_trie(families)}"?[ \t][^\n]*+)'
            rf"|(?P<other>[{{ \t\r]))"
            if wanted
            else r"\n(?P<key>(?!))?(?P<sample>)(?P<value>)(?P<rest>)(?P<type>)(?P<other>[{ \t\r])"
        )
        finder = None
        if Finder is not None and wanted:
            try:
                finder = Finder(wanted, families)
            except ValueError:  # a name holding "{", "}", a blank or a quote: the expression reads it
                finder = None
        compiled = (pattern, finder)
        if len(_FOUND_PATTERNS) < 64:
            _FOUND_PATTERNS[wanted] = compiled
    return compiled


def _find_lines(text: str, wanted: frozenset[str]) -> list[tuple[str, str, str, str, str, str]]:
    """_found_lines's groups for every line of the page (as findall over "\n" + text): by
    the C finder where there is one (16 pages of 77 kB: 1.4 against 3.6 ms), else by the
    regular expression, the page's first line read on its own rather than copying the page
    behind a "\n" (0.6 ms a round)."""
    pattern, finder = _found_lines(wanted)
    if finder is not None:
        found = finder.findall(text)
        if found is not None:  # None: characters past U+00FF on the page and in a wanted name
            return found
    first_end = text.find("\n")
    found = pattern.findall("\n" + (text if first_end == -1 else text[:first_end]))
    if first_end != -1:
        found += pattern.findall(text, first_end)
    return found


def _read_found(
    text: str, wanted: frozenset[str], count_prefixes: tuple[str, ...], limit: int, clock: _Clock | None
) -> ParseResult | None:
    """_read_matches for a page of the usual shape, from one findall: the regular expression
    engine splits every wanted line, and Python touches each once, with no match object.
    None, for _read_matches to read the page instead (numbering lines, stopping on time), on
    anything else: a line it reports, one that starts with "{" or a blank, the sample cap,
    more lines than a parse reads between looks at the clock.

    What it keeps is what _read_matches keeps (tests/sources/test_exposition.py checks both
    on every page of the suite): the same _HEADS, the same checks, in the same order."""
    found = _find_lines(text, wanted)
    if clock is not None and len(found) > _CHECK_EVERY:
        return None
    result = ParseResult()
    samples, types, heads = result.samples, result.types, _HEADS
    read, up, unknown = 0, False, False
    for key, name, token, rest, type_line, other in found:
        if token:
            if read == limit:
                return None
            read += 1
            known = heads.get(key)
            if known is None:
                if len(key) == len(name):  # no label set
                    labels: Labels = {}
                else:
                    try:
                        labels, quoted = parse_label_set(key[len(name) + 1 : -1])
                    except ParseError:
                        return None
                    if quoted is not None or (types and _typed_label_problem(types, name, labels)):
                        return None
                    _remember_head(key, name, labels)
            else:
                labels = known[1]  # shared, read-only (ParseResult)
            value = float(token)
            if token[0] in _NOT_DIGIT_START or value > _FLOAT_MAX:  # NaN, ±Inf, -0 or 1e309
                if value in _INFINITIES and token[-1] not in "fFyY":
                    return None
                unknown = True
            if not up and count_prefixes and name.startswith(count_prefixes):
                up = True
            bucket = samples.get(name)
            if bucket is None:
                samples[name] = [(labels, value)]
            else:
                bucket.append((labels, value))
        elif type_line:
            if _read_meta(type_line, types) is not None:
                return None
        elif other or not rest:
            return None
        else:  # a wanted line in another form (a timestamp, tabs): read as _read_matches reads it
            if read == limit:
                return None
            result.read, result.has_prefixed_sample = read, up
            if _add_sample(result, key + rest, count_prefixes, limit) is not None:
                return None
            read, up = result.read, result.has_prefixed_sample
    result.read, result.has_prefixed_sample, result.maybe_unknown = read, up, unknown
    return result


def _read_known(
    text: str, wanted: frozenset[str], count_prefixes: tuple[str, ...], limit: int, clock: _Clock | None
) -> ParseResult | None:
    """_read_found's loop run by the C finder, for a page whose every found line is a usual
    sample line already in _HEADS (or without labels) or a # TYPE line: after a target's first
    scrape, every line of a page of the usual shape, up to _KNOWN_MAX_CHARS. None (the page
    then read by _read_found or _read_matches) where there is no finder or the page holds
    anything else. Same result as those readers (tests/sources/test_linescan.py checks it on
    every page of the suite)."""
    finder = _found_lines(wanted)[1]
    if finder is None:
        return None
    samples: dict[str, list[tuple[Labels, float]]] = {}
    types: dict[str, str] = {}
    # Past _CHECK_EVERY found lines with a clock, or the sample cap, _read_found gives a page
    # up: so does the C reader, at that line. # TYPE lines read before (_TYPE_LINES) go into
    # types there; the others come back, in order, for _read_meta.
    check = _CHECK_EVERY if clock is not None else -1
    known = finder.read_known(text, _HEADS, samples, check, limit, _TYPE_LINES, types)
    if known is None:
        return None
    read, unknown, type_lines = known
    result = ParseResult(samples=samples, types=types, read=read, maybe_unknown=unknown)
    for line in type_lines:
        if _read_meta(line, result.types) is not None:
            return None
    result.has_prefixed_sample = bool(count_prefixes) and any(
        name.startswith(count_prefixes) for name in samples
    )
    return result


def _read_matches(
    body: str,
    pattern: re.Pattern[str],
    wanted: frozenset[str],
    count_prefixes: tuple[str, ...],
    limit: int,
    clock: _Clock | None,
) -> ParseResult | None:
    result = ParseResult()
    types, errors = result.types, result.errors
    counted_to, line_no = 0, 0  # line numbers counted incrementally: matches come in order
    check_at = _CHECK_EVERY if clock is not None else -1
    if clock is not None:
        clock.start = time.monotonic()  # the pace of the lines alone: the pattern is compiled

    def number(start: int) -> int:
        nonlocal counted_to, line_no
        line_no += body.count("\n", counted_to, start)
        counted_to = start
        return line_no

    for seen, m in enumerate(pattern.finditer(body)):
        if seen == check_at:
            if clock.late(m.start()):  # type: ignore[union-attr]
                result.out_of_time = True
                break
            check_at += _CHECK_EVERY
        kind = m.lastgroup
        if kind == "other" and m.group("other") != "{":  # an indented line
            return None
        start = m.start() + 1
        if kind == "value":
            sample, head, token = m.group("sample", "labels", "value")
            problem = _add_split(result, sample, head, token, count_prefixes, limit)
            if problem is not None:
                errors.append((number(start), problem))
            if result.over_limit:
                break
            continue
        end = body.find("\n", m.end())
        line = body[start : end if end != -1 else len(body)]
        if kind == "family":
            problem = _read_meta(line, types)
        elif kind == "other":
            problem = _add_quoted(result, line, wanted.__contains__, count_prefixes, limit)
        else:
            problem = _add_sample(result, line, count_prefixes, limit)
        if problem is not None:
            errors.append((number(start), problem))
        if result.over_limit:
            break
    return result


# A wanted line's text up to its label set's "}" -> (name, labels), for lines that parsed and
# whose `le`/`quantile` labels, if any, are numbers (so no family's TYPE makes them wrong):
# that text is the same every scrape, only the value after it changes. Histograms make most
# wanted lines, and this skips the name, the label set and the typed check for all of them.
_HEADS: dict[str, tuple[str, Labels]] = {}
_HEADS_MAX = 8192


def _remember_head(text: str, name: str, labels: Labels) -> None:
    """Keeps a parsed line's text up to its "}" -> (name, labels) in _HEADS, where no family's
    TYPE can make its labels wrong (numeric `le`/`quantile`); bounded: churning label values
    start it over."""
    if _numeric_bounds(labels):
        if len(_HEADS) >= _HEADS_MAX:
            _HEADS.clear()
        _HEADS[text] = (name, labels.copy())


def _add_sample(result: ParseResult, line: str, count_prefixes: tuple[str, ...], limit: int) -> str | None:
    """Parse one wanted sample line into result; what is wrong with it, if anything."""
    if result.read == limit:
        result.over_limit = True
        return None
    result.read += 1
    close = line.rfind("}")
    known = _HEADS.get(line[: close + 1]) if close != -1 else None
    if known is not None:
        tail = _TAIL_RE.match(line, close + 1)
        if tail is None:
            return "expected a value and an optional timestamp"
        token, timestamp = tail.groups()
        try:
            if timestamp is not None:
                _check_timestamp(timestamp)
            value = _parse_value(token)
        except ParseError as exc:
            return str(exc)
        name, labels = known[0], known[1]  # shared, read-only (ParseResult)
        if not result.has_prefixed_sample and count_prefixes and name.startswith(count_prefixes):
            result.has_prefixed_sample = True
    else:
        try:
            name, labels, value = parse_sample_line(line)
        except ParseError as exc:
            return str(exc)
        if not result.has_prefixed_sample and count_prefixes and name.startswith(count_prefixes):
            result.has_prefixed_sample = True  # "up" is the line's syntax, as for unwanted lines
        if labels and result.types and (problem := _typed_label_problem(result.types, name, labels)):
            return problem
        if close != -1 and labels:
            _remember_head(line[: close + 1], name, labels)
    bucket = result.samples.get(name)  # _keep, inline: this runs for every wanted line
    if bucket is None:
        result.samples[name] = [(labels, value)]
    else:
        bucket.append((labels, value))
    return None


def _add_split(
    result: ParseResult, name: str, head: str | None, token: str, count_prefixes: tuple[str, ...], limit: int
) -> str | None:
    """_add_sample for a line the scan split (name, "{labels}" or None, a checked value)."""
    if result.read == limit:
        result.over_limit = True
        return None
    result.read += 1
    known = None
    if head is None:
        labels: Labels = {}
    else:
        known = _HEADS.get(name + head)
        if known is not None:
            labels = known[1]  # shared, read-only (ParseResult)
        else:
            try:
                labels, quoted = parse_label_set(head[1:-1])
            except ParseError as exc:
                return str(exc)
            if quoted is not None:
                return "two metric names"
    value = float(token)
    if value in _INFINITIES and token[-1] not in "fFyY":  # Go's ParseFloat: out of range
        return f"sample value out of range {token[:40]!r}"
    if not result.has_prefixed_sample and count_prefixes and name.startswith(count_prefixes):
        result.has_prefixed_sample = True
    if known is None and labels:
        if result.types and (problem := _typed_label_problem(result.types, name, labels)):
            return problem
        _remember_head(name + head, name, labels)  # type: ignore[operator]
    bucket = result.samples.get(name)
    if bucket is None:
        result.samples[name] = [(labels, value)]
    else:
        bucket.append((labels, value))
    return None


_INFINITIES = (math.inf, -math.inf)
_HISTOGRAMS = frozenset(["histogram", "gaugehistogram", "gauge_histogram"])


def _numeric_bounds(labels: Labels) -> bool:
    """No `le` or `quantile` label that _typed_label_problem would reject, whatever the TYPE."""
    for key in ("le", "quantile"):
        bound = labels.get(key)
        if bound is not None and _VALUE_RE.fullmatch(bound) is None:
            return False
    return True


def _typed_label_problem(types: dict[str, str], name: str, labels: Labels) -> str | None:
    """A histogram bucket's `le` and a summary's `quantile` are numbers (expfmt checks them
    once the family's TYPE is known)."""
    if "le" in labels and name.endswith("_bucket") and types.get(name[:-7]) in _HISTOGRAMS:
        bound = labels["le"]
    elif "quantile" in labels and types.get(name) == "summary":
        bound = labels["quantile"]
    else:
        return None
    if _VALUE_RE.fullmatch(bound) is None:
        return f"bad number {bound[:40]!r} in label {'le' if name.endswith('_bucket') else 'quantile'}"
    return None


def _add_quoted(
    result: ParseResult, line: str, keep: Callable[[str], bool], count_prefixes: tuple[str, ...], limit: int
) -> str | None:
    """A line that starts with "{": its name is known once it parses."""
    try:
        name, labels, value = parse_sample_line(line)
    except ParseError as exc:
        return str(exc)
    if count_prefixes and name.startswith(count_prefixes):
        result.has_prefixed_sample = True
    if keep(name):
        if result.read == limit:
            result.over_limit = True
            return None
        result.read += 1
        if labels and result.types and (problem := _typed_label_problem(result.types, name, labels)):
            return problem
        _keep(result, name, labels, value)
    return None


def _keep(result: ParseResult, name: str, labels: Labels, value: float) -> None:
    bucket = result.samples.get(name)
    if bucket is None:
        result.samples[name] = [(labels, value)]
    else:
        bucket.append((labels, value))


def _parse_every_line(
    text: str,
    wanted: Collection[str] | Callable[[str], bool] | None,
    count_prefixes: tuple[str, ...],
    limit: int,
    clock: _Clock | None = None,
) -> ParseResult:
    result = ParseResult()
    check_at = _CHECK_EVERY if clock is not None else -1
    done = 0  # characters before this line
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
    up_tries = 0
    # Lines end at "\n" only, as in the text format and prometheus_client's parser:
    # str.splitlines() would also cut at \x85, \u2028, \x0c... inside a label value.
    for line_no, line in enumerate(text.split("\n"), start=1):
        if clock is not None:
            done += len(line) + 1
            if line_no == check_at:
                if clock.late(done):
                    result.out_of_time = True
                    break
                check_at += _CHECK_EVERY
        if not line or line.startswith(rejected):
            continue
        first = line[0]
        if first == " " or first == "\t":
            line = line.strip(" \t")
            if not line:
                continue
            first = line[0]
        if first == "#":
            problem = _read_meta(line, types)
        elif first == "{":
            problem = _add_quoted(result, line, keep, count_prefixes, limit)
        else:
            stop = _NAME_STOP_RE.search(line)
            if stop is None:
                problem = f"sample without a value: {line[:60]!r}"
            elif keep(name := line[: stop.start()]):
                problem = _add_sample(result, line, count_prefixes, limit)
            elif (
                count_prefixes
                and not result.has_prefixed_sample
                and up_tries < _UP_TRIES
                and name.startswith(count_prefixes)
            ):
                # Still looking for "up": lines of a counted family are tried until one parses.
                up_tries += 1
                try:
                    parse_sample_line(line)
                    result.has_prefixed_sample = True
                    problem = None
                except ParseError as exc:
                    problem = str(exc)
            else:
                rejected = line[: stop.start() + 1]
                continue
        if problem is not None:
            errors.append((line_no, problem))
        if result.over_limit:
            break
    return result
