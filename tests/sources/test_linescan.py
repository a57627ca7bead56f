"""The C line finder (kvops/exposition/_linescan.c) finds what the parser's regular expression
finds, group for group, on every page of the suite and on generated ones; the parser reads
alike with and without it.

The regular expression (parser._found_lines) is the reference: findall over "\\n" + page,
one 6-tuple a found line. The finder replaces it only for speed (docs/performance.md).
"""

from __future__ import annotations

import dataclasses
import time
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from reliability.fuzzing import FUZZ

from kvops.engines.registry import WANTED
from kvops.exposition import parser as exposition_parser
from kvops.exposition.parser import ParseResult, families_of, parse
from support.parser_readers import match_by_match, regex_only
from support.suite_pages import PAGES


def _finder(wanted: frozenset[str]):
    from kvops.exposition._linescan import Finder

    return Finder(wanted, families_of(wanted))


def _reference(text: str, wanted: frozenset[str]) -> list[tuple[str, ...]]:
    pattern, _ = exposition_parser._found_lines(wanted)
    return pattern.findall("\n" + text)


def test_the_finder_is_built():
    """setup.py builds it where a compiler is at hand, as the README's test command installs one;
    a silent fallback here would leave every other test of it comparing the expression with itself."""
    try:
        import kvops.exposition._linescan  # noqa: F401
    except ImportError as exc:  # pragma: no cover - the message is the point
        pytest.fail(
            f"the C line finder is not built ({exc}): install gcc and Python's headers"
            " (Debian: gcc python3-dev) and run `pip install -e .` again"
        )
    assert exposition_parser.Finder is not None
    assert exposition_parser._found_lines(frozenset(WANTED))[1] is not None


def test_the_suite_has_pages_of_every_kind():
    names = {name.split("/")[0] for name, _, _ in PAGES}
    assert {"vllm", "vllm-real", "sglang", "lmcache", "trtllm", "dynamo-kvbm", "expfmt#0"} <= names | {
        name for name, _, _ in PAGES
    }


@pytest.mark.parametrize(("name", "text", "wanted"), PAGES, ids=[name for name, _, _ in PAGES])
def test_the_finder_finds_what_the_expression_finds(name, text, wanted):
    # It refuses an empty name and one that holds a character ending a name (a name past
    # Latin-1 it leaves out: no page it reads can hold one).
    if any(not n or (max(n) <= "\xff" and set(n) & set('{} \t\n"')) for n in families_of(wanted)):
        with pytest.raises(ValueError):
            _finder(wanted)
        return
    found = _finder(wanted).findall(text)
    if found is None:  # characters past U+00FF on the page and in a name: the expression reads it
        assert max(text) > "\xff" and max(max(n) for n in families_of(wanted)) > "\xff"
        return
    assert found == _reference(text, wanted)


@pytest.mark.parametrize(("name", "text", "wanted"), PAGES, ids=[name for name, _, _ in PAGES])
def test_the_parser_reads_alike_with_and_without_the_finder(name, text, wanted):
    first = parse(text, wanted)  # the page's label sets now known (_HEADS): read_known's turn
    second = parse(text, wanted)
    with regex_only():
        without = parse(text, wanted)
    assert repr(first) == repr(without)  # repr: NaN equals NaN, -0.0 differs from 0.0
    assert repr(second) == repr(without)
    for cap in (0, 1, first.read - 1, first.read):  # the sample cap, as each reader enforces it
        if cap >= 0:
            with_cap = parse(text, wanted, max_samples=cap)
            with regex_only():
                assert repr(with_cap) == repr(parse(text, wanted, max_samples=cap))


def _known(text: str, wanted: frozenset[str]) -> ParseResult | None:
    return exposition_parser._read_known(text, wanted, ("vllm:", "lmcache:"), -1, None)


