"""The chart's raster: the dots between two points as drawn since the charts came (a dot
per step of the longer axis, both coordinates rounded by round()), now set inline with the
longer axis stepped exactly. Compared with that first form, written out here.

Where the dots go (LineChart._dots) is tested in test_chart_columns.py."""

from __future__ import annotations

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


dot = st.one_of(st.none(), st.tuples(st.integers(-30, 90), st.integers(-10, 70)))


@given(
    st.lists(st.lists(dot, max_size=40), min_size=1, max_size=3),
    st.integers(8, 40), st.integers(2, 14),
)  # fmt: skip
def test_raster_sets_the_dots_the_first_form_sets(lines, plot_w, plot_h):
    chart = LineChart()
    plan = tuple((["red", "cyan", "green"][i], "*+o"[i], tuple(dots)) for i, dots in enumerate(lines))
    cells, _, _ = chart._raster(plot_w, plot_h, plan)

    dots_w, dots_h = 2 * plot_w, 4 * plot_h
    expected = [[0] * plot_w for _ in range(plot_h)]
    bits = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))
    for dots in lines:
        prev = None
        for d in dots:
            if d is None:
                prev = None
                continue
            way = [d] if prev is None else _dots_as_first_drawn(prev, *d)
            for px, py in way:
                if 0 <= px < dots_w and 0 <= py < dots_h:
                    expected[py // 4][px // 2] |= bits[px % 2][py % 4]
            prev = d
    assert cells == expected
