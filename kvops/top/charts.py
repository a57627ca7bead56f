"""The main screen's time-series charts: hit rate per tier, transfer bandwidth, prefill tokens
saved per second, each smoothed over a window the user picks (`w`: 1 s / 10 s / 1 min).

Drawn with textual-plot's PlotWidget (axes, ticks, labels, legend) rather than by hand. Each
chart is for the whole fleet (every engine summed) or for the row under the cursor (`c`).
The figures come from kvops.top.series.Trend: sums of kvops.rates' per-interval deltas over
the window, divided (hits / lookups, bytes / seconds), so a smoothed hit rate weighs each
second by what it looked up. What each chart drew is kept in `shown` (tests read it).

A chart is redrawn only when a frame arrives or the choice changes (a redraw costs a few
milliseconds of Textual's compositor per chart).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static
from textual_plot import HiResMode, PlotWidget

from kvops.top import units
from kvops.top.series import Trend

Points = list[tuple[float, float | None]]


@dataclass(frozen=True)
class Line:
    label: str
    numerator: str
    denominator: str | None  # None: per second of interval
    scale: float  # the value shown is the ratio / scale
    style: str


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    unit: str
    lines: tuple[Line, ...]
    percent: bool = False  # y from 0 to 100


CHARTS: tuple[Chart, ...] = (
    Chart("hit", "Hit rate", "%", (
        Line("GPU cache", "local_hits", "local_queries", 0.01, "green"),
        Line("offload tier", "external_hits", "external_queries", 0.01, "cyan"),
    ), percent=True),
    Chart("bandwidth", "Moved per second", "GB/s", (
        Line("stored", "store_bytes", None, units.GB, "magenta"),
        Line("loaded", "load_bytes", None, units.GB, "yellow"),
    )),
    Chart("saved", "Tokens saved", "k tok/s", (
        Line("GPU cache", "local_hits", None, 1000.0, "green"),
        Line("offload tier", "external_hits", None, 1000.0, "cyan"),
    )),
)  # fmt: skip


def series(trend: Trend, line: Line, window: float) -> Points:
    """(seconds before the last frame, value) for one line; value None where unknown."""
    points = trend.smoothed(line.numerator, line.denominator, window)
    if not points:
        return []
    last = points[-1][0]
    return [(end - last, None if v is None else v / line.scale) for end, v in points]


class ChartPanel(Horizontal):
    """The charts side by side; the third one is left out on a narrow terminal."""

    DEFAULT_CSS = """
    ChartPanel { height: 1fr; min-height: 8; }
    ChartPanel > .chart { width: 1fr; height: 1fr; }
    ChartPanel > .chart > Static { height: 2; padding: 0 1; }
    ChartPanel > .chart > PlotWidget { height: 1fr; }
    ChartPanel.narrow > #chart-saved { display: none; }
    """

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self.shown: dict[str, dict[str, Points]] = {}  # chart -> line label -> points drawn
        self.link_max: float | None = None  # bytes/s, the bandwidth chart's ceiling line
        self.subject = ""  # what the charts show: the fleet, or one engine
        self._drawn: object = None  # what was drawn last (frame, subject, window)

    def compose(self) -> ComposeResult:
        from textual.containers import Vertical

        for chart in CHARTS:
            with Vertical(classes="chart", id=f"chart-{chart.key}"):
                yield Static(f"{chart.title} ({chart.unit})", id=f"title-{chart.key}")
                plot = PlotWidget(id=f"plot-{chart.key}", allow_pan_and_zoom=False)
                plot.can_focus = False
                # Tighter margins than textual-plot's (2, 3, 10): small charts need the room.
                # set_reactive: before mounting, the watchers would look for the plot's grid.
                plot.set_reactive(PlotWidget.margin_top, 0)
                plot.set_reactive(PlotWidget.margin_bottom, 2)
                plot.set_reactive(PlotWidget.margin_left, 7)
                yield plot

    def on_resize(self) -> None:
        self.set_class(self.size.width < 120, "narrow")

    def draw(self, trend: Trend, subject: str, window: float, link_max: float | None, stamp: object) -> None:
        """Plot `trend` smoothed over `window`, unless this exact picture is already drawn."""
        key = (stamp, subject, window, link_max)
        if key == self._drawn:
            return
        self._drawn = key
        self.link_max = link_max
        for chart in CHARTS:
            self._draw_chart(chart, trend, subject, window, link_max)

    def _draw_chart(
        self, chart: Chart, trend: Trend, subject: str, window: float, link_max: float | None
    ) -> None:
        plot = self.query_one(f"#plot-{chart.key}", PlotWidget)
        # The legend is the title line (a legend box inside a small chart hides the data).
        title = Text(f"{chart.title} ({chart.unit}) · {_window_text(window)} window\n", style="bold")
        for line in chart.lines:
            title.append("━ ", style=line.style).append(f"{line.label}  ")
        plot.clear()
        drawn: dict[str, Points] = {}
        span = 60.0
        top = 0.0
        for line in chart.lines:
            points = series(trend, line, window)
            drawn[line.label] = points
            known = [(x, y) for x, y in points if y is not None]
            if points:
                span = max(span, -points[0][0])
            top = max([top, *(y for _, y in known)])
            if len(known) == 1:
                plot.scatter(
                    [known[0][0]], [known[0][1]], marker="●", marker_style=line.style, label=line.label
                )
            elif known:
                xs = [x for x, _ in points]
                ys = [float("nan") if y is None else y for _, y in points]  # a gap where unknown
                plot.plot(xs, ys, line_style=line.style, hires_mode=HiResMode.BRAILLE, label=line.label)
        if chart.key == "bandwidth" and link_max:
            ceiling = link_max / units.GB
            if top >= ceiling / 10:  # near enough to matter: drawn, and the scale holds it
                plot.plot([-span, 0.0], [ceiling, ceiling], line_style="red", label="PCIe link max")
                top = max(top, ceiling)
                title.append("━ ", style="red").append(f"link max {ceiling:.0f}")
            else:  # drawn, it would flatten the traffic to the axis
                title.append(f"link max {ceiling:.0f}", style="dim")
        self.subject = subject
        self.query_one(f"#title-{chart.key}", Static).update(title)
        self.shown[chart.key] = drawn
        plot.set_xlimits(-span, span / 40)  # a little room: the newest point is not on the frame
        plot.set_ylimits(0.0, 100.0 if chart.percent else (top * 1.1 or 1.0))


def _window_text(window: float) -> str:
    return f"{window / 60:g} min" if window >= 60 else f"{window:g} s"
