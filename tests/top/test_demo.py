"""`kvops demo`: the simulator and kvops top on it."""

from __future__ import annotations

import json
import subprocess
import sys

from kvops.cli import main
from kvops.rates import SCHEMA_VERSION


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
    assert 0 <= row["local_hit_rate"] <= 1  # the simulated workload looks prefixes up
    assert doc["interval_seconds"] >= 0.5
    assert doc["schema_version"] == SCHEMA_VERSION == 3
    # The simulator's host and GPU, not this machine's: a simulated tier against real RAM
    # would flag a problem that is not there.
    assert doc["host"]["memory_total_bytes"] == 512 * 2**30
    [gpu] = doc["gpus"]
    assert gpu["pcie_link_max_bytes_per_second"] == 63e9 and gpu["pcie_transmit_bytes_per_second"] >= 0


def test_demo_bad_input_is_one_line_and_exit_2(capsys):
    for argv, message in ((["--interval", "-3"], "positive"), (["--json"], "--json goes with --once")):
        assert main(["demo", *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err


def test_the_demo_workload_reaches_a_steady_state_that_offloads():
    """The demo's parameters, run for 15 simulated minutes: the queue stays bounded and the
    offload tier is hit (the engine is kvops/sim's, offline)."""
    from kvops import demo
    from kvops.sim.server import build_engine

    engine = build_engine(
        workload=demo.DEMO_WORKLOAD, rate=demo.DEMO_RATE, num_gpu_blocks=demo.DEMO_GPU_BLOCKS
    )
    most_waiting = 0
    for t in range(5, 901, 5):
        engine.advance_to(float(t))
        most_waiting = max(most_waiting, len(engine.waiting))
    c = engine.counters
    assert most_waiting <= 10  # the rag preset at full rate had 250 waiting at 180 s
    assert c.external_hits / c.external_queries > 0.5 and c.load_bytes > 0


def test_demo_gpu_and_host_are_the_simulators_and_say_so():
    proc = subprocess.run(
        [sys.executable, "-m", "kvops.cli", "demo", "--once", "--interval", "0.5"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (
        "Simulated GPU 0" in proc.stdout
        and "Simulated host: RAM available 424.0 GiB of 512.0 GiB" in proc.stdout
    )
