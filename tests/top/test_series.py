"""The charts' smoothing: sums of per-interval deltas over a window, divided; bounded rings."""

from __future__ import annotations

import pytest

from kvops.top.series import Ring, Trend


def test_ring_keeps_the_last_values_in_order_and_unknowns():
    ring = Ring(3)
    for v in (1.0, None, 3.0, 4.0):
        ring.append(v)
    assert ring.values() == [None, 3.0, 4.0] and len(ring) == 3


def test_smoothed_hit_rate_is_hits_over_lookups_in_the_window_not_a_mean_of_ratios():
    trend = Trend()
    # 1 s frames: (hits, lookups) = (0, 10), (90, 100), (5, 10)
    for t, (hits, queries) in enumerate([(0, 10), (90, 100), (5, 10)], start=1):
        trend.append(float(t), 1.0, {"local_hits": hits, "local_queries": queries})
    raw = [v for _, v in trend.smoothed("local_hits", "local_queries", 1.0)]
    assert raw == pytest.approx([0.0, 0.9, 0.5])  # a 1 s window: each frame's own figure
    ten = [v for _, v in trend.smoothed("local_hits", "local_queries", 10.0)]
    assert ten == pytest.approx([0.0, 90 / 110, 95 / 120])  # not (0 + 0.9 + 0.5) / 3
    two = [v for _, v in trend.smoothed("local_hits", "local_queries", 2.0)]
    assert two == pytest.approx([0.0, 90 / 110, 95 / 110])  # the first frame left the window


def test_per_second_figures_divide_by_the_intervals_and_unknown_frames_are_gaps():
    trend = Trend()
    trend.append(0.0, None, None)  # the first frame: no interval
    trend.append(2.0, 2.0, {"store_bytes": 400.0})
    trend.append(3.0, 1.0, None)  # the target was down
    trend.append(4.0, 1.0, {"store_bytes": 100.0})
    points = trend.smoothed("store_bytes", None, 1.0)
    assert [v for _, v in points] == [None, 200.0, None, 100.0]
    assert [v for _, v in trend.smoothed("store_bytes", None, 60.0)] == [None, 200.0, 200.0, 500 / 3]
