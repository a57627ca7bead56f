"""The simulator's numbers are finite and in range where they enter (issue 41, low items).

`--rate inf` made every session arrive at time 0 (a queue that grew without end), `--rate nan`
and `--duration nan` were accepted, `--length nan` was a traceback, and `--kv-offloading-size
nan` was served, after which every /metrics failed. Each is now one line, exit 2, at the flag."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from kvops.cli import main
from kvops.errors import UsageError
from kvops.sim import limits
from kvops.sim.server import build_engine


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rate", "inf"], "argument --rate: inf: expected a multiplier above 0 and at most 100"),
        (["--rate", "nan"], "argument --rate: nan: expected a multiplier"),
        (["--rate", "1e9"], "argument --rate: 1e+09: expected a multiplier"),
        (["--rate", "0"], "argument --rate: 0: expected a multiplier"),
        (["--length", "nan"], "argument --length: nan: expected a multiplier"),
        (["--length=-inf"], "argument --length: -inf: expected a multiplier"),
        (["--kv-offloading-size", "nan"], "argument --kv-offloading-size: nan: expected a size in GiB"),
        (["--kv-offloading-size", "1e300"], "from 0 to 1048576 (1 PiB), or 'none'"),
        (["--kv-offloading-size", "inf"], "argument --kv-offloading-size: inf"),
        (["--what-if", "--duration", "nan"], "argument --duration: nan: expected simulated seconds"),
        (["--what-if", "--duration", "1e12"], "at most 86400"),
        (["--what-if", "--sizes", "0,nan"], "--sizes nan: expected a number in [0, 1048576]"),
        (["--what-if", "--sizes", "16,1e300"], "--sizes 1e+300: expected a number in [0, 1048576]"),
    ],
)
def test_a_bad_number_is_refused_at_the_flag(capsys, argv, message):
    try:
        code = main(["sim", "--listen", "127.0.0.1:0", *argv])
    except SystemExit as exit_:  # argparse's own exit, as the kvops script gets it
        code = exit_.code
    assert code == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize(
    ("options", "flag"),
    [
        ({"rate": math.inf}, "--rate"),
        ({"rate": math.nan}, "--rate"),
        ({"length": math.nan}, "--length"),
        ({"kv_offloading_size_gib": math.nan}, "--kv-offloading-size"),
        ({"kv_offloading_size_gib": 1e300}, "--kv-offloading-size"),
    ],
)
def test_the_engine_refuses_what_the_flags_refuse(options, flag):
    """kvops demo and --what-if build engines without the flags' parsing in between."""
    with pytest.raises(UsageError, match=f"^{flag} "):
        build_engine(workload="chat", **options)


def test_the_limits_themselves_are_served():
    engine = build_engine(workload="bursty", rate=limits.MAX_RATE, length=1.0,
                          kv_offloading_size_gib=limits.MAX_OFFLOAD_GIB)  # fmt: skip
    engine.advance_to(2.0)
    assert engine.counters.steps > 0 and len(engine.waiting) < 10_000


def test_nan_offload_size_no_longer_reaches_a_server():
    """Before: the simulator started and every /metrics answered 500."""
    proc = subprocess.run(
        [sys.executable, "-m", "kvops.cli", "sim", "--listen", "127.0.0.1:0", "--kv-offloading-size", "nan"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "serving" not in proc.stderr
