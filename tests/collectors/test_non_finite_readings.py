"""Readings a collector turns into numbers: NaN, ±Inf and 1e400 are unknown (None or left out),
-0 is 0 (issue 25 item 1). `float()` takes "nan" and "inf", and an int field (PCIe width, a
parent pid) raised on them."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvops.collectors.amd import _num
from kvops.collectors.host import read_meminfo
from kvops.collectors.procs import read_status

SPELLED = ["nan", "NaN", "inf", "-inf", "+Infinity", "1e400"]


@given(st.sampled_from([math.nan, math.inf, -math.inf, float("1e400")]))
def test_amdsmi_values_that_are_not_finite_are_unknown(value: float):
    assert _num(value) is None


def test_amdsmi_minus_zero_is_zero():
    assert math.copysign(1, _num(-0.0)) > 0  # type: ignore[arg-type]


@pytest.mark.parametrize("spelled", SPELLED)
def test_proc_files_with_non_finite_numbers_are_read_as_unknown(tmp_path: Path, spelled: str):
    (tmp_path / "proc" / "7").mkdir(parents=True)
    (tmp_path / "proc" / "meminfo").write_text(f"MemTotal: {spelled} kB\nMemFree: 100 kB\n")
    (tmp_path / "proc" / "7" / "status").write_text(
        f"PPid:\t{spelled}\nRssAnon:\t{spelled} kB\nVmLck:\t4 kB\n"
    )
    assert read_meminfo(str(tmp_path)) == {"MemFree": 100 * 1024}
    assert read_status(7, str(tmp_path)) == {"VmLck": 4 * 1024}
