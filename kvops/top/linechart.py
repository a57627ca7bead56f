"""A braille line chart with a labelled y axis and time marks, drawn as cached strips.

Why not a kept charting widget: textual-plot (the one that works with Textual 8) was tried
first and measured. Each of its charts is six widgets (a grid, four canvases, a legend) whose
canvases resolve their style on every line they render; three charts redrawn once a second
cost 50-60 ms of CPU per frame, which put `kvops top` at 5.4 % of a core with 16 targets
(benchmarks/top_cpu.py; the budget is 3 %). This widget rasterises its lines once per frame
into one Strip per terminal line (as the target table does) and render_line only returns
them, so a frame's charts cost a few milliseconds. Once drawn at a size, new data is
rasterised at once and only the lines that differ are refreshed: a chart's blank rows, its
axis and its time marks stay in Textual's line cache.

Each cell is a braille character: 2 × 4 dots, so a chart W cells wide and H high has 2W × 4H
dots. A dot column holds a fixed step of the points' clock and shows the newest point in it:
a point stays in its column until the whole chart moves a column, so most frames change a
few dots at the right edge or none (then nothing is drawn). Lines are drawn dot to dot
between consecutive known points; an unknown point (None) leaves a gap. Each line also
carries its own marker glyph (the legend shows it), on its newest point and every MARK_EVERY
cells along it: with NO_COLOR, or to an eye that does not tell the colours apart, braille
lines differ only by colour, the markers do not.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from kvops.top.content_size import ContentSize

NULL_STYLE = Style()

Points = Sequence[tuple[float, float | None]]  # (x, y); y None: unknown
# Each line as it is drawn: (rich style, marker glyph, its dots (x, y) or None for a gap).
Plan = tuple[tuple[str, str, tuple[tuple[int, int] | None, ...]], ...]


class Picture(NamedTuple):
    """Everything a build draws from, the lines as their dots: equal pictures, equal strips."""

    width: int
    height: int
    title: tuple[object, ...]  # the title's text, spans and style
    y_max: float
    x_span: float
    plan: Plan
    right: tuple[float, str] | None = None  # a second scale on the right: (its top, its unit)


# Braille dot bits by (column, row) inside a cell: U+2800 + the sum of the dots set.
_DOTS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))
AXIS_WIDTH = 6  # "  100┤": five for the tick label, one for the axis
RIGHT_AXIS_WIDTH = 5  # "├100%": a second scale's axis, then its four-cell tick label
_BRAILLE = [" "] + [chr(0x2800 + dots) for dots in range(1, 256)]  # no dot: a blank
_AXIS = Style(dim=True)
MARK_EVERY = 8  # cells between two markers of one line; lines' markers are staggered


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 × 10^k at or above `value`: a y axis people read at a glance."""
    if value <= 0 or not math.isfinite(value):
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value * (1 - 1e-9):
            return step * power
    return 10 * power


def tick_label(value: float) -> str:
    if value >= 100 or value == int(value):
        return f"{value:.0f}"
    return f"{value:.1f}" if value >= 1 else f"{value:.2g}"


def _dots_between(start: tuple[int, int], dx: int, dy: int) -> Sequence[tuple[int, int]]:
    """The dots from `start` (left out) to (dx, dy): one per step of the longer axis, the
    other axis rounded as round() rounds (half to even). Along the longer axis the step is
    exact, so only the shorter one is rounded."""
    x0, y0 = start
    ddx, ddy = dx - x0, dy - y0
    if ddx == ddy == 0:
        return ((x0, y0),)
    steps = max(abs(ddx), abs(ddy))
    if abs(ddx) == steps:  # wider than tall: x moves one dot each step
        sign = 1 if ddx > 0 else -1
        return [(x0 + sign * k, y0 + round(ddy * k / steps)) for k in range(1, steps + 1)]
    sign = 1 if ddy > 0 else -1
    return [(x0 + round(ddx * k / steps), y0 + sign * k) for k in range(1, steps + 1)]


