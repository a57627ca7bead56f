"""The benchmarks whose figures the README quotes run end to end, small (a renamed key in a
report line once broke top_cpu.py after its numbers were taken; no other test ran it)."""

from __future__ import annotations

import subprocess
import sys

from support.paths import ROOT


def run(script: str, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_exporter_scrape_runs_and_reports_every_exporter():
    out = run("exporter_scrape.py", "--targets", "2", "--gpus", "1", "--scrapes", "3", "--floor")
    assert "2 simulated vLLM targets (2 up), 1 stub GPUs, 3 scrapes each" in out, out
    assert "C line finder, bucket grouping, line joiner built" in out, out
    for name in ("kvops", "naive", "floor"):
        assert any(line.startswith(name) for line in out.splitlines()), out
    assert "naive/kvops: p50" in out and "naive/floor:" in out, out


def test_top_cpu_runs_and_reports_its_window():
    out = run("top_cpu.py", "--targets", "2", "--seconds", "3")
    assert "kvops top (kvops; C line finder, bucket grouping, line joiner built), 2 targets" in out, out
    assert "CPU:" in out and "UI thread (Textual):" in out and "time to first frame" in out, out


def test_top_cpu_alternates_windows_with_a_before_tree():
    out = run("top_cpu.py", "--targets", "2", "--seconds", "2", "--before", str(ROOT), "--rounds", "2")
    assert out.count("x2 (alternating, each alone)") == 2, out
    assert "each window:" in out and "before / kvops:" in out, out


def test_round_cold_measures_each_piece_warm_and_cold_in_both_trees():
    out = run("round_cold.py", "--targets", "2", "--calls", "2", "--before", str(ROOT), "--pairs", "2")
    assert "kvops: C line finder, bucket grouping, line joiner built" in out, out
    pieces = ("parse", "readers", "write")
    rows = [line.split() for line in out.splitlines() if line.split()[:1] and line.split()[0] in pieces]
    assert [(r[0], r[1]) for r in rows] == [(p, t) for p in pieces for t in ("kvops", "before")]
    for row in rows:  # warm, cold, then each pair's cold figure
        assert len(row) == 6 and all(float(x) > 0 for x in row[2:]), row


def test_round_cold_says_in_one_line_why_a_checkout_could_not_be_measured(tmp_path):
    (tmp_path / "kvops").mkdir()
    (tmp_path / "kvops" / "cli.py").write_text("")
    (tmp_path / "kvops" / "__init__.py").write_text("")  # a kvops with none of what is measured
    script = str(ROOT / "benchmarks" / "round_cold.py")
    proc = subprocess.run(
        [sys.executable, script, "--before", str(tmp_path), "--calls", "1"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"round_cold.py: measuring {tmp_path}: "), lines
    assert "Traceback" not in proc.stderr
