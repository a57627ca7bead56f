"""The parser keeps exactly what prometheus_client would, and survives broken lines."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from reliability.fuzzing import FUZZ

from kvops.sources.exposition import ParseResult, parse
from kvops.sources.vllm import WANTED, detect_format
from support.paths import VLLM_FIXTURES as ROOT_FIXTURES

ALL_FILES = sorted(ROOT_FIXTURES.glob("*/*.prom")) + sorted(ROOT_FIXTURES.glob("pasted/*.txt"))


def _reference(text: str, skip_lines: set[int]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    kept = "\n".join(line for i, line in enumerate(text.splitlines(), 1) if i not in skip_lines)
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(kept)
        for s in fam.samples
    }


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
    reference = _reference(text, {line for line, _ in result.errors})
    assert _ours(result) == reference


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_wanted_subset_equals_prometheus_client(path: Path):
    text = path.read_text()
    full = parse(text)
    reference = _reference(text, {line for line, _ in full.errors})
    subset = parse(text, WANTED)
    expected = {k: v for k, v in reference.items() if k[0] in WANTED}
    assert _ours(subset) == expected
    assert subset.has_prefixed_sample == full.has_prefixed_sample


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
    assert ours == _reference(text, set())


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


def test_crlf_and_blank_lines():
    result = parse("vllm:a 1\r\n\r\n  \nvllm:b 2\r\n")
    assert result.get("vllm:a") == [({}, 1.0)] and result.get("vllm:b") == [({}, 2.0)]
    assert result.errors == []


# --- the wanted-set fast path against reading every line ----------------------------------


def _every_line(text: str) -> ParseResult:
    return parse(text, WANTED.__contains__)  # a predicate: the line-by-line reader


def _same_as_every_line(text: str) -> None:
    fast, slow = parse(text, WANTED), _every_line(text)
    assert fast.samples == slow.samples
    assert fast.has_prefixed_sample == slow.has_prefixed_sample
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
]


@FUZZ
@given(st.lists(st.sampled_from(_LINE_SHAPES), max_size=20), st.booleans())
def test_fast_path_equals_reading_every_line(lines, final_newline):
    _same_as_every_line("\n".join(lines) + ("\n" if final_newline else ""))
