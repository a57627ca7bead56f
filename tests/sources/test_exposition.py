"""The parser keeps exactly what prometheus_client would, and survives broken lines."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from reliability.fuzzing import FUZZ

from kvops.engines.registry import WANTED, detect_format
from kvops.exposition import parser as exposition_parser
from kvops.exposition.parser import ParseResult, parse
from support.parser_readers import match_by_match
from support.paths import VLLM_FIXTURES as ROOT_FIXTURES

ALL_FILES = sorted(ROOT_FIXTURES.glob("*/*.prom")) + sorted(ROOT_FIXTURES.glob("pasted/*.txt"))


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def _reference(text: str) -> tuple[dict[tuple[str, tuple[tuple[str, str], ...]], float], set[int]]:
    """prometheus_client's samples of the page, whole, and the lines it rejects: none when it
    reads the page; else (it stops at its first error) each line read alone, and the lines it
    rejects alone. Nothing here depends on what kvops reported."""
    try:
        return _samples(text), set()
    except Exception:  # any failure of the reference: read it line by line
        pass
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    rejected = set()
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            samples.update(_samples(line + "\n"))
        except Exception:  # this line alone is rejected
            rejected.add(number)
    return samples, rejected


def _ours(result, names=None) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (name, tuple(sorted(labels.items()))): value
        for name, samples in result.samples.items()
        if names is None or name in names
        for labels, value in samples
    }


def test_fixture_files_are_present():
    assert len(ALL_FILES) >= 14, ALL_FILES


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_sample_equals_prometheus_client(path: Path):
    text = path.read_text()
    result = parse(text)
    reference, rejected = _reference(text)
    assert _ours(result) == reference
    assert {line for line, _ in result.errors} == rejected


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_wanted_subset_equals_prometheus_client(path: Path):
    text = path.read_text()
    reference, _ = _reference(text)
    subset = parse(text, WANTED)
    expected = {k: v for k, v in reference.items() if k[0] in WANTED}
    assert _ours(subset) == expected
    assert subset.has_prefixed_sample == parse(text).has_prefixed_sample


def test_pasted_excerpts_report_their_broken_last_line_and_keep_the_rest(vllm_fixtures: Path):
    text = (vllm_fixtures / "pasted" / "02_production-stack-318_early-v1-no-engine-label.txt").read_text()
    result = parse(text)
    last = len(text.splitlines())
    assert [line for line, _ in result.errors] == [last]
    assert "without a value" in result.errors[0][1]
    assert result.get("vllm:gpu_cache_usage_perc") == [
        ({"model_name": "Qwen/Qwen2.5-Coder-32B-Instruct"}, 0.0)
    ]


def test_malformed_lines_are_numbered_and_skipped():
    text = "\n".join(
        [
            "# TYPE vllm:num_requests_running gauge",
            'vllm:num_requests_running{model_name="a",engine="0"} 3',
            'vllm:num_requests_running{model_name="b",engine="0" 4',  # unterminated
            'vllm:num_requests_running{model_name="c",engine="0"} four',  # bad value
            'vllm:num_requests_running{model_name="d",engine=0} 5',  # unquoted
            "vllm:num_requests_running",  # truncated
            'vllm:num_requests_running{model_name="e",engine="0"} 6 1700000000000',  # timestamp
        ]
    )
    result = parse(text)
    assert [line for line, _ in result.errors] == [3, 4, 5, 6]
    assert [labels["model_name"] for labels, _ in result.get("vllm:num_requests_running")] == ["a", "e"]


def test_escaped_label_values_match_prometheus_client():
    text = (
        "# TYPE vllm:cache_config_info gauge\n"
        'vllm:cache_config_info{a="quote \\" here",b="back\\\\slash",c="new\\nline",d="x}{,y"} 1.0\n'
    )
    ours = _ours(parse(text))
    assert ours == _reference(text)[0]


def test_special_float_values():
    text = "a_metric 1\nvllm:x +Inf\nvllm:y -Inf\nvllm:z NaN\n"
    result = parse(text)
    assert result.get("vllm:x")[0][1] == math.inf
    assert result.get("vllm:y")[0][1] == -math.inf
    assert math.isnan(result.get("vllm:z")[0][1])


def test_up_needs_a_vllm_or_lmcache_sample():
    assert not parse("python_info 1\n# HELP vllm:x y\n").has_prefixed_sample
    assert not parse("vllm:x{bad} 1\n", wanted=set()).has_prefixed_sample
    assert parse("lmcache:num_hit_tokens_total 1\n", wanted=set()).has_prefixed_sample


def test_a_type_line_read_again_gives_its_type_again_and_a_broken_one_is_reported_again():
    """TYPE lines that read well are kept by their text (_TYPE_LINES); broken ones never are."""
    page = '# TYPE vllm:x gauge\n# TYPE vllm:y bogus\n# TYPE "vllm:z.q" counter\nvllm:x 1\n'
    for _ in range(3):
        for result in (parse(page), parse(page, {"vllm:x", "vllm:y", "vllm:z.q"})):
            assert result.types == {"vllm:x": "gauge", "vllm:z.q": "counter"}
            assert [line for line, _ in result.errors] == [2]
    assert "# TYPE vllm:y bogus" not in exposition_parser._TYPE_LINES


def test_crlf_and_blank_lines():
    result = parse("vllm:a 1\r\n\r\n  \nvllm:b 2\r\n")
    assert result.get("vllm:a") == [({}, 1.0)] and result.get("vllm:b") == [({}, 2.0)]
    assert result.errors == []


# --- the wanted-set fast path against reading every line ----------------------------------


def _every_line(text: str) -> ParseResult:
    return parse(text, WANTED.__contains__)  # a predicate: the line-by-line reader


def _match_by_match(text: str) -> ParseResult:
    with match_by_match():
        return parse(text, WANTED)


def _comparable(result: ParseResult) -> dict[str, list[tuple[dict[str, str], str]]]:
    """Samples with values as repr: NaN equals NaN, -0.0 differs from 0.0."""
    return {name: [(labels, repr(v)) for labels, v in samples] for name, samples in result.samples.items()}


def _same_as_every_line(text: str) -> None:
    fast, slow, by_matches = parse(text, WANTED), _every_line(text), _match_by_match(text)
    assert _comparable(fast) == _comparable(by_matches)
    assert (fast.types, fast.errors, fast.read, fast.has_prefixed_sample) == (
        by_matches.types, by_matches.errors, by_matches.read, by_matches.has_prefixed_sample,
    )  # fmt: skip
    assert _comparable(fast) == _comparable(slow)
    assert fast.has_prefixed_sample == slow.has_prefixed_sample
    known = [_comparable(result.known_only()) for result in (fast, by_matches, slow)]
    assert known[0] == known[1] == known[2]
    assert set(fast.errors) <= set(slow.errors)  # unread families' broken lines go unreported
    assert fast.types.items() <= slow.types.items()
    assert detect_format(fast) == detect_format(slow)


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fast_path_reads_every_fixture_as_reading_every_line_does(path: Path):
    _same_as_every_line(path.read_text())


_LINE_SHAPES = [
    'vllm:num_requests_running{model_name="m",engine="0"} 1',
    "vllm:num_requests_running 2",
    'vllm:num_requests_running{engine="1",model_name="m"} 3 1700000000000',
    'vllm:num_requests_running_x{model_name="m"} 4',  # a longer name that starts like a wanted one
    'vllm:num_requests_running {model_name="m"} 5',  # "{" after a blank: not this name
    "vllm:num_requests_running\t6",
    'vllm:prefix_cache_hits_total{model_name="a\\"b",engine="0"} 7',
    'vllm:prefix_cache_hits_total{model_name="m",engine="0"} seven',
    'vllm:prefix_cache_hits_total{model_name="m" 8',
    'vllm:prefix_cache_hits_created{model_name="m"} 9',
    "vllm:kv_cache_usage_perc",
    'vllm:e2e_request_latency_seconds_bucket{le="1.0"} 10',
    "lmcache:num_hit_tokens_total 11",
    "python_gc_objects_collected_total 12",
    "# TYPE vllm:num_requests_running gauge",
    "# TYPE   vllm:prefix_cache_hits counter",
    "# TYPE vllm:prefix_cache_hits",
    "# TYPE vllm:e2e_request_latency_seconds histogram",
    "# HELP vllm:num_requests_running Number of requests.",
    "#",
    "",
    "\r",
    "  vllm:num_requests_running 13",
    "\tvllm:kv_cache_usage_perc 0.5",
    'vllm:kv_cache_usage_perc{engine="0"} 0.25\r',
    # blanks and tabs between tokens, quoted names, duplicate and reserved labels
    'vllm:num_requests_running\t{engine="0"}\t14',
    'vllm:num_requests_running  { engine = "4" , }  15  \t',
    'vllm:num_requests_running{engine="0",engine="1"} 16',
    'vllm:num_requests_running{__name__="x",engine="5"} 17',
    '{"vllm:num_requests_running",engine="2"} 18',
    '{"vllm:num_requests_running","engine"="3"} 19 1700000000000',
    '{"vllm:other.metric"} 20',
    '{"a","b"} 21',
    'vllm:other_metric{a="b",a="c"} 22',
    'vllm:other_metric{a="b"} 23',
    # values and timestamps Python's float() or int() would take and the format does not
    "vllm:num_requests_running -0",
    'vllm:kv_cache_usage_perc{engine="0"} NaN',
    'vllm:kv_cache_usage_perc{engine="1"} -Inf',
    'vllm:e2e_request_latency_seconds_bucket{le="+Inf"} +Inf',
    "vllm:num_requests_running .5",
    "vllm:num_requests_running 1_000",
    "vllm:num_requests_running \uff11",
    "vllm:num_requests_running 1e309",
    "vllm:num_requests_running +nan",
    "vllm:num_requests_running 24 abc",
    "vllm:num_requests_running 25 1.5e12",
    'vllm:kv_cache_usage_perc{model_name="facebook/opt-1',
    "#\tTYPE\tvllm:num_requests_running\tgauge",
    "# TYPE vllm:num_requests_running bla",
]


@FUZZ
@given(st.lists(st.sampled_from(_LINE_SHAPES), max_size=20), st.booleans())
def test_fast_path_equals_reading_every_line(lines, final_newline):
    _same_as_every_line("\n".join(lines) + ("\n" if final_newline else ""))


# Lines every reader reads without a complaint and that _read_found does not leave to
# _read_matches (indented ones, a quoted name first): pages of them are read by _read_found.
_CLEAN_SHAPES = [
    line
    for line in _LINE_SHAPES
    if not parse(line + "\n").errors and not line.startswith((" ", "\t", "{")) and "\r" not in line
]


@FUZZ
@given(st.lists(st.sampled_from(_CLEAN_SHAPES), max_size=20), st.booleans())
def test_one_findall_reader_reads_clean_pages_as_the_others_do(lines, final_newline):
    text = "\n".join(lines) + ("\n" if final_newline else "")
    read = exposition_parser._read_found(text, frozenset(WANTED), ("vllm:", "lmcache:"), -1, None)
    assert read is not None  # the page was this reader's, not handed on
    _same_as_every_line(text)


# --- the format, where Python's own parsing would read something else (issue 18) ----------


@pytest.mark.parametrize(
    "value",
    [
        "1_000",
        "\uff11",
        "\u0661",
        "1e309",
        "-1e309",
        "+nan",
        "-NaN",
        "0x1p-3",
        "0x10",
        "1e",
        ".",
        "infx",
        "1\x0c",
    ],
)
def test_values_outside_go_float_grammar_are_errors_on_both_readers(value: str):
    text = f"vllm:num_requests_running 1\nvllm:num_requests_running {value}\nvllm:num_requests_running 3\n"
    for result in (parse(text), parse(text, WANTED)):
        assert [v for _, v in result.get("vllm:num_requests_running")] == [1.0, 3.0]
        assert [line for line, _ in result.errors] == [2]


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1.", 1.0), (".5", 0.5), ("-0", 0.0), ("1E3", 1000.0), ("+Inf", math.inf), ("-infinity", -math.inf),
     ("1e-400", 0.0), ("00012", 12.0)],
)  # fmt: skip
def test_values_in_go_float_grammar_are_read(value: str, expected: float):
    for result in (parse(f"vllm:x {value}\n"), parse(f"vllm:x {value}\n", {"vllm:x"})):
        assert result.get("vllm:x") == [({}, expected)] and result.errors == []


@pytest.mark.parametrize(
    "stamp", ["abc", "2.72", "1.5e12", "9223372036854775808", "1_0", "\uff11", "9" * 5000]
)
def test_bad_timestamps_are_errors(stamp: str):
    text = f"vllm:x 1 {stamp}\nvllm:x 2 -9223372036854775808\n"
    for result in (parse(text), parse(text, {"vllm:x"})):
        assert result.get("vllm:x") == [({}, 2.0)]
        assert [line for line, _ in result.errors] == [1]


def test_duplicate_and_reserved_labels_are_errors_not_another_engine():
    text = (
        'vllm:num_requests_running{engine="0",engine="1"} 3\n'
        'vllm:num_requests_running{__name__="vllm:x",engine="2"} 4\n'
        'vllm:num_requests_running{"engine"="3",engine="4"} 5\n'
        'vllm:num_requests_running{engine="5"} 6\n'
    )
    for result in (parse(text), parse(text, WANTED)):
        assert result.get("vllm:num_requests_running") == [({"engine": "5"}, 6.0)]
        assert [line for line, _ in result.errors] == [1, 2, 3]


def test_blanks_between_tokens_keep_up_on_both_readers():
    text = 'vllm:num_requests_running\t3\nvllm:kv_cache_usage_perc {engine="0"}  0.5 \n'
    for result in (parse(text), parse(text, WANTED), parse("  " + text)):
        assert result.get("vllm:num_requests_running") == [({}, 3.0)]
        assert result.get("vllm:kv_cache_usage_perc") == [({"engine": "0"}, 0.5)]
        assert result.has_prefixed_sample and result.errors == []


def test_quoted_utf8_names():
    text = '{"vllm:num_requests_running",engine="0"} 3\nvllm:kv_cache_usage_perc{"dotted.label"="x"} 0.5\n'
    for result in (parse(text), parse(text, WANTED)):
        assert result.get("vllm:num_requests_running") == [({"engine": "0"}, 3.0)]
        assert result.get("vllm:kv_cache_usage_perc") == [({"dotted.label": "x"}, 0.5)]


def test_page_cut_inside_a_label_set_is_reported_by_both_readers():
    text = 'vllm:num_requests_running 3\nvllm:e2e_request_latency_seconds_bucket{model_name="facebook/opt-1'
    for result in (parse(text), parse(text, WANTED), parse(text, set())):
        assert [line for line, _ in result.errors] == [2], result.errors
        assert "not closed" in result.errors[0][1]


def test_up_is_decided_alike_when_every_line_is_read():
    # An indented line sends the fast path to the line-by-line reader: a broken line of a
    # counted family before a good one must not lose "up" there either.
    text = ' # indented comment\nvllm:other{a=} 1\nvllm:other{a="b"} 2\n'
    assert parse(text, WANTED).has_prefixed_sample
    assert parse(text.lstrip(), WANTED).has_prefixed_sample
    assert parse(text).has_prefixed_sample


def test_hostile_lines_cost_linear_time():
    import time

    pages = [
        'vllm:x{a="b"' + " " * 200_000,
        "vllm:x{" + 'a="b",' * 40_000 + "a",
        'vllm:x{a="' + "\\x" * 100_000,
        "vllm:x " + " \t" * 100_000 + "1 2 3",
    ]
    for page in pages:
        start = time.perf_counter()
        for result in (parse(page), parse(page, WANTED)):
            assert result.errors and not result.samples
        assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize(("broken", "up"), [(998, True), (999, True), (1000, False)])
def test_up_tries_a_bounded_number_of_unwanted_lines_alike_on_both_readers(broken: int, up: bool):
    page = "vllm:other{a=} 1\n" * broken + 'vllm:other{a="b"} 2\n'
    assert parse(page, WANTED).has_prefixed_sample is up
    assert parse(" " + page, WANTED).has_prefixed_sample is up  # the line-by-line reader
    assert parse(page, WANTED.__contains__).has_prefixed_sample is up
    assert parse(page).has_prefixed_sample  # every line read: the good one is kept


def test_a_page_of_broken_counted_lines_costs_a_scan_not_a_parse_per_line():
    import time

    page = "vllm:other{a=} 1\n" * 200_000
    start = time.perf_counter()
    for result in (parse(page, WANTED), parse(" " + page, WANTED)):
        assert not result.has_prefixed_sample
    assert time.perf_counter() - start < 2.0