@pytest.mark.parametrize(("name", "text", "wanted"), PAGES, ids=[name for name, _, _ in PAGES])
def test_read_known_gives_what_the_loop_gives_once_the_label_sets_are_known(name, text, wanted):
    parse(text, wanted)
    known = _known(text, wanted)
    with regex_only():
        loop = exposition_parser._read_found(text, wanted, ("vllm:", "lmcache:"), -1, None)
    if known is not None:
        assert loop is not None and repr(known) == repr(loop)


def test_read_known_reads_every_engine_page_of_the_usual_shape_after_its_first_scrape():
    """Otherwise the C loop would be tested above only where it gives up."""
    pages = [(n, t, w) for n, t, w in PAGES if "/" in n and not n.startswith("vllm/pasted")]
    read = []
    for name, text, wanted in pages:
        parse(text, wanted)
        if _known(text, wanted) is not None:
            read.append(name)
    assert len(read) >= len(pages) * 3 // 4, sorted(set(n for n, _, _ in pages) - set(read))
    for engine in ("vllm/0.33.0", "vllm-real", "sglang", "lmcache", "trtllm", "dynamo-kvbm", "vllm-tiering"):
        assert any(name.startswith(engine) for name in read), engine


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('vllm:num_requests_running{engine="0"} 1e309', "out of float's range"),
        ('vllm:num_requests_running{engine="0"} 1 1700000000000', "a timestamp"),
        ('vllm:num_requests_running{engine="not-seen-7f3c"} 1', "a label set not seen before"),
        ('{"vllm:num_requests_running",engine="0"} 1', "a quoted name"),
        ('  vllm:num_requests_running{engine="0"} 1', "an indented line"),
        ('vllm:num_requests_running\t{engine="0"} 1', "a tab"),
    ],
)
def test_read_known_leaves_other_lines_to_the_loop(line, why):
    wanted = frozenset(WANTED)
    usual = 'vllm:num_requests_running{engine="0"} 2\n'
    parse(usual, wanted)
    assert _known(usual, wanted) is not None
    assert _known(usual + line + "\n", wanted) is None, why


def test_read_known_marks_values_that_may_be_unknown():
    wanted = frozenset(WANTED)
    for value, maybe in [
        ("2", False),
        ("0.5", False),
        ("NaN", True),
        ("-0", True),
        ("+Inf", True),
        ("-1", True),
    ]:
        page = f'vllm:num_requests_running{{engine="0"}} {value}\n'
        parse(page, wanted)
        known = _known(page, wanted)
        assert known is not None and known.maybe_unknown is maybe, value
        assert repr(known.samples["vllm:num_requests_running"][0][1]) == repr(float(value))


# Value tokens in every spelling a page's writer uses: Python's repr and %g/%e of floats
# (prometheus_client), integers past 2^53 and 19 digits, and digit strings at the edges of the
# C reader's exact path (19 digits, 2^53, powers of ten past +-22, leading and trailing zeros).
_VALUE_TOKENS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.builds(
        lambda x, k, form: f"{x:.{k}{form}}",
        st.floats(allow_nan=False, allow_infinity=False),
        st.integers(0, 20),
        st.sampled_from("geEf"),
    ),
    st.integers(-(10**22), 10**22).map(str),
    st.from_regex(r"[+-]?(0{0,3}[1-9][0-9]{0,21}|0)(\.[0-9]{0,24})?([eE][+-]?0?[0-9]{1,2})?", fullmatch=True),
    st.sampled_from(
        [
            "9007199254740993",
            "9007199254740992",
            "9999999999999999999",
            "10000000000000000000",
            "1e22",
            "1e23",
            "1e-22",
            "1e-23",
            "123456789e-22",
            "0.1",
            "0e400",
            "-0.0",
            "4.9e-324",
            "1.7976931348623157e308",
            "00000000000000000000001",
            "1.00000000000000000000",
            # past 2^53 with a power of ten: m * 10^p would round twice
            "1173122633160899524e-6",
            "178808351375360542e2",
            "9374737363467449433e20",
        ]
    ),
)


