"""A chart's dot columns are fixed steps of the frames' clock (LineChart._dots): a point keeps
its column from frame to frame, the chart moves a whole column at a time, and a frame that
changes no dot, no title and no axis draws nothing (the chart then costs nothing to redraw:
benchmarks/top_cpu.py).

Times are multiples of 1/4 s and a column holds 1/2 s, so the column a time falls in is exact
in binary floating point and is worked out here with fractions.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st
from rich.text import Text

from kvops.top.linechart import AXIS_WIDTH, LineChart

from .helpers import OneChart, drive

PLOT_W, PLOT_H = 20, 6
DOTS_W, DOTS_H = 2 * PLOT_W, 4 * PLOT_H
STEP = Fraction(1, 2)  # seconds a dot column holds
SPAN = float(STEP * (DOTS_W - 1))
quarter = st.integers(0, 400).map(lambda q: q / 4)  # an exact time on the frames' clock


def _chart(lines, now: float, y_max: float = 100.0) -> LineChart:
    chart = LineChart()
    chart.lines, chart.y_max, chart.x_span, chart.now = lines, y_max, SPAN, now
    return chart


def _expected(points: list[tuple[float, float | None]], now: float, y_max: float) -> tuple:
    """Per run of known points, the newest point of each column, its column counted back
    from the one `now` falls in; None between two runs."""
    out: list = []
    runs = itertools.groupby(points, key=lambda p: p[1] is not None and math.isfinite(p[1]))
    for known, run in runs:
        if not known:
            if out:
                out.append(None)
            continue
        for column, in_column in itertools.groupby(run, key=lambda p: math.floor(Fraction(p[0]) / STEP)):
            *_, (_, y) = in_column
            col = DOTS_W - 1 - (math.floor(Fraction(now) / STEP) - column)
            out.append((col, round((1 - min(max(y, 0.0), y_max) / y_max) * (DOTS_H - 1))))
    return tuple(out[:-1] if out and out[-1] is None else out)


@given(
    st.lists(st.tuples(quarter, st.one_of(st.none(), st.floats(-10, 200), st.just(math.nan))), max_size=60),
    quarter,
)
def test_each_column_shows_its_newest_point_counted_back_from_now(points, extra):
    points = sorted(points, key=lambda p: p[0])
    now = max([p[0] for p in points] + [0.0]) + extra  # now: at or after the newest point
    relative = [(t - now, y) for t, y in points]
    ((_, _, dots),) = _chart([("red", "*", relative)], now)._dots(PLOT_W, PLOT_H)
    assert dots == _expected(points, now, 100.0)


@given(st.lists(st.tuples(quarter, st.floats(0, 100)), min_size=1, max_size=40), quarter, quarter)
def test_a_point_keeps_its_column_until_the_chart_moves_a_whole_column(points, later, again):
    """The same points seen at two times: every column moves by the number of column
    boundaries passed between them, the same for every point."""
    points = sorted(points, key=lambda p: p[0])
    first = max(p[0] for p in points) + later
    second = first + again

    def columns(now: float) -> list[int]:
        ((_, _, dots),) = _chart([("red", "*", [(t - now, y) for t, y in points])], now)._dots(PLOT_W, PLOT_H)
        return [d[0] for d in dots if d is not None]

    moved = math.floor(Fraction(second) / STEP) - math.floor(Fraction(first) / STEP)
    assert columns(second) == [c - moved for c in columns(first)]


@drive
async def test_a_frame_that_moves_no_dot_draws_nothing_and_one_that_does_redraws():
    app = OneChart()
    async with app.run_test(size=(AXIS_WIDTH + PLOT_W + 1, PLOT_H + 4)) as pilot:
        chart = app.query_one(LineChart)
        builds: list[float] = []
        build = chart._build

        def counting(picture):
            builds.append(chart.now)
            return build(picture)

        chart._build = counting
        title = Text("t\nlegend")
        history = [(t / 4, 50.0) for t in range(0, 40)]  # a point every 1/4 s up to 9.75

        def show(now: float, newest: float) -> None:
            points = [(t - now, y) for t, y in history if t <= now] + [(0.0, newest)]
            chart.set_data(title, [("green", "*", points)], 100.0, SPAN, now)

        show(10.0, 50.0)
        await pilot.pause()
        drawn = [chart.render_line(y).text for y in range(chart.size.height)]
        builds.clear()
        show(10.25, 50.0)  # the same column, the same dot: the chart stays as it is
        await pilot.pause()
        assert builds == []
        assert [chart.render_line(y).text for y in range(chart.size.height)] == drawn
        show(10.25, 95.0)  # the newest point moves up: drawn
        await pilot.pause()
        assert builds == [10.25]
        assert [chart.render_line(y).text for y in range(chart.size.height)] != drawn
        show(10.5, 95.0)  # the next column: the chart moves
        await pilot.pause()
        assert builds == [10.25, 10.5]


def test_a_point_no_finite_clock_can_place_is_a_gap_and_a_non_finite_now_draws_unanchored():
    """Frame times come from the source (a store's evaluation time under `--prometheus`): far
    apart, they put a point out of reach (-1e308 - 1e308 is -inf), which must not stop the
    chart. Such a point is unknown, a gap, as a non-finite value is; a `now` too large to
    count columns on leaves the columns counted from x alone."""
    far = [(-1e308, 10.0), (-1.0, 50.0), (0.0, 60.0)]
    for now in (-1e308, 1e308, math.inf, math.nan):
        ((_, _, dots),) = _chart([("red", "*", far)], now)._dots(PLOT_W, PLOT_H)
        assert [d[0] for d in dots if d is not None] == [DOTS_W - 1 - 2, DOTS_W - 1], now
        assert None not in dots  # the far point was the oldest: no gap left before the rest
    ((_, _, dots),) = _chart([("red", "*", [(-2.0, 10.0), (-1e308, 5.0), (0.0, 60.0)])], 0.0)._dots(
        PLOT_W, PLOT_H
    )
    assert dots == ((DOTS_W - 1 - 4, 21), None, (DOTS_W - 1, 9))  # y 10 and 60 of 100, 24 dots high