class LineChart(Widget):
    """Title (two lines), the plot with its y axis, the x axis and its time marks."""

    DEFAULT_CSS = """
    LineChart { height: 1fr; width: 1fr; padding: 0 1 0 0; }
    """

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self.title = Text()
        self.lines: Sequence[tuple[str, str, Points]] = []  # (rich style, marker glyph, points)
        self.y_max = 1.0
        self.x_span = 60.0  # x runs from -x_span (oldest) to 0 (now)
        self.now = 0.0  # the time x = 0 stands for: dot columns are fixed steps of its clock
        self.right: tuple[float, str] | None = None  # a second scale: (its top, its unit)
        self._strips: list[Strip] = []
        self._built_for: tuple[int, int] | None = None
        self._drawn: Picture | None = None  # what _strips show
        self._content_size = ContentSize()
        # Title lines cut to the width, blank plot rows, the x axis and its time marks, by what
        # they hold: the same every frame but for the window or link-max shown (Text.truncate
        # on each title line was another twentieth).
        self._kept_strips: dict[tuple[object, ...], Any] = {}

    def set_data(
        self,
        title: Text,
        lines: Sequence[tuple[str, str, Points]],
        y_max: float,
        x_span: float,
        now: float = 0.0,
        right: tuple[float, str] | None = None,
    ) -> None:
        """`now`: the time x = 0 stands for, on the clock of the points' times (x is seconds
        before it). A dot column holds a fixed step of that clock, so a point keeps its column
        from frame to frame and the chart moves a whole column at a time. `right`: a second
        scale, labelled on the right edge, (its value at the top, its unit): a line drawn on
        it is given already scaled to the left axis."""
        self.title, self.lines, self.right = title, lines, right
        self.y_max, self.x_span = (y_max if y_max > 0 else 1.0), max(x_span, 1.0)
        self.now = now
        built_for = self._built_for
        size = self._content_size.of(self) if built_for is not None else None
        if size is None or built_for != (size.width, size.height):
            self._built_for = None  # render_line builds at the size it is drawn at
            self.refresh()
            return
        picture = self._picture(size.width, size.height)
        if picture == self._drawn:  # the same dots, title and axes: nothing to draw
            return
        # Drawn before at this size: only the lines that differ are sent through Textual's
        # styles and compositor (most of a chart's lines, blank or axis, stay the same).
        old, self._strips = self._strips, self._build(picture)
        changed = [y for y, strip in enumerate(self._strips) if y >= len(old) or strip != old[y]]
        if changed:
            self.refresh(*(Region(0, y, size.width, 1) for y in changed))

    def on_resize(self, event: events.Resize) -> None:
        self._built_for = None

    def notify_style_update(self) -> None:
        self._built_for = None  # padding or theme: another content size, other styles
        self._content_size.forget()
        self._kept_strips.clear()
        super().notify_style_update()

    # --- drawing -------------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        size = self._content_size.of(self)
        if self._built_for != (size.width, size.height):
            self._strips = self._build(self._picture(size.width, size.height))
            self._built_for = (size.width, size.height)
        return self._strips[y] if y < len(self._strips) else Strip.blank(size.width, NULL_STYLE)

    def _picture(self, width: int, height: int) -> Picture:
        title = self.title
        plot_h, plot_w = height - 4, self._plot_width(width)  # title 2, x axis 1, time marks 1
        plan = self._dots(plot_w, plot_h) if plot_h >= 2 and plot_w >= 8 else ()
        title_key = (title.plain, tuple(title.spans), title.style)
        return Picture(width, height, title_key, self.y_max, self.x_span, plan, self.right)

    def _plot_width(self, width: int) -> int:
        return width - AXIS_WIDTH - (RIGHT_AXIS_WIDTH if self.right else 0)

    def _build(self, picture: Picture) -> list[Strip]:
        self._drawn = picture
        width, height = picture.width, picture.height
        strips = list(self._title_lines(width))
        plot_h, plot_w = height - 4, self._plot_width(width)
        if plot_h < 2 or plot_w < 8:
            return strips + [Strip.blank(width, NULL_STYLE)] * max(0, height - 2)
        cells, styles, marks = self._raster(plot_w, plot_h, picture.plan)
        axis = _AXIS
        ticks = {0: 1.0, plot_h // 2: 0.5} if plot_h >= 4 else {0: 1.0}  # of the top
        right = picture.right
        for row in range(plot_h):
            label = f"{tick_label(ticks[row] * self.y_max):>5}┤" if row in ticks else "     │"
            right_label = ""
            if right is not None:
                right_label = f"├{tick_label(ticks[row] * right[0])}{right[1]}" if row in ticks else "│"
                right_label = right_label[:RIGHT_AXIS_WIDTH].ljust(RIGHT_AXIS_WIDTH)
            row_marks = marks.get(row)
            if not row_marks and not any(cells[row]):  # most rows: the axis and a blank
                strips.append(self._blank_row(label, plot_w, right_label))
                continue
            segments = [Segment(label, axis)]
            # Runs of one style: a line's cells are few, the blank runs between them long.
            row_styles = styles[row]
            chars = [_BRAILLE[c] for c in cells[row]]
            for col, glyph in (row_marks or {}).items():
                chars[col] = glyph
            start = 0
            for col in range(1, plot_w + 1):
                if col == plot_w or row_styles[col] is not row_styles[start]:
                    run = "".join(chars[start:col])
                    segments.append(Segment(run, row_styles[start] or NULL_STYLE))
                    start = col
            if right_label:
                segments.append(Segment(right_label, axis))
            strips.append(Strip(segments, AXIS_WIDTH + plot_w + len(right_label)))
        strips.append(self._kept(("x axis", plot_w), lambda: Strip(
            [Segment("    0└" + "─" * plot_w, axis)], AXIS_WIDTH + plot_w
        )))  # fmt: skip
        strips.append(self._kept(("time marks", plot_w, self.x_span), lambda: Strip(
            [Segment(self._time_marks(plot_w), axis)], AXIS_WIDTH + plot_w
        )))  # fmt: skip
        # The title lines are cut or padded to the width; the plot lines are that wide.
        return [
            s if s.cell_length == width else s.extend_cell_length(width, NULL_STYLE).crop(0, width)
            for s in strips
        ]

    def _blank_row(self, label: str, plot_w: int, right_label: str = "") -> Strip:
        def make() -> Strip:
            segments = [Segment(label, _AXIS), Segment(" " * plot_w, NULL_STYLE)]
            if right_label:
                segments.append(Segment(right_label, _AXIS))
            return Strip(segments, AXIS_WIDTH + plot_w + len(right_label))

        return self._kept(("blank", label, plot_w, right_label), make)

    def _title_lines(self, width: int) -> list[Strip]:
        """The title's two lines cut to the width, kept by what the title holds."""
        title = self.title
        key = ("title", title.plain, tuple(title.spans), title.style, width)

        def cut() -> list[Strip]:
            strips = [self._cut_text_strip(line, width) for line in title.split("\n")[:2]]
            return strips + [Strip.blank(width, NULL_STYLE)] * (2 - len(strips))

        return self._kept(key, cut)

    def _kept(self, key: tuple[object, ...], make: Callable[[], Any]) -> Any:
        """What `make` returns, kept by `key` until the styles change (at most 64 kept)."""
        found = self._kept_strips.get(key)
        if found is None:
            if len(self._kept_strips) >= 64:
                self._kept_strips.clear()
            found = self._kept_strips[key] = make()
        return found

    def _cut_text_strip(self, text: Text, width: int) -> Strip:
        text = text.copy()
        text.truncate(width, overflow="ellipsis")
        # A segment whose style is None breaks Textual's NO_COLOR filter (textual.filter.Monochrome
        # reads style.color): every segment here gets at least the null style.
        segments = [
            Segment(s.text, s.style or NULL_STYLE) for s in text.render(self.app.console) if s.text != "\n"
        ]
        return Strip(segments or [Segment("")], text.cell_len)

    def _time_marks(self, plot_w: int) -> str:
        """Marks under the x axis: now (0) on the right, then every quarter of the span."""
        out = [" "] * (AXIS_WIDTH + plot_w)
        for i in range(5):
            x = -self.x_span * i / 4
            col = AXIS_WIDTH + round((plot_w - 1) * (1 - i / 4))
            label = "0" if i == 0 else f"{x:.0f}s"
            start = (
                min(col - len(label) + 1, AXIS_WIDTH + plot_w - len(label))
                if i == 0
                else col - len(label) // 2
            )
            start = max(AXIS_WIDTH - 1, start)
            if all(c == " " for c in out[max(0, start - 1) : start + len(label) + 1]):
                out[start : start + len(label)] = label
        return "".join(out)

    def _dots(self, plot_w: int, plot_h: int) -> Plan:
        """Each line as (style, marker, dots): a dot per dot column, the newest point in it
        (a column holds x_span / (2 * plot_w - 1) seconds, counted on `now`'s clock, so a
        point stays in its column until the chart moves), None between two runs of known
        points (a gap). A point with no finite value or time is unknown: a gap."""
        dots_w, dots_h = 2 * plot_w, 4 * plot_h
        step = self.x_span / (dots_w - 1)
        now, y_max, floor, finite = self.now, self.y_max, math.floor, math.isfinite
        if not finite(now / step):  # no clock to count columns on (hostile frame times): x alone
            now = 0.0
        right = dots_w - 1 - floor(now / step)  # x = 0 is the last column
        plan = []
        for style_name, marker, points in self.lines:
            # Newest first: a column's newest point is the first met, the older ones in it
            # are passed over without working out where they would go.
            dots: list[tuple[int, int] | None] = []
            last_col: int | None = None  # the column of the newer point; None after a gap
            for x, y in reversed(points):
                steps = (now + x) / step  # non-finite where frame times put the point out of reach
                if y is None or not finite(y) or not finite(steps):
                    if last_col is not None:
                        dots.append(None)
                        last_col = None
                    continue
                col = right + floor(steps)
                if col != last_col:
                    dots.append((col, round((1 - min(max(y, 0.0), y_max) / y_max) * (dots_h - 1))))
                    last_col = col
            if dots and dots[-1] is None:
                dots.pop()
            dots.reverse()
            plan.append((style_name, marker, tuple(dots)))
        return tuple(plan)

    def _raster(
        self, plot_w: int, plot_h: int, plan: Plan
    ) -> tuple[list[list[int]], list[list[Style | None]], dict[int, dict[int, str]]]:
        """Braille dots per cell, the style per cell, and the marker glyphs (row -> col -> glyph)."""
        cells = [[0] * plot_w for _ in range(plot_h)]
        styles: list[list[Style | None]] = [[None] * plot_w for _ in range(plot_h)]
        dots_w, dots_h = 2 * plot_w, 4 * plot_h
        # Per line: its style, marker, the cell row it passes through in each cell column, and
        # the cell of its newest known point.
        tracks: list[tuple[Style, str, dict[int, int], tuple[int, int] | None]] = []
        for style_name, marker, dots in plan:
            style = Style.parse(style_name)
            track: dict[int, int] = {}
            prev: tuple[int, int] | None = None
            newest: tuple[int, int] | None = None
            for dot in dots:
                if dot is None:
                    prev = None
                    continue
                dx, dy = dot
                if prev is None or (-1 <= dx - prev[0] <= 1 and -1 <= dy - prev[1] <= 1):
                    way: Iterable[tuple[int, int]] = (dot,)  # a neighbour: nothing between
                else:  # every dot on the way: no holes in steep lines
                    way = _dots_between(prev, dx, dy)
                for px, py in way:  # the dots set, inline: a frame sets a few thousand
                    if 0 <= px < dots_w and 0 <= py < dots_h:
                        row, col = py >> 2, px >> 1
                        cells[row][col] |= _DOTS[px & 1][py & 3]
                        styles[row][col] = style
                        track[col] = row
                prev = dot
                if 0 <= dx < dots_w and 0 <= dy < dots_h:
                    newest = (dy // 4, dx // 2)
            tracks.append((style, marker, track, newest))
        marks: dict[int, dict[int, str]] = {}

        def mark(row: int, col: int, style: Style, glyph: str, over: bool) -> None:
            if over or col not in marks.setdefault(row, {}):
                marks.setdefault(row, {})[col] = glyph
                styles[row][col] = style

        for style, marker, _, newest in tracks:  # the newest points first: they always show
            if marker and newest is not None:
                mark(*newest, style, marker, True)
        for i, (style, marker, track, _) in enumerate(tracks):
            phase = i * MARK_EVERY // max(1, len(tracks))  # staggered: lines on top of each other
            for col, row in track.items():
                if marker and (plot_w - 1 - col + phase) % MARK_EVERY == 0:
                    mark(row, col, style, marker, False)
        return cells, styles, marks
