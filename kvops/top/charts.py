"""The main screen's time-series charts: hit rate per tier, transfer bandwidth, prefill tokens
saved per second by each tier, each smoothed over a window the user picks (`w`: 1 s / 10 s / 1 min).

Drawn by linechart.LineChart (braille lines, a y axis with ticks, time marks; why not a kept
charting widget: see there). The charts are for the whole fleet (every engine summed) or for
the row under the cursor (`c`).
The figures come from kvops.top.history.Trend: sums of kvops.rates' per-interval deltas over
the window, divided (hits / lookups, bytes / seconds), so a smoothed hit rate weighs each
second by what it looked up. What each chart drew is kept in `shown` (tests read it).

A chart is redrawn only when a frame arrives or the choice changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal

from kvops.top import numbers
from kvops.top.history import TIERS, Trend
from kvops.top.linechart import LineChart, nice_ceiling

Points = list[tuple[float, float | None]]  # (seconds before now, value)


@dataclass(frozen=True)
class Line:
    label: str
    numerator: str
    denominator: str | None  # None: per second of interval
    scale: float  # the value shown is the ratio / scale
    style: str
    marker: str  # its glyph on the line and in the legend: told apart without colour (NO_COLOR)


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    unit: str
    lines: tuple[Line, ...]
    percent: bool = False  # y from 0 to 100


CHARTS: tuple[Chart, ...] = (
    Chart("hit", "Hit rate", "%", (
        Line("GPU cache", "local_hits", "local_queries", 0.01, "green", "*"),
        Line("offload tier", "external_hits", "external_queries", 0.01, "cyan", "o"),
    ), percent=True),
    # Bytes over elapsed time, not the table's GB/s while moving (bytes over transfer time).
    Chart("bandwidth", "Per wall-clock s", "GB/s", (
        Line("stored", "store_bytes", None, numbers.GB, "magenta", "+"),
        Line("loaded", "load_bytes", None, numbers.GB, "yellow", "x"),
    )),
    # Lines per tier the trend has (saved_lines): prompt tokens each tier served per second.
    Chart("saved", "Tokens saved", "k tok/s", ()),
    # Does offloading pay off (docs/payoff.md): TTFT p90 on the axis; the share of prompt
    # tokens the tiers below the GPU served, drawn with 100 % at the top of the axis.
    Chart("payoff", "TTFT p90 vs offload share", "ms", (
        Line("TTFT p90", "ttft_p90_weighted", "first_tokens", 0.001, "red", "+"),
        Line("offload share", "offload_saved", "prompt_tokens", 0.01, "cyan", "o"),
    )),
)  # fmt: skip
SHARE_LINE = "offload share"  # drawn on its own 0-100 % scale, the axis's height

TIER_LABELS = {"gpu": "GPU", "host": "host", "disk": "disk", "storage": "storage", "peer": "peer",
               "external": "connector"}  # fmt: skip
TIER_STYLES = {"gpu": "green", "host": "cyan", "disk": "yellow", "storage": "magenta", "peer": "blue",
               "external": "cyan"}  # fmt: skip
TIER_MARKERS = {"gpu": "*", "host": "o", "disk": "#", "storage": "@", "peer": "%", "external": "x"}
LINK_MAX_MARKER = "="


def saved_lines(trend: Trend) -> tuple[Line, ...]:
    """The "tokens saved" chart's lines: the GPU cache, and each other tier whose tokens_saved
    the trend holds (rates' per-tier figures; the connector's hits where an engine has no
    split) and that served a token in its history: a tier that served none stays a 0 in the
    detail view rather than a flat line and a legend entry here."""
    rings = trend.deltas
    return tuple(
        Line(TIER_LABELS[tier], f"saved_{tier}", None, 1000.0, TIER_STYLES[tier], TIER_MARKERS[tier])
        for tier in TIERS
        if f"saved_{tier}" in rings and (tier == "gpu" or any(rings[f"saved_{tier}"]))
    )


def span_for(window: float) -> float:
    """Seconds of history a chart shows: a dozen windows, from one to five minutes."""
    return min(300.0, max(60.0, 12 * window))


def series(trend: Trend, line: Line, window: float, span: float | None = None) -> Points:
    """(seconds before the last frame, value) for one line over the last `span` seconds;
    value None where unknown."""
    points = trend.smoothed(line.numerator, line.denominator, window, span)
    if not points:
        return []
    last, scale = points[-1][0], line.scale
    return [(end - last, None if v is None else v / scale) for end, v in points]


class ChartPanel(Horizontal):
    """The charts side by side; the third one is left out on a narrow terminal."""

    DEFAULT_CSS = """
    ChartPanel { height: 1fr; min-height: 8; }
    ChartPanel.narrow > #chart-saved { display: none; }
    ChartPanel.narrow > #chart-payoff { display: none; }
    """

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self.shown: dict[str, dict[str, Points]] = {}  # chart -> line label -> points drawn
        self.link_max: float | None = None  # bytes/s, the bandwidth chart's ceiling line
        self.subject = ""  # what the charts show: the fleet, or one engine
        self._drawn: object = None  # what was drawn last (frame, subject, window)

    def compose(self) -> ComposeResult:
        for chart in CHARTS:
            yield LineChart(id=f"chart-{chart.key}")

    def on_resize(self) -> None:
        self.set_class(self.size.width < 120, "narrow")

    def draw(self, trend: Trend, subject: str, window: float, link_max: float | None, stamp: object) -> None:
        """Plot `trend` smoothed over `window`, unless this exact picture is already drawn."""
        key = (stamp, subject, window, link_max)
        if key == self._drawn:
            return
        self._drawn = key
        self.link_max = link_max
        self.subject = subject
        for chart in CHARTS:
            self._draw_chart(chart, trend, window, link_max)

    def _draw_chart(self, chart: Chart, trend: Trend, window: float, link_max: float | None) -> None:
        widget = self.query_one(f"#chart-{chart.key}", LineChart)
        # The legend is the title's second line (a legend box inside a small chart hides data).
        title = Text(f"{chart.title} ({chart.unit}) · {_window_text(window)} window\n", style="bold")
        lines = saved_lines(trend) if chart.key == "saved" else chart.lines
        for line in lines:
            label = f"{line.label} (% right)" if line.label == SHARE_LINE else line.label
            title.append(f"{line.marker}━ ", style=line.style).append(f"{label}  ")
        span = span_for(window)
        drawn: dict[str, Points] = {}
        plotted: list[tuple[str, str, Points]] = []
        top = 0.0
        share: tuple[str, str, Points] | None = None
        for line in lines:
            points = series(trend, line, window, span)
            drawn[line.label] = points
            if line.label == SHARE_LINE:
                share = (line.style, line.marker, points)
                continue
            top = max([top, *(y for _, y in points if y is not None)])
            plotted.append((line.style, line.marker, points))
        if share is not None:  # percent onto the TTFT axis: 100 % at its top
            y_top = nice_ceiling(top * 1.05) if top > 0 else 100.0
            scaled = [(x, None if y is None else y / 100.0 * y_top) for x, y in share[2]]
            plotted.append((share[0], share[1], scaled))
        if chart.key == "bandwidth" and link_max:
            ceiling = link_max / numbers.GB
            if top >= ceiling / 10:  # near enough to matter: drawn, and the scale holds it
                plotted.append(("red", LINK_MAX_MARKER, [(-span, ceiling), (0.0, ceiling)]))
                top = max(top, ceiling)
                title.append(f"{LINK_MAX_MARKER}━ ", style="red").append(f"link max {ceiling:.0f}")
            else:  # drawn, it would flatten the traffic to the axis
                title.append(f"link max {ceiling:.0f}", style="dim")
        self.shown[chart.key] = drawn
        y_max = 100.0 if chart.percent or (share is not None and top <= 0) else nice_ceiling(top * 1.05)
        ends = trend.ends.tail(1)  # x = 0: the last frame, on the clock the frames end on
        now = (ends[0] or 0.0) if ends else 0.0
        # The share's own scale, 0-100 %, labelled on the right edge.
        widget.set_data(title, plotted, y_max, span, now, (100.0, "%") if share is not None else None)


def _window_text(window: float) -> str:
    return f"{window / 60:g} min" if window >= 60 else f"{window:g} s"
