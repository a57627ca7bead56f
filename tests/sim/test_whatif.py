"""What-if sizing: same seeded workload per CPU buffer size."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kvops.errors import UsageError
from kvops.sim import whatif
from kvops.sim.workload import PRESETS

SIZES = [0.0, 16.0, 64.0, 128.0]


@pytest.mark.slow
@pytest.mark.parametrize("workload", sorted(PRESETS))
def test_curve_is_monotone_in_buffer_size(workload: str) -> None:
    results = whatif.run(SIZES, duration=120.0, seed=0, workload=workload)
    rates = [r.external_hit_rate or 0.0 for r in results]
    saved = [r.prefill_tokens_saved for r in results]
    assert rates[0] == 0.0 and saved[0] == 0  # 0 GiB: nothing can come back from the CPU
    assert rates == sorted(rates), rates
    assert saved == sorted(saved), saved
    assert saved[-1] > 0, "the largest buffer never helped: the preset does not exercise offload"
    for r in results[1:]:
        assert r.bytes_moved == r.bytes_stored + r.bytes_loaded > 0


def test_same_inputs_same_answer() -> None:
    a = whatif.run([32.0], duration=20.0, seed=5, workload="chat")[0]
    b = whatif.run([32.0], duration=20.0, seed=5, workload="chat")[0]
    a.wall_seconds = b.wall_seconds = 0.0
    assert a == b


@pytest.mark.parametrize("text", ["", "a", "1,-2", "1,,x"])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(UsageError):
        whatif.parse_sizes(text)


def test_command_json_and_table() -> None:
    cmd = [sys.executable, "-m", "kvops.cli", "sim", "--what-if", "--sizes", "0,64", "--duration", "10"]
    out = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=120, check=True)
    data = json.loads(out.stdout)  # --json: only JSON on stdout
    assert data["simulated"] is True
    assert [r["size_gib"] for r in data["results"]] == [0.0, 64.0]
    assert data["results"][0]["prefill_tokens_saved"] == 0
    table = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    assert "external hit rate by CPU buffer size" in table
    assert "simulated" in table.splitlines()[0]
