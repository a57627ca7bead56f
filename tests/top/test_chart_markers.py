"""With NO_COLOR the charts' lines are told apart by their marker glyphs, not by colour.

The real app (Pilot) replays the v0.33 fixture with NO_COLOR set; each chart's legend names a
distinct glyph per line, and that glyph sits on the plot where the line's newest value is
(the row its value maps to on the chart's own y axis, at the right edge: now).
"""

from __future__ import annotations

import re

from rich.text import Text

from kvops.frames.replay import ReplaySource
from kvops.top.app import TopApp
from kvops.top.charts import CHARTS, SHARE_LINE, ChartPanel
from kvops.top.linechart import AXIS_WIDTH, MARK_EVERY, RIGHT_AXIS_WIDTH, LineChart

from .helpers import T1, T2, OneChart, drive, wait_until

LEGEND = re.compile(r"(\S)━ (.+?)(?:  |$)")


def _rows(chart: LineChart) -> list[str]:
    """The chart as it renders, one plain line per terminal row."""
    return [chart.render_line(y).text for y in range(chart.size.height)]


def _plot_row(value: float, y_max: float, plot_h: int) -> int:
    """The cell row LineChart puts `value` on: its dot row, four dots a cell."""
    dy = round((1 - min(max(value, 0.0), y_max) / y_max) * (4 * plot_h - 1))
    return dy // 4


@drive
async def test_without_colour_each_line_has_its_own_glyph_on_the_plot(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = TopApp(ReplaySource([str(T1), str(T2)], 1.0), interval=0.05)
    async with app.run_test(size=(220, 60)) as pilot:
        await wait_until(pilot, lambda: app.ended)
        await pilot.pause()
        assert app.no_color
        panel = app.query_one("#charts", ChartPanel)
        checked = 0
        for chart in CHARTS:
            widget = app.query_one(f"#chart-{chart.key}", LineChart)
            rows = _rows(widget)
            legend = {label.removesuffix(" (% right)"): glyph for glyph, label in LEGEND.findall(rows[1])}
            lines = {label: points for label, points in panel.shown[chart.key].items() if points}
            assert set(lines) <= set(legend), (chart.key, rows[1])
            glyphs = [legend[label] for label in lines]
            assert len(set(glyphs)) == len(glyphs), (chart.key, legend)  # distinct within a chart
            plot = rows[2:-2]
            right = len(plot[0]) - 1  # the newest column: now, left of a second scale if any
            if widget.right is not None:
                right -= RIGHT_AXIS_WIDTH
                # the offload share's own scale, labelled: 100 % at the top, 50 % half-way
                assert plot[0].endswith("├100%") and plot[len(plot) // 2].rstrip().endswith("├50%"), plot
                assert "offload share (% right)" in rows[1]
            for label, points in lines.items():
                value = points[-1][1]
                assert value is not None
                if label == SHARE_LINE:  # drawn with 100 % at the top of the axis
                    value = value / 100.0 * widget.y_max
                row = _plot_row(value, widget.y_max, len(plot))
                assert plot[row][right] == legend[label], (chart.key, label, row, plot)
                checked += 1
        assert checked >= 6  # hit 2, bandwidth 2, saved 1+, payoff 2


@drive
async def test_markers_run_along_each_line_staggered_so_overlapping_lines_show_both():
    app = OneChart()
    async with app.run_test(size=(80, 14)) as pilot:
        chart = app.query_one(LineChart)
        flat = [(float(x), 50.0) for x in range(-60, 1)]  # two lines on top of each other
        high = [(float(x), 90.0) for x in range(-60, 1)]
        chart.set_data(Text("t\nlegend"), [("green", "*", flat), ("cyan", "o", flat), ("red", "+", high)],
                       100.0, 60.0)  # fmt: skip
        await pilot.pause()
        plot = [line[AXIS_WIDTH:] for line in _rows(chart)[2:-2]]
        middle = plot[_plot_row(50.0, 100.0, len(plot))]
        top = plot[_plot_row(90.0, 100.0, len(plot))]
        width = len(middle)
        assert middle.count("*") >= width // MARK_EVERY - 1 and middle.count("o") >= width // MARK_EVERY - 1
        assert top.count("+") >= width // MARK_EVERY
        assert "*" not in top and "+" not in middle


@drive
async def test_a_chart_redraws_for_a_new_title_and_a_new_size():
    """The chart keeps its strips and its cut title lines between frames: a title that changes
    (the window) and a terminal that changes size must still show."""
    app = TopApp(ReplaySource([str(T1), str(T2)], 1.0), interval=0.05)
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_until(pilot, lambda: app.ended)
        await pilot.pause()
        widget = app.query_one("#chart-hit", LineChart)
        assert "10 s window" in _rows(widget)[0]
        await pilot.press("w")
        await pilot.pause()
        assert "1 min window" in _rows(widget)[0]
        width = widget.size.width
        assert {len(row) for row in _rows(widget)} == {width}
        await pilot.resize_terminal(150, 40)
        await pilot.pause()
        assert widget.size.width != width
        assert {len(row) for row in _rows(widget)} == {widget.size.width}
        await pilot.press("w")
        await pilot.pause()
        assert "1 s window" in _rows(widget)[0]
