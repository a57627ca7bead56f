"""The charts' smoothing: sums of per-interval deltas over a window, divided; bounded rings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvops.snapshot import EngineSample, Snapshot, TargetSample
from kvops.top import numbers as units
from kvops.top.board import Board
from kvops.top.charts import CHARTS, series, span_for
from kvops.top.history import Ring, Trend


def _engine(store_bytes: float) -> TargetSample:
    engine = EngineSample(target="a", model_name="m", store_bytes=store_bytes, store_seconds=1.0,
                          local_hits=0.0, local_queries=0.0)  # fmt: skip
    return TargetSample("a", up=True, engines=[engine])


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


# A Unix time (`--prometheus` frames carry the store's evaluation time) and a monotonic()
# clock on a host up 200 days (the live view): a float32 holds them to 128 s and 2 s.
CLOCKS = {"prometheus": 1795674501.3, "live": 200 * 86400 + 0.3}


@pytest.mark.parametrize("mode", list(CLOCKS))
def test_a_minute_of_frames_draws_a_minute_of_chart(mode: str):
    """Issue 25 item 8: after 90 s of `top --prometheus` every chart was one stroke at "now"."""
    start = CLOCKS[mode]
    board = Board()
    for i in range(61):  # a frame a second for a minute, as the source stamps them
        t = start + i
        snap = Snapshot(time=t, targets=[_engine(store_bytes=1000.0 * i * (i + 1) / 2)])
        if mode == "prometheus":  # the store hands over both ends of each interval
            before = Snapshot(time=t - 1, targets=[_engine(store_bytes=1000.0 * (i - 1) * i / 2)])
            board.update(snap, before=before)
        else:
            board.update(snap)
    stored = CHARTS[1].lines[0]
    points = series(board.fleet, stored, 1.0, span_for(1.0))
    assert [x for x, _ in points] == pytest.approx([float(x) for x in range(-60, 1)])
    known = [(x, v) for x, v in points if v is not None]
    # i kB stored in the interval that ended at frame i: the line climbs across the minute.
    assert known[-1] == (0.0, pytest.approx(60_000 / units.GB))
    assert known[0][1] < known[-1][1] / 10


@given(
    st.integers(1, 12),
    st.lists(st.one_of(st.none(), st.floats(-1e6, 1e6, width=32)), max_size=40),
    st.integers(0, 50),
)
def test_ring_values_and_tail_are_the_last_values_in_order(size, appended, n):
    """values() and tail(n) as a plain list of everything appended reads them, every wrap."""
    ring = Ring(size)
    for value in appended:
        ring.append(value)
    kept = appended[-size:] if appended else []
    assert ring.values() == kept and list(ring) == kept
    assert ring.tail(n) == (kept[-n:] if n else [])


@given(
    st.lists(
        st.tuples(
            # Seconds to the next frame end (frames end in order) and counts, all exact in
            # binary: a sum then does not depend on where the summing started.
            st.integers(1, 12).map(lambda quarters: quarters / 4),
            st.one_of(st.none(), st.integers(0, 10_000).map(float)),
            st.one_of(st.none(), st.integers(0, 10_000).map(float)),
        ),
        min_size=1, max_size=80,
    ),
    st.sampled_from([1.0, 10.0, 60.0]),
    st.sampled_from([5.0, 20.0, 60.0, 300.0]),
    st.integers(5, 60),
)  # fmt: skip
def test_smoothed_over_a_span_equals_the_whole_history_cut_to_it(frames, window, span, size):
    """What a chart draws: working out only the frames a span's windows reach back to gives
    the points the whole history gives, for the frames of the span."""
    trend, end = Trend(size), 1000.0
    for step, hits, queries in frames:
        end += step
        trend.append(end, step, {"local_hits": hits, "local_queries": queries, "store_bytes": hits})
    for numerator, denominator in (("local_hits", "local_queries"), ("store_bytes", None)):
        whole = trend.smoothed(numerator, denominator, window)
        last = whole[-1][0]
        expected = [(t, v) for t, v in whole if t - last >= -span]
        got = trend.smoothed(numerator, denominator, window, span)
        assert got == expected


@given(
    st.lists(
        st.tuples(
            st.integers(1, 12).map(lambda quarters: quarters / 4),
            # any counts: each point is its window summed afresh, so where the summing
            # started cannot show even in the last digit
            st.one_of(st.none(), st.floats(0, 1e12)),
            st.one_of(st.none(), st.floats(0, 1e12)),
        ),
        min_size=1, max_size=60,
    ),
    st.sampled_from([1.0, 10.0, 60.0]),
    st.sampled_from([None, 5.0, 20.0, 60.0]),
    st.integers(5, 40),
)  # fmt: skip
def test_points_kept_from_frame_to_frame_are_the_points_worked_out_afresh(frames, window, span, size):
    """top asks for the same line every frame and keeps the points worked out before: after
    any number of frames (the rings wrapping, windows cut at the oldest frame held) they are
    what a trend that never kept a point gives, to the last digit."""
    kept, end = Trend(size), 1000.0
    lines = (("local_hits", "local_queries"), ("store_bytes", None))
    afresh_frames: list[tuple[float, float, dict[str, float | None]]] = []
    for step, hits, queries in frames:
        end += step
        deltas = {"local_hits": hits, "local_queries": queries, "store_bytes": hits}
        kept.append(end, step, deltas)
        afresh_frames.append((end, step, deltas))
        afresh = Trend(size)
        for frame in afresh_frames:
            afresh.append(*frame)
        for numerator, denominator in lines:
            assert kept.smoothed(numerator, denominator, window, span) == afresh.smoothed(
                numerator, denominator, window, span
            )
