"""Prometheus text-format parser that keeps only the samples asked for.

A busy vLLM serves thousands of lines (histogram buckets, per-LoRA series) and kvops needs
a few dozen. prometheus_client's parser builds every family and parses every label set;
this one parses labels and values only for the samples kvops uses
(benchmarks/parse_bench.py measures it). Values equal prometheus_client's for the samples it
keeps (tests/sources/test_exposition.py).

With a set of wanted names, one regular expression (a trie of the names, run by re's C
engine) finds the wanted lines and their families' # TYPE lines, and no other line is
looked at from Python: per-line Python work was most of what `kvops top` spent on 16
targets. Without one (or on a page with indented lines), every line is read in turn.

A malformed line is recorded with its 1-based line number and skipped: the rest survives.
Lines are malformed only if they are read: with a wanted set, a broken line of a family
kvops does not read is not reported (Prometheus reports it; kvops has no use for it), except
a last line cut off without its value (a truncated page).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

Labels = dict[str, str]

# One label pair: name="value" where value may hold escaped \\ \" \n. The value is written
# as runs of plain characters between escapes (not one alternation per character): re runs it
# several times faster on vLLM's long info lines.
_PAIR = r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"\\]*(?:\\.[^"\\]*)*)"\s*(?:,|\Z)'
_LABEL_RE = re.compile(_PAIR)
_LABEL_SET_RE = re.compile(rf"(?:{_PAIR})*\s*")  # a whole well-formed label set
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
    # a target "up" (docs/DESIGN.md). Unwanted lines are checked only until the first one passes.
    has_prefixed_sample: bool = False

    def get(self, name: str) -> list[tuple[Labels, float]]:
        return self.samples.get(name, [])


class ParseError(ValueError):
    pass


def _unescape(value: str) -> str:
    return _UNESCAPE_RE.sub(lambda m: _UNESCAPE[m.group(0)], value) if "\\" in value else value


# A series' label set is the same text scrape after scrape (its value is what changes), and
# vLLM's *_config_info lines carry 40 labels: parsed sets are kept, bounded, and copied out.
_LABEL_SETS: dict[str, Labels] = {}
_LABEL_SETS_MAX = 8192


def parse_labels(text: str) -> Labels:
    """Parse the inside of {...}. Raises ParseError on anything that is not label pairs."""
    known = _LABEL_SETS.get(text)
    if known is not None:
        return known.copy()  # a copy: a caller may change its dict
    if _LABEL_SET_RE.fullmatch(text):  # the usual case: two passes in C, no loop here
        if "\\" in text:
            labels = {name: _unescape(value) for name, value in _LABEL_RE.findall(text)}
        else:
            labels = dict(_LABEL_RE.findall(text))
        if len(_LABEL_SETS) >= _LABEL_SETS_MAX:  # churning label values: start over
            _LABEL_SETS.clear()
        _LABEL_SETS[text] = labels
        return labels.copy()
    labels = {}  # find and say where it breaks
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

    `wanted` may be a set of sample names (fast path: `types` then holds the TYPE of their
    families only) or a predicate on the name.
    """
    if wanted is not None and not callable(wanted):
        found = _parse_wanted(text, frozenset(wanted), count_prefixes)
        if found is not None:
            return found
    return _parse_every_line(text, wanted, count_prefixes)


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


def families_of(names: Collection[str]) -> frozenset[str]:
    """The family names (as # TYPE lines give them) that sample names may belong to."""
    families = set(names)
    for name in names:
        families.update(name[: -len(s)] for s in _SAMPLE_SUFFIXES if name.endswith(s))
    return frozenset(families)