@FUZZ
@given(st.lists(_VALUE_TOKENS, min_size=1, max_size=8))
def test_read_known_reads_every_value_as_float_reads_it(tokens):
    """read_known converts most values without strtod (an exact fast path): each value, its
    sign of zero included, must be what float() gives."""
    wanted = frozenset(WANTED)
    tokens = [t for t in tokens if abs(float(t)) <= 1.7976931348623157e308]  # 1e309 is given up on
    page = "".join(f'vllm:num_requests_running{{engine="{i}"}} {t}\n' for i, t in enumerate(tokens))
    parse(page, wanted)
    known = _known(page, wanted)
    assert known is not None
    got = [value for _, value in known.samples.get("vllm:num_requests_running", [])]
    assert [repr(v) for v in got] == [repr(float(t)) for t in tokens]


# Generated lines: names from a small alphabet so that wanted and unwanted ones share
# prefixes; every character the finder decides on (braces, quotes, blanks, tabs, "\r", "#").
_NAMES = st.text(alphabet="ab:_", min_size=1, max_size=3)
_LABELS = st.sampled_from(
    ["", "{}", '{a="1"}', '{le="+Inf"}', "{", '{a="}"', '{a="}"} x}', "{ }", '{a="\\""}', "}", "{\n}"]
)
_SEPARATORS = st.sampled_from([" ", "  ", "\t", "", " \t", "\r "])
_VALUES = st.one_of(
    st.sampled_from(
        ["1", "-0", "+1.5e3", ".5", "1.", "1e", "1e+", "NaN", "+nan", "nan", "-Inf", "infinity", "Infinit",
         "inf ", "1 2", "1\r", "", "0x1", "1_0", "\uff11", "\xe9"]
    ),
    st.text(alphabet="0123456789.eE+-infaINFAty ", max_size=6),
)  # fmt: skip
_SAMPLE_LINES = st.builds(lambda *parts: "".join(parts), _NAMES, _LABELS, _SEPARATORS, _VALUES)
_TYPE_LINES = st.builds(
    lambda head, quote, n, tail: head + quote + n + tail,
    st.sampled_from(["# TYPE ", "#TYPE\t", "#  TYPE  ", "# TYPE", "# HELP ", "# type ", "#"]),
    st.sampled_from(["", '"']),
    _NAMES,
    st.sampled_from([" counter", '" gauge', "\thistogram", "", '""  x', " ", '"']),
)
# Characters past U+00FF (an em dash in a HELP text) and NUL, which stands for them in C.
_OTHER_LINES = st.text(alphabet='ab:_{} \t\r#"=,0.\xe9\u2014\x00', max_size=12)
_LINES = st.lists(st.one_of(_SAMPLE_LINES, _TYPE_LINES, _OTHER_LINES), max_size=15)


@FUZZ
@given(_LINES, st.sets(_NAMES, min_size=1, max_size=6), st.booleans())
def test_the_finder_finds_what_the_expression_finds_on_generated_pages(lines, names, final_newline):
    text = "\n".join(lines) + ("\n" if final_newline else "")
    wanted = frozenset(names)
    assert _finder(wanted).findall(text) == _reference(text, wanted)


@FUZZ
@given(_LINES, st.sets(_NAMES, min_size=1, max_size=6))
def test_the_parser_reads_generated_pages_alike_with_and_without_the_finder(lines, names):
    text = "\n".join(lines)
    first, second = parse(text, names), parse(text, names)
    with regex_only():
        without = parse(text, names)
    assert repr(first) == repr(without)
    assert repr(second) == repr(without)


