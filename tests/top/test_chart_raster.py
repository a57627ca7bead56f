"""The chart's raster: the dots between two points as drawn since the charts came (a dot
per step of the longer axis, both coordinates rounded by round()), now set inline with the
longer axis stepped exactly. Compared with that first form, written out here."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from kvops.top.linechart import LineChart, _dots_between


def _dots_as_first_drawn(start: tuple[int, int], dx: int, dy: int) -> list[tuple[int, int]]:
    steps = max(abs(dx - start[0]), abs(dy - start[1]), 1)
    return [
        (start[0] + round((dx - start[0]) * k / steps), start[1] + round((dy - start[1]) * k / steps))
        for k in range(1, steps + 1)
    ]


coordinate = st.integers(-40, 200)


@given(coordinate, coordinate, coordinate, coordinate)
def test_dots_between_two_points_are_the_first_form_s(x0, y0, dx, dy):
    assert list(_dots_between((x0, y0), dx, dy)) == _dots_as_first_drawn((x0, y0), dx, dy)


def test_the_same_point_twice_is_one_dot_there():
    assert list(_dots_between((5, 7), 5, 7)) == [(5, 7)]


@given(
    st.lists(
        st.lists(st.one_of(st.none(), st.floats(-10, 1e4), st.just(math.nan)), min_size=0, max_size=40),
        min_size=1, max_size=3,
    ),
    st.integers(8, 40), st.integers(2, 14),
)  # fmt: skip
def test_raster_sets_the_dots_the_first_form_sets(values, plot_w, plot_h):
    chart = LineChart()
    lines = []
    for i, ys in enumerate(values):
        points = [(-60.0 + 60.0 * j / max(1, len(ys) - 1), y) for j, y in enumerate(ys)]
        lines.append((["red", "cyan", "green"][i], "*+o"[i], points))
    chart.lines, chart.y_max, chart.x_span = lines, 1000.0, 60.0
    cells, _, _ = chart._raster(plot_w, plot_h)

    dots_w, dots_h = 2 * plot_w, 4 * plot_h
    expected = [[0] * plot_w for _ in range(plot_h)]
    bits = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))
    for _, _, points in lines:
        prev = None
        for x, y in points:
            if y is None or not math.isfinite(y):
                prev = None
                continue
            dx = round((x + 60.0) / 60.0 * (dots_w - 1))
            dy = round((1 - min(max(y, 0.0), 1000.0) / 1000.0) * (dots_h - 1))
            way = [(dx, dy)] if prev is None else _dots_as_first_drawn(prev, dx, dy)
            for px, py in way:
                if 0 <= px < dots_w and 0 <= py < dots_h:
                    expected[py // 4][px // 2] |= bits[px % 2][py % 4]
            prev = (dx, dy)
    assert cells == expected
