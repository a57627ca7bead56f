"""`kvops demo`: the simulator and kvops top on it."""

from __future__ import annotations

import json
import subprocess
import sys

from kvops.cli import main


def test_demo_once_json_shows_the_simulated_vllm_up_with_figures():
    proc = subprocess.run(
        [sys.executable, "-m", "kvops.cli", "demo", "--once", "--json", "--interval", "0.5"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    [row] = doc["targets"]
    assert row["up"] is True and row["target"].startswith("http://127.0.0.1:")
    assert row["model_name"] and 0 <= row["kv_cache_usage"] <= 1
    assert 0 <= row["local_hit_rate"] <= 1  # the simulated chat workload looks prefixes up
    assert doc["interval_seconds"] >= 0.5
    assert doc["host"]["memory_total_bytes"] > 0  # this machine's host collector runs beside it


def test_demo_bad_input_is_one_line_and_exit_2(capsys):
    for argv, message in ((["--interval", "-3"], "positive"), (["--json"], "--json goes with --once")):
        assert main(["demo", *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err
