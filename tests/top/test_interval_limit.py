"""`kvops top --interval` has a stated maximum (issue 41, low item): `--interval 1e10` reached
time.sleep() and overflowed; it is one line and exit 2 now."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kvops.top.command import MAX_INTERVAL

from .helpers import T1, T2


@pytest.mark.parametrize("value", ["1e10", "3600.5", "1e308"])
def test_an_interval_above_the_maximum_is_refused_in_one_line(value):
    proc = subprocess.run(
        [sys.executable, "-m", "kvops.cli", "top", "--once", "--interval", value, "http://127.0.0.1:1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr == f"kvops top: error: --interval '{value}': at most 3600 seconds (one hour)\n"


def test_the_maximum_itself_is_accepted():
    assert MAX_INTERVAL == 3600.0
    proc = subprocess.run(
        [sys.executable, "-m", "kvops.cli", "top", "--once", "--json", "--interval", "3600",
         "--replay", str(T1), str(T2)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
