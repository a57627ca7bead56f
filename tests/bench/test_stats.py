from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvops.bench.stats import summarise


def test_bandwidth_per_repeat_then_median_and_quartiles() -> None:
    # 1e9 bytes in 0.5, 1, 2, 4 s -> 2, 1, 0.5, 0.25 GB/s.
    s = summarise(10**9, [0.5, 1.0, 2.0, 4.0])
    assert s.repeats == 4
    assert s.min == pytest.approx(0.25e9)
    assert s.max == pytest.approx(2e9)
    # Median of the rates, (0.5 + 1) / 2 GB/s, not bytes / median seconds (= 0.667 GB/s).
    assert s.median == pytest.approx(0.75e9)
    # Inclusive quartiles: positions 0.75 and 2.25 of the sorted rates [0.25, 0.5, 1, 2].
    assert s.p25 == pytest.approx(0.4375e9)
    assert s.p75 == pytest.approx(1.25e9)
    assert s.spread == pytest.approx((1.25 - 0.4375) / 0.75)


def test_one_repeat_has_no_spread() -> None:
    s = summarise(2 * 2**20, [100e-6])
    assert s.median == s.min == s.max == s.p25 == s.p75 == pytest.approx(2 * 2**20 / 100e-6)
    assert s.spread == 0.0


def test_identical_repeats_give_the_exact_rate() -> None:
    s = summarise(2 * 2**20, [100e-6] * 5)
    assert s.median == pytest.approx(20.97152e9)


@pytest.mark.parametrize("seconds", [[], [0.0], [1.0, -1.0]])
def test_unusable_timings_are_refused(seconds: list[float]) -> None:
    with pytest.raises(ValueError):
        summarise(1024, seconds)


@given(st.lists(st.floats(min_value=1e-7, max_value=10.0), min_size=1, max_size=50))
def test_order_statistics_are_ordered(seconds: list[float]) -> None:
    s = summarise(2**21, seconds)
    rel = 1e-9 * s.max
    assert s.min - rel <= s.p25 <= s.median + rel
    assert s.median - rel <= s.p75 <= s.max + rel
    assert s.repeats == len(seconds)