def test_a_page_past_latin_1_is_read_as_the_expression_reads_it():
    """SGLang's and LMCache's HELP texts hold em and en dashes: such pages are read in C too."""
    wanted = frozenset(WANTED)
    text = (
        "# HELP vllm:num_requests_running Requests \u2014 running\n# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="\u4e2d\x00"} 3\n'
        'vllm:num_requests_running{x="\u4e2d"} 1\u2014\n'
    )
    assert _finder(wanted).findall(text) == _reference(text, wanted)
    assert len(_reference(text, wanted)) == 3
    first, second = parse(text, wanted), parse(text, wanted)
    with regex_only():
        assert repr(first) == repr(second) == repr(parse(text, wanted))
    assert first.get("vllm:num_requests_running") == [({"model_name": "\u4e2d\x00"}, 3.0)]
    page = 'vllm:num_requests_running{model_name="\u4e2d"} 3\n'
    parse(page, wanted)
    assert _known(page, wanted) is not None  # read_known reads it as well


@FUZZ
@given(_LINES, st.sets(st.text(alphabet="a:\u4e2d", min_size=1, max_size=3), min_size=1, max_size=4))
def test_a_wanted_name_past_latin_1_leaves_wide_pages_to_the_expression(lines, names):
    text = "\n".join([*lines, "\u4e2d 1", "a:\u4e2d 2"])
    wanted = frozenset(names)
    found = _finder(wanted).findall(text)
    if any(max(n) > "\xff" for n in names):
        assert found is None
    else:
        assert found == _reference(text, wanted)
    latin = "\n".join(line for line in lines if max(line, default="a") <= "\xff")
    assert _finder(wanted).findall(latin) == _reference(latin, wanted)


def test_latin_1_names_and_values_are_found_as_the_expression_finds_them():
    wanted = frozenset({"caf\xe9", "b"})
    text = 'caf\xe9{x="\xe9"} 1\ncaf\xe9 2\n# TYPE caf\xe9 gauge\nb\xe9 3\n'
    assert _finder(wanted).findall(text) == _reference(text, wanted)
    assert len(_reference(text, wanted)) == 3


@pytest.mark.parametrize("name", ["a{b", "a}", "a b", "a\tb", "a\nb", ""])
def test_a_name_the_finder_cannot_hold_is_refused_and_the_expression_reads_it(name):
    with pytest.raises(ValueError):
        _finder(frozenset({name, "c"}))
    if name:
        wanted = frozenset({name, "c"})
        assert exposition_parser._found_lines(wanted)[1] is None
        assert parse("c 1\n", wanted).get("c") == [({}, 1.0)]


def test_names_must_be_a_set_of_str():
    from kvops.exposition._linescan import Finder

    with pytest.raises(TypeError):
        Finder(["a"], frozenset({"a"}))
    with pytest.raises(TypeError):
        Finder(frozenset({1}), frozenset({"a"}))
    with pytest.raises(TypeError):
        Finder(frozenset({"a"}), frozenset({"a"})).findall(b"a 1\n")


