"""The ranges the simulator's numeric options are held to, checked where each enters.

A NaN passed every `x <= 0` test, `--rate inf` made every session arrive at time 0 (a queue that
grows without end), and `--kv-offloading-size nan` made every /metrics render fail; so each
option is a finite number inside a stated range, refused with one line otherwise.
"""

from __future__ import annotations

import math

from kvops.errors import UsageError

MAX_RATE = 100.0  # × the preset's arrival rate: rag at 100× is 300 sessions/s, far past a GPU's pace
MAX_LENGTH = 100.0  # × the preset's token lengths: longer prompts than any max_model_len
MAX_OFFLOAD_GIB = 1024.0 * 1024.0  # 1 PiB: beyond any host's memory
MAX_DURATION_S = 86_400.0  # simulated seconds per --what-if size: one day


def in_range(flag: str, value: float, low: float, high: float, low_included: bool = False) -> float:
    """`value` when it is a finite number in (low, high] ([low, high] with `low_included`),
    else UsageError naming the flag and the range."""
    inside = math.isfinite(value) and (low <= value if low_included else low < value) and value <= high
    if not inside:
        bracket = "[" if low_included else "("
        raise UsageError(f"{flag} {value:g}: expected a number in {bracket}{low:.15g}, {high:.15g}]")
    return value


def offload_size(flag: str, value: float | None) -> float | None:
    """A CPU tier size in GiB (None: no offloading) in [0, MAX_OFFLOAD_GIB]."""
    return None if value is None else in_range(flag, value, 0.0, MAX_OFFLOAD_GIB, low_included=True)
