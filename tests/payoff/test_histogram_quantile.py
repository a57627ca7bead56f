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
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from kvops.rates import quantile
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