def _many_series(series: int) -> str:
    """A page of `series` label sets of one wanted gauge and a histogram: longer than the
    256 KiB _read_found takes when series is large."""
    lines = ["# TYPE vllm:num_requests_running gauge"]
    lines += [f'vllm:num_requests_running{{model_name="m-{i:05d}",engine="0"}} {i}' for i in range(series)]
    lines += ["# TYPE vllm:time_to_first_token_seconds histogram"]
    for i in range(series // 10):
        for le in ("0.1", "1.0", "+Inf"):
            lines.append(f'vllm:time_to_first_token_seconds_bucket{{le="{le}",model_name="m-{i:05d}"}} {i}.0')
        lines.append(f'vllm:time_to_first_token_seconds_sum{{model_name="m-{i:05d}"}} {i}.5')
        lines.append(f'vllm:time_to_first_token_seconds_count{{model_name="m-{i:05d}"}} {i}.0')
    return "\n".join(lines) + "\n"


def _by_matches(text: str, wanted: frozenset[str], **kwargs: object) -> ParseResult:
    """The reader that numbers lines and looks at the clock, with the regular expression."""
    with match_by_match(), regex_only():
        return parse(text, wanted, **kwargs)  # type: ignore[arg-type]


def _same_as_by_matches(result: ParseResult, reference: ParseResult) -> None:
    """_read_matches never sets the maybe_unknown hint (the other readers do): compared apart,
    through what it is for (known_only)."""
    assert repr(dataclasses.replace(result, maybe_unknown=True)) == repr(reference)
    assert repr(result.known_only().samples) == repr(reference.known_only().samples)


def test_read_known_reads_a_page_longer_than_the_one_findall_reader_takes(monkeypatch):
    monkeypatch.setattr(exposition_parser, "_HEADS", {})  # room for this page's 6,000 label sets
    wanted = frozenset(WANTED)
    text = _many_series(4000)
    assert len(text) > exposition_parser._FOUND_MAX_CHARS
    parse(text, wanted)
    assert _known(text, wanted) is not None  # read in C, not match by match
    _same_as_by_matches(parse(text, wanted), _by_matches(text, wanted))


def test_read_known_stops_where_the_clock_and_the_cap_would_stop_the_other_readers(monkeypatch):
    monkeypatch.setattr(exposition_parser, "_HEADS", {})
    wanted = frozenset(WANTED)
    text = _many_series(4000)  # more found lines than a reader reads between looks at the clock
    parse(text, wanted)
    finder = exposition_parser._found_lines(wanted)[1]
    assert finder.read_known(text, exposition_parser._HEADS, {}) is not None
    assert finder.read_known(text, exposition_parser._HEADS, {}, exposition_parser._CHECK_EVERY) is None
    assert finder.read_known(text, exposition_parser._HEADS, {}, -1, 5999) is None
    assert finder.read_known(text, exposition_parser._HEADS, {}, -1, 10000) is not None
    deadline = time.monotonic() + 600
    with_clock = parse(text, wanted, deadline=deadline)
    assert not with_clock.out_of_time and with_clock.read == 4000 + 400 * 5
    _same_as_by_matches(with_clock, _by_matches(text, wanted, deadline=deadline))
    capped = parse(text, wanted, max_samples=100)
    assert capped.over_limit
    _same_as_by_matches(capped, _by_matches(text, wanted, max_samples=100))


# read_known remembers what heads gave for a key (kvops/exposition/_linescan.c, Memo).
def test_read_known_reads_a_key_it_remembers_after_heads_forgot_it(monkeypatch):
    heads: dict = {}
    monkeypatch.setattr(exposition_parser, "_HEADS", heads)
    wanted = frozenset(WANTED)
    text = _many_series(200)
    parse(text, wanted)
    finder = exposition_parser._found_lines(wanted)[1]
    first: dict = {}
    assert finder.read_known(text, heads, first) is not None
    heads.clear()  # parser._HEADS starts over when full; the finder still knows each key's labels
    again: dict = {}
    assert finder.read_known(text, heads, again) is not None
    assert repr(again) == repr(first)
    for _, labels_and_values in again.items():
        for labels, _ in labels_and_values:
            labels["model_name"] = "changed"  # each sample's labels are its own copy
    third: dict = {}
    assert finder.read_known(text, heads, third) is not None and repr(third) == repr(first)


def test_read_known_forgets_what_another_heads_gave():
    wanted = frozenset(WANTED)
    finder = _finder(wanted)
    line = 'vllm:num_requests_running{engine="0"} 2\n'
    key = line.rsplit(" ", 1)[0]
    one = {key: ("vllm:num_requests_running", {"engine": "0"})}
    other = {key: ("vllm:num_requests_running", {"engine": "other"})}
    read: dict = {}
    assert finder.read_known(line, one, read) is not None
    assert read == {"vllm:num_requests_running": [({"engine": "0"}, 2.0)]}
    read = {}
    assert finder.read_known(line, other, read) is not None
    assert read == {"vllm:num_requests_running": [({"engine": "other"}, 2.0)]}
    assert finder.read_known(line, {}, {}) is None  # nothing remembered from the others


def test_read_known_tells_apart_keys_that_differ_only_past_latin_1():
    """A wider character is NUL in the C reader's bytes: two keys differing only there must
    not be taken for one another."""
    wanted = frozenset(WANTED)
    finder = _finder(wanted)
    keys = [f'vllm:num_requests_running{{model_name="m{dash}"}}' for dash in ("\u2014", "\u2013")]
    heads = {k: ("vllm:num_requests_running", {"model_name": k[-3]}) for k in keys}
    text = f"{keys[0]} 1\n{keys[1]} 2\n"
    for _ in range(2):
        read: dict = {}
        assert finder.read_known(text, heads, read) is not None
        assert read == {"vllm:num_requests_running": [({"model_name": "m\u2014"[-1]}, 1.0),
                                                      ({"model_name": "m\u2013"[-1]}, 2.0)]}  # fmt: skip


def test_read_known_reads_more_label_sets_than_it_remembers(monkeypatch):
    monkeypatch.setattr(exposition_parser, "_HEADS", {})
    wanted = frozenset(WANTED)
    text = _many_series(9000)  # 9,000 + 900 * 5 label sets: past the memo's 8,192 entries
    parse(text, wanted)
    for _ in range(2):
        _same_as_by_matches(parse(text, wanted), _by_matches(text, wanted))


def test_read_known_types_a_family_typed_twice_by_its_last_type_line():
    """# TYPE lines read before go into the types in C until the first one that was not; that
    one and those after it are read in Python, in order: the last line's type stands."""
    name = f"vllm:typed_twice_{uuid.uuid4().hex[:8]}"
    wanted = frozenset([name])
    parse(f"# TYPE {name} counter\n{name} 1\n", wanted)  # "counter" now read before
    page = f"# TYPE {name} gauge\n# TYPE {name} counter\n{name} 1\n"
    known = _known(page, wanted)
    assert known is not None and known.types == {name: "counter"}
    with regex_only():
        assert repr(parse(page, wanted)) == repr(known)
    page = f"# TYPE {name} counter\n# TYPE {name} untyped\n{name} 1\n"  # read before, then not
    assert _known(page, wanted).types == {name: "untyped"}


def test_read_known_takes_known_types_and_types_together():
    finder = _finder(frozenset(["a"]))
    with pytest.raises(TypeError):
        finder.read_known("a 1\n", {}, {}, -1, -1, {})
    types: dict[str, str] = {}
    got = finder.read_known(
        "# TYPE a gauge\n# TYPE a counter\na 1\n", {}, {}, -1, -1, {"# TYPE a gauge": ("a", "gauge")}, types
    )
    assert got == (1, False, ["# TYPE a counter"]) and types == {"a": "gauge"}


# Pages of the shape read_known reads whole (it gives up on odd lines, and the generated pages
# above are mostly odd): sample names that are prefixes of one another, wanted or not, in runs
# and interleaved, so that a line passed over for the last unwanted name (a bucket run) is
# never one that only starts with that name.
_PREFIXED_NAMES = st.sampled_from(["vllm:a", "vllm:a_total", "vllm:ab", "vllm:a_b", "vllm:b"])
_USUAL_LINES = st.builds(
    lambda name, labels, value: f"{name}{labels} {value}",
    _PREFIXED_NAMES,
    st.sampled_from(["", '{engine="0"}', '{engine="1",le="+Inf"}']),
    st.sampled_from(["1", "2.5", "0"]),
)


@FUZZ
@given(st.lists(_USUAL_LINES, min_size=1, max_size=20), st.sets(_PREFIXED_NAMES, min_size=1, max_size=3))
def test_read_known_passes_over_a_name_only_where_the_whole_name_is_the_same(lines, names):
    text = "\n".join(lines) + "\n"
    wanted = frozenset(names)
    parse(text, wanted)  # the label sets are known from here on
    known = _known(text, wanted)
    assert known is not None  # read by the C loop, not given up
    with regex_only():
        loop = exposition_parser._read_found(text, wanted, ("vllm:", "lmcache:"), -1, None)
    assert loop is not None and repr(known) == repr(loop)