def _wanted_lines(wanted: frozenset[str]) -> re.Pattern[str]:
    """Line starts (after a newline) with a wanted sample name and a separator, # TYPE lines
    of a wanted sample's family, and lines that start with a blank (then every line is read:
    the line-by-line reader strips blanks)."""
    pattern = _PATTERNS.get(wanted)
    if pattern is None:
        families = families_of(wanted)
        pattern = re.compile(
            rf"\n(?:(?P<sample>{_trie(wanted)})(?=[{{ \t])"
            rf"|# TYPE [ \t]*(?P<family>{_trie(families)})[ \t]"
            r"|(?P<indented>[ \t\r]))"
        )
        if len(_PATTERNS) < 64:  # a few fixed sets in practice; bounded all the same
            _PATTERNS[wanted] = pattern
    return pattern


def _parse_wanted(text: str, wanted: frozenset[str], count_prefixes: tuple[str, ...]) -> ParseResult | None:
    """The fast path; None where it cannot give what reading every line would (indented lines)."""
    if not wanted:
        result = ParseResult()
    else:
        found = _read_matches("\n" + text, _wanted_lines(wanted), wanted, count_prefixes)
        if found is None:
            return None
        result = found
    end = len(text.rstrip("\n"))
    last_start = text.rfind("\n", 0, end) + 1
    last = text[last_start:end]
    if last and last[0] != "#" and _cut(last) == -1:  # a page cut off mid-line says so
        errors = result.errors
        errors.append((text.count("\n", 0, last_start) + 1, f"sample without a value: {last[:60]!r}"))
    if count_prefixes and not result.has_prefixed_sample:
        # "up" needs one prefixed sample that parses, wanted or not: the first that does.
        prefixed = re.compile("\n(?:" + "|".join(re.escape(p) for p in count_prefixes) + ")")
        body = "\n" + text
        for m in prefixed.finditer(body):
            end = body.find("\n", m.end())
            line = body[m.start() + 1 : end if end != -1 else len(body)]
            if _cut(line) == -1:
                continue
            try:
                parse_sample_line(line)
            except ParseError:
                continue
            result.has_prefixed_sample = True
            break
    return result


def _read_matches(
    body: str, pattern: re.Pattern[str], wanted: frozenset[str], count_prefixes: tuple[str, ...]
) -> ParseResult | None:
    result = ParseResult()
    types, errors = result.types, result.errors
    for m in pattern.finditer(body):
        if m.group("indented") is not None:
            return None
        start = m.start() + 1
        end = body.find("\n", m.end())
        line = body[start : end if end != -1 else len(body)]
        if m.group("family") is not None:
            parts = line.split(None, 3)
            if len(parts) == 4:
                types[parts[2]] = parts[3].strip()
            continue
        # The name as reading every line would cut it ('{' first): it may not be the match.
        if line[: _cut(line)] not in wanted:
            continue
        problem = _add_sample(result, line, count_prefixes)
        if problem is not None:
            errors.append((body.count("\n", 0, start), problem))
    return result


def _add_sample(result: ParseResult, line: str, count_prefixes: tuple[str, ...]) -> str | None:
    """Parse one wanted sample line into result; what is wrong with it, if anything."""
    try:
        name, labels, value = parse_sample_line(line)
    except ParseError as exc:
        return str(exc)
    if count_prefixes and name.startswith(count_prefixes):
        result.has_prefixed_sample = True
    bucket = result.samples.get(name)
    if bucket is None:
        result.samples[name] = [(labels, value)]
    else:
        bucket.append((labels, value))
    return None


def _cut(line: str) -> int:
    """Where a sample line's name ends: at '{' (a '{' after the name can only open its
    labels), else at the first blank; -1 for a line without either."""
    cut = line.find("{")
    if cut == -1:
        cut = line.find(" ")
        if cut == -1:
            cut = line.find("\t")
    return cut


def _parse_every_line(
    text: str,
    wanted: Collection[str] | Callable[[str], bool] | None,
    count_prefixes: tuple[str, ...],
) -> ParseResult:
    result = ParseResult()
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
        # Most lines are rejected by the name alone, unparsed.
        cut = _cut(line)
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
        problem = _add_sample(result, line, count_prefixes)
        if problem is not None:
            errors.append((line_no, problem))
    return result
