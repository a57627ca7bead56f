"""TTFT and queue-time quantiles over an interval equal real Prometheus's histogram_quantile().

Prometheus itself is the reference: promtool evaluates `histogram_quantile(q, b - b offset 1m)`
over the bucket series of two pages (read with prometheus_client's parser, not kvops's): pages
vLLM 0.33's metrics code wrote, and pages a real vLLM 0.32.0 server served, and the
expected value it checks is what `kvops top --once --json --replay` printed for the same pages.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from kvops.rates import quantile, quantiles
from kvops.snapshot import Histogram

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REAL = FIXTURES / "vllm-real" / "0.32.0"  # pages a real vLLM 0.32.0 server served (its README)
PAIR_SETS = {
    "0.33 metrics code": [FIXTURES / "vllm/0.33.0/offload-t1.prom", FIXTURES / "vllm/0.33.0/offload-t2.prom"],
    "real 0.32.0 offload": [REAL / "offload-mid.prom", REAL / "offload-after.prom"],
    "real 0.32.0 plain": [REAL / "plain-mid.prom", REAL / "plain-after.prom"],
}
FAMILIES = {"ttft": "vllm:time_to_first_token_seconds", "queue_time": "vllm:request_queue_time_seconds"}


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool not installed (apt-get install prometheus; .ci/run does)")
    return found


def _buckets(page: Path, family: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(page.read_text()):
        for s in fam.samples:
            if s.name == f"{family}_bucket":
                out[s.labels["le"]] = out.get(s.labels["le"], 0.0) + s.value
    return out


def _promtool_check(
    promtool: str, tmp_path: Path, series: dict[str, list[float]], exprs: list[tuple[str, float]]
) -> None:
    """One promtool unit test: the series at 0m and 1m, each expression evaluated at 1m."""
    doc = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": s, "values": " ".join(repr(v) for v in vals)} for s, vals in series.items()
                ],
                "promql_expr_test": [
                    {"expr": expr, "eval_time": "1m", "exp_samples": [{"labels": "{}", "value": value}]}
                    for expr, value in exprs
                ],
            }
        ],
    }
    path = tmp_path / "quantile_test.yml"
    path.write_text(yaml.safe_dump(doc))
    result = subprocess.run(
        [promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("pair", PAIR_SETS, ids=list(PAIR_SETS))
def test_kvops_top_json_quantiles_equal_promtool_histogram_quantile(
    promtool: str, tmp_path: Path, pair: str
) -> None:
    pages = PAIR_SETS[pair]
    out = subprocess.run(
        ["kvops", "top", "--once", "--json", "--replay", *map(str, pages)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    engine = json.loads(out.stdout)["targets"][0]
    series: dict[str, list[float]] = {}
    exprs: list[tuple[str, float]] = []
    for key, family in FAMILIES.items():
        before, after = _buckets(pages[0], family), _buckets(pages[1], family)
        assert after, family
        name = family.replace(":", "_")  # promtool series names: a colon is fine, kept readable
        for le, value in after.items():
            series[f'{name}_bucket{{le="{le}"}}'] = [before.get(le, 0.0), value]
        for q, field in ((0.5, f"{key}_p50_seconds"), (0.9, f"{key}_p90_seconds")):
            assert engine[field] is not None and math.isfinite(engine[field]), field
            exprs.append((f"histogram_quantile({q}, {name}_bucket - {name}_bucket offset 1m)", engine[field]))
    _promtool_check(promtool, tmp_path, series, exprs)


# Bucket shapes where a simpler interpolation goes wrong; promtool gives the expected value.
SHAPES = {
    "rank_in_inf": [(0.1, 1), (0.5, 2), (math.inf, 10)],
    "non_monotonic": [(0.1, 5), (0.5, 3), (1.0, 8), (math.inf, 8)],
    "rank_on_bucket_edge": [(0.1, 0), (0.5, 9), (1.0, 9), (math.inf, 10)],
    "negative_lowest_bound": [(-1.0, 9), (1.0, 10), (math.inf, 10)],
    "all_in_first": [(0.25, 4), (1.0, 4), (math.inf, 4)],
    "float_noise": [(0.1, 3.0), (0.2, 3.0000000000000004), (0.4, 2.9999999999999996), (math.inf, 10)],
}


@pytest.mark.parametrize("q", [0.0, 0.5, 0.9, 0.99, 1.0])
def test_quantile_matches_promtool_on_awkward_buckets(promtool: str, tmp_path: Path, q: float) -> None:
    series: dict[str, list[float]] = {}
    exprs: list[tuple[str, float]] = []
    for shape, buckets in SHAPES.items():
        ours = quantile(q, Histogram(tuple(buckets), 0.0, buckets[-1][1]))
        if ours is None:  # Prometheus: NaN (checked below, promtool cannot compare NaN)
            continue
        for le, count in buckets:
            le_text = "+Inf" if math.isinf(le) else repr(le)
            series[f'h_{shape}_bucket{{le="{le_text}"}}'] = [0.0, float(count)]
        exprs.append((f"histogram_quantile({q}, h_{shape}_bucket - h_{shape}_bucket offset 1m)", ours))
    _promtool_check(promtool, tmp_path, series, exprs)


def test_quantile_unknown_where_prometheus_gives_nan_or_infinity() -> None:
    assert quantile(0.9, None) is None
    assert quantile(0.9, Histogram(((0.5, 0.0), (math.inf, 0.0)), 0.0, 0.0)) is None  # no observations
    assert quantile(0.9, Histogram(((0.5, 1.0), (1.0, 2.0)), 1.0, 2.0)) is None  # no +Inf bucket
    assert quantile(0.9, Histogram(((math.inf, 3.0),), 1.0, 3.0)) is None  # fewer than 2 buckets
    assert quantile(-0.1, Histogram(((0.5, 1.0), (math.inf, 2.0)), 1.0, 2.0)) is None  # -Inf there
    assert quantile(1.5, Histogram(((0.5, 1.0), (math.inf, 2.0)), 1.0, 2.0)) is None  # +Inf there


def _almost_equal(a: float, b: float, epsilon: float) -> bool:
    """util/almost.Equal, line by line."""
    if math.isnan(a) and math.isnan(b):
        return True
    if a == b:
        return True
    abs_sum, diff = abs(a) + abs(b), abs(a - b)
    if a == 0 or b == 0 or abs_sum < sys.float_info.min:
        return diff < epsilon * sys.float_info.min
    return diff / min(abs_sum, sys.float_info.max) < epsilon


def _go_divide(a: float, b: float) -> float:
    """a / b as Go divides floats: by zero gives ±Inf, or NaN for 0/0 (Python raises)."""
    if b != 0 or math.isnan(b):
        return a / b
    if a == 0 or math.isnan(a):
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _bucket_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """promql/quantile.go's BucketQuantile as Prometheus 3 writes it, step by step (sort,
    coalesceBuckets, ensureMonotonicAndIgnoreSmallDeltas, sort.Search): the reference the
    prepared-once path of kvops.rates is compared with. None where Go returns NaN or ±Inf, and
    where the observations are negative or NaN (a number read from them would look known)."""
    if math.isnan(q) or q < 0 or q > 1 or not buckets:
        return None
    ordered = [list(b) for b in sorted(buckets, key=lambda b: b[0])]
    if not (math.isinf(ordered[-1][0]) and ordered[-1][0] > 0):
        return None
    merged: list[list[float]] = [ordered[0]]
    for bound, count in ordered[1:]:
        if bound == merged[-1][0]:
            merged[-1][1] += count
        else:
            merged.append([bound, count])
    prev = merged[0][1]
    for bucket in merged[1:]:
        curr = bucket[1]
        if curr == prev:
            continue
        if _almost_equal(prev, curr, 1e-12):
            bucket[1] = prev
            continue
        if curr < prev:
            bucket[1] = prev
            continue
        prev = curr
    if len(merged) < 2:
        return None
    observations = merged[-1][1]
    if observations == 0:
        return None
    if not observations > 0:  # kvops: unknown; Go reads on and returns the highest finite bound
        return None
    rank = q * observations
    i, j = 0, len(merged) - 1  # sort.Search(len(buckets)-1, count >= rank)
    while i < j:
        h = (i + j) >> 1
        if not merged[h][1] >= rank:
            i = h + 1
        else:
            j = h
    b = i
    if b == len(merged) - 1:
        return merged[-2][0]
    if b == 0 and merged[0][0] <= 0:
        return merged[0][0]
    start, end, count = 0.0, merged[b][0], merged[b][1]
    if b > 0:
        start, count, rank = merged[b - 1][0], count - merged[b - 1][1], rank - merged[b - 1][1]
    value = start + (end - start) * _go_divide(rank, count)
    return value if math.isfinite(value) else None


# Few distinct bounds, so that repeats (merged by bucketQuantile) and +Inf come up often.
_bound = st.one_of(st.sampled_from([0.0, 0.5, 1.0, -1.0, math.inf, math.inf]), st.floats(-10, 100))
_count = st.one_of(
    st.integers(0, 50).map(float), st.floats(0, 50), st.just(3.0000000000000004), st.just(math.nan)
)


@given(
    st.lists(st.tuples(_bound, _count), min_size=1, max_size=12),
    st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.9, 0.99, 1.0, -0.5, 1.5]), min_size=1, max_size=3),
    st.sampled_from(["as pages write them", "sorted, bounds repeated", "any order"]),
)
# A count below the one before it, then one within 1e-12 of the one before that: compared with
# the count kept (5.0), not with the one ignored (3.0), as Prometheus 3 does (2.x compared
# with 3.0 and kept 5.000000000000001).
@example(
    [(0.5, 5.0), (1.0, 3.0), (2.0, 5.000000000000001), (3.0, 10.0), (math.inf, 10.0)], [0.55], "any order"
)
@settings(max_examples=400)
def test_prepared_once_equals_bucket_quantile(buckets, qs, order) -> None:
    """Pages write bounds ascending (the path that merges nothing) but need not: every path,
    and several q from one preparation, give what bucketQuantile gives, NaN and ±Inf as None."""
    if order == "as pages write them":
        buckets = sorted({b: c for b, c in buckets}.items())
    elif order == "sorted, bounds repeated":
        buckets = sorted(buckets, key=lambda b: b[0])
    hist = Histogram(tuple(buckets), 0.0, 0.0)
    expected = [_bucket_quantile(q, buckets) for q in qs]
    assert list(quantiles(hist, *qs)) == expected
    assert [quantile(q, hist) for q in qs] == expected
