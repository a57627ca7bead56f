"""dashboards/generate.py: the committed JSON is what it generates, and --check catches a
stale file, a stray file, a metric the exporter does not define and a label it does not carry."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "dashboards"


def check_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(DASHBOARDS / "generate.py"), *argv], capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def copy_dir(tmp_path: Path) -> Path:
    for path in DASHBOARDS.glob("*.json"):
        shutil.copy(path, tmp_path / path.name)
    return tmp_path


def test_committed_dashboards_are_current() -> None:
    result = check_cli("--check")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_check_fails_on_a_stale_file(copy_dir: Path) -> None:
    path = copy_dir / "kvops-offload-overview.json"
    model = json.loads(path.read_text())
    model["panels"][1]["title"] = "edited by hand"
    path.write_text(json.dumps(model, indent=2) + "\n")
    result = check_cli("--check", "--out", str(copy_dir))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "generate.py --check: kvops-offload-overview.json: stale; run python dashboards/generate.py"
    )


def test_check_fails_on_a_missing_and_a_stray_file(copy_dir: Path) -> None:
    (copy_dir / "kvops-gpu-host-memory.json").unlink()
    (copy_dir / "hand-made.json").write_text("{}\n")
    result = check_cli("--check", "--out", str(copy_dir))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2
    assert "kvops-gpu-host-memory.json: missing" in lines[0]
    assert "hand-made.json: not produced by generate.py" in lines[1]


def test_generate_writes_what_check_accepts(tmp_path: Path) -> None:
    assert check_cli("--out", str(tmp_path)).returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in DASHBOARDS.glob("*.json"))
    assert check_cli("--check", "--out", str(tmp_path)).returncode == 0


def test_bad_out_directory_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = check_cli("--out", str(tmp_path / "nope"))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_check_names_a_panel_that_queries_an_undefined_metric(generator: ModuleType, tmp_path: Path) -> None:
    built = generator.build()
    for name, model in built.items():
        (tmp_path / name).write_text(generator.render(model))
    broken = copy.deepcopy(built)
    panel = next(p for p in broken["kvops-offload-overview.json"]["panels"] if p["type"] != "row")
    panel["targets"][0]["expr"] = 'rate(kvops_offload_bytes_total{instance=~"$instance"}[$__rate_interval])'
    problems = generator.check(tmp_path, broken, generator.recording_rules())
    assert (
        f"kvops-offload-overview.json: panel {panel['title']!r}: unknown metric 'kvops_offload_bytes_total'"
        in (problems)
    )


def test_check_names_a_label_the_metric_does_not_carry(generator: ModuleType) -> None:
    recorded = generator.recording_rules()
    assert generator.unknown_names('kvops_host_shm_free_bytes{instance="a"}', recorded) == []
    assert generator.unknown_names('kvops_host_shm_free_bytes{model_name="m"}', recorded) == [
        "kvops_host_shm_free_bytes has no label 'model_name'"
    ]


def test_recording_rule_names_come_from_the_rule_files(generator: ModuleType) -> None:
    recorded = generator.recording_rules()
    assert "kvops:prefix_cache_hit_ratio:rate5m" in recorded
    assert generator.unknown_names("kvops:not_recorded:rate5m", recorded) == [
        "unknown metric 'kvops:not_recorded:rate5m'"
    ]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ('rate(a_total{x="y", z=~"$v"}[$__rate_interval])', {"a_total"}),
        ("rate(a_total[5m]) / ignoring (direction) rate(b_total[5m])", {"a_total", "b_total"}),
        ("min by (job, instance, target) (a * on (gpu, uuid) group_left () b)", {"a", "b"}),
        ("kvops:x:rate5m < 0.5 and rate(q[5m]) > 0", {"kvops:x:rate5m", "q"}),
        ('sum without (le) (c{s="rate(not_a_metric)"}) or vector(1e10)', {"c"}),
        ("max_over_time(up[1d]) == 1 offset 5m", {"up"}),
        ("histogram_quantile(0.9, rate(h_bucket[5m:1m]))", {"h_bucket"}),
    ],
)
def test_metric_names_reads_what_an_expression_selects(
    generator: ModuleType, expr: str, expected: set[str]
) -> None:
    assert generator.metric_names(expr) == expected
