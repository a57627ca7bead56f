"""The target table: one line per engine, a row cursor, a fixed two-line header.

When the terminal is narrower than the table, whole columns are left out, least important
first (as htop and k9s do), so every header shown is whole; only when even the columns that
are never dropped do not fit does the table pan sideways.

Textual's DataTable re-renders every cell through Rich on any update (its cell cache is
keyed on an update counter), which at one update a second for 16 targets cost more CPU
than the scraping. Here each row is rendered to one Strip once per frame, and
render_line only crops and styles strips (benchmarks/top_cpu.py measures the difference).
Only the rows in view are turned into cells and strips (`cells_of` is asked for them), so a
frame costs the same with 16 engines or 5,000; and only the lines whose strip changed are
refreshed, so Textual restyles and composites no row that stayed the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, NamedTuple

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from kvops.top.board import RowKey
from kvops.top.content_size import ContentSize

GAP = 2  # spaces between columns


class Cell(NamedTuple):
    """A cell: its text (one line, already made visible, see kvops.termsafe) and a Rich style
    name. A rich Text per cell, rebuilt for each row each frame, cost a third of the table's
    frame."""

    plain: str
    style: str = ""

    @property
    def cell_len(self) -> int:
        return cell_len(self.plain)


NULL_STYLE = Style()  # for padding and unstyled runs: Textual's NO_COLOR filter reads style.color


class TargetTable(Widget, can_focus=True):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move(-1)", "up", show=False),
        Binding("down,j", "move(1)", "down", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("pagedown", "page(1)", show=False),
        Binding("home", "move(-1000000)", show=False),
        Binding("end", "move(1000000)", show=False),
        Binding("left,h", "pan(-8)", show=False),
        Binding("right,l", "pan(8)", show=False),
        Binding("enter", "select", "detail"),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {"targets--header", "targets--cursor"}
    DEFAULT_CSS = """
    TargetTable { height: 1fr; }
    TargetTable > .targets--header { text-style: bold; background: $panel; }
    TargetTable > .targets--cursor { background: $primary 35%; }
    TargetTable:blur > .targets--cursor { background: $primary 15%; }
    """

    class Selected(Message):
        """Enter (or a double click) on a row."""

        def __init__(self, key: RowKey) -> None:
            super().__init__()
            self.key = key

    def __init__(
        self,
        columns: Sequence[tuple[str, str]],
        *,
        right: frozenset[str] = frozenset(),
        drop_order: Sequence[str] = (),
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.columns = list(columns)  # (key, label; "\n" splits the label over the two lines)
        self.right = [key in right for key, _ in self.columns]  # numbers line up on the right
        keys = [key for key, _ in self.columns]
        # Column indexes in the order they are left out when the width is short.
        self.drop_order = [keys.index(key) for key in drop_order if key in keys]
        self.shown_columns: list[int] = list(range(len(self.columns)))
        self.keys: list[RowKey] = []
        self._cells_of: Callable[[int], list[Cell]] = lambda index: []
        self._built_top = -1  # the first row the strips were built from
        self.cursor = 0
        self._top = 0  # first row shown
        self._left = 0  # first column of text shown (a terminal narrower than the table)
        self._header: list[Strip] = []
        self._strips: list[Strip] = []
        self._width = 0
        self._styles: dict[str, Style] = {}  # resolved styles, until the CSS changes
        self._content_size = ContentSize()
        self._parsed: dict[str, Style] = {}  # a cell's style text -> its Style
        self._build()

    # --- data -------------------------------------------------------------------------------
    def set_columns(
        self, columns: Sequence[tuple[str, str]], right: frozenset[str], drop_order: Sequence[str]
    ) -> None:
        """Other columns (a tier or engine kind that came or went, the --group-by table); the
        next set_rows draws them."""
        if list(columns) == self.columns:
            return
        self.columns = list(columns)
        self.right = [key in right for key, _ in self.columns]
        keys = [key for key, _ in self.columns]
        self.drop_order = [keys.index(key) for key in drop_order if key in keys]
        self._left = 0

    @property
    def row_count(self) -> int:
        return len(self.keys)

    @property
    def cursor_key(self) -> RowKey | None:
        return self.keys[self.cursor] if self.keys else None

    def set_rows(self, keys: list[RowKey], cells_of: Callable[[int], list[Cell]]) -> None:
        """Replace the rows (`cells_of(i)`: the cells of row i, asked only for rows in view),
        keeping the cursor on the same key where it is still shown."""
        keep = self.cursor_key
        resized = len(keys) != len(self.keys)  # the table is sized to its rows
        before = (self.cursor, self._top, self._built_top, self._header)
        old = self._strips
        self.keys = keys
        self._cells_of = cells_of
        where = {key: i for i, key in enumerate(keys)} if keep is not None else {}
        self.cursor = where[keep] if keep in where else min(self.cursor, max(0, len(keys) - 1))
        self._scroll_to_cursor()
        self._build()
        moved = before != (self.cursor, self._top, self._built_top, self._header)
        if resized or moved or not self.is_attached:
            self.refresh(layout=resized)
            return
        # The same rows in view under the same header: only the lines that changed are sent
        # through Textual's styles and compositor (an idle engine's row stays as it was).
        changed = [i for i, strip in enumerate(self._strips) if i >= len(old) or strip != old[i]]
        if changed:
            width = self.size.width
            self.refresh(*(Region(0, i + 2, width, 1) for i in changed))

    def shown_cells(self) -> list[tuple[RowKey, list[Cell]]]:
        """The rows in view with all their cells (the dropped columns too)."""
        end = min(len(self.keys), self._top + self._visible_rows())
        return [(self.keys[i], self._cells_of(i)) for i in range(self._top, end)]

    def _build(self) -> None:
        if not self.is_attached:  # styles and the console come with mounting
            return
        self._built_top = self._top
        rows = self.shown_cells()
        labels = [label.split("\n") for _, label in self.columns]
        widths = [max(len(part) for part in parts) for parts in labels]
        for _, cells in rows:
            for i, cell in enumerate(cells):
                widths[i] = max(widths[i], cell.cell_len)
        shown = self._fit(widths)
        self.shown_columns = shown
        self._width = sum(widths[i] + GAP for i in shown)
        header_style = self._style("header")
        self._header = []
        for line in range(2):
            text = Text(style=header_style)
            for i in shown:
                parts, width, right = labels[i], widths[i], self.right[i]
                part = parts[line] if line < len(parts) else ""
                text.append(" " + (part.rjust(width) if right else part.ljust(width)) + " " * (GAP - 1))
            self._header.append(self._strip(text))
        self._strips = [self._row_strip(cells, shown, widths) for _, cells in rows]

    def _fit(self, widths: list[int]) -> list[int]:
        """The columns shown: all of them, less the least important ones until the rest fit
        the widget's width (all while the widget has no size yet)."""
        room = self.size.width
        dropped: set[int] = set()
        total = sum(widths) + GAP * len(widths)
        for index in self.drop_order:
            if room <= 0 or total <= room:
                break
            dropped.add(index)
            total -= widths[index] + GAP
        return [i for i in range(len(widths)) if i not in dropped]

    def _row_strip(self, cells: list[Cell], shown: list[int], widths: list[int]) -> Strip:
        """One row's strip, put together from its cells' segments: a cell is one run of one
        style, which needs no pass through Text.render (that pass, per row and frame, was
        half of the table's CPU)."""
        segments: list[Segment] = []
        gap = " " * (GAP - 1)
        pad_after = ""  # a left-aligned cell's padding, joined to the next blank
        for i in shown:
            cell, width = cells[i], widths[i]
            pad = " " * (width - cell.cell_len)
            if self.right[i]:
                segments.append(Segment(pad_after + " " + pad, NULL_STYLE))
                pad_after = gap
            else:
                segments.append(Segment(pad_after + " ", NULL_STYLE))
                pad_after = pad + gap
            if cell.plain:
                segments.append(Segment(cell.plain, self._cell_style(cell.style)))
        segments.append(Segment(pad_after, NULL_STYLE))
        return Strip(_joined(segments), sum(widths[i] + GAP for i in shown))

    def _cell_style(self, style: str) -> Style:
        found = self._parsed.get(style)
        if found is None:
            found = self._parsed[style] = self.app.console.get_style(style, default="")
        return found or NULL_STYLE

    def _strip(self, text: Text) -> Strip:
        # Never a None style: Textual's NO_COLOR filter (Monochrome) reads style.color.
        segments = [
            Segment(s.text, s.style or NULL_STYLE) for s in text.render(self.app.console) if s.text != "\n"
        ]
        return Strip(segments or [Segment("")], text.cell_len)

    def on_mount(self) -> None:
        self._build()  # now the app's console and theme are there

    # --- drawing ------------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        width = self._content_size.of(self).width
        left = self._left
        if y < 2:
            strip = self._header[y] if self._header else Strip.blank(width, NULL_STYLE)
            return strip.crop(left, left + width).extend_cell_length(width, self._style("header fill"))
        index = self._top + y - 2
        if not 0 <= index - self._built_top < len(self._strips):
            return Strip.blank(width, self._style("base"))
        # A style, never None, on the padding: Textual's NO_COLOR filter reads style.color.
        strip = self._strips[index - self._built_top].crop(left, left + width)
        strip = strip.extend_cell_length(width, NULL_STYLE)
        if index == self.cursor:
            strip = strip.apply_style(self._style("cursor"))
        return strip.apply_style(self._style("base"))

    def _style(self, name: str) -> Style:
        """The widget's resolved styles, kept until its CSS changes (focus, theme): Textual
        resolves `rich_style` through every ancestor on each call, which was a third of the
        dashboard's CPU when asked on every line of every frame."""
        style = self._styles.get(name)
        if style is None:
            if name == "base":
                style = self.rich_style
            elif name == "header fill":
                style = self._style("base") + self._style("header")
            elif name == "cursor":
                # A partial rich style drops the alpha of "$primary 35%": blend it here, or
                # the focused and the unfocused cursor look the same.
                over = self.get_component_styles("targets--cursor").background
                blended = Style(bgcolor=(self.background_colors[1] + over).rich_color)
                style = self.get_component_rich_style("targets--cursor", partial=True) + blended
            else:
                style = self.get_component_rich_style(f"targets--{name}", partial=True)
            self._styles[name] = style
        return style

    def notify_style_update(self) -> None:
        self._styles.clear()
        self._content_size.forget()
        super().notify_style_update()

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        """Sized to its rows (with `height: auto`): the header and one line per engine."""
        return len(self.keys) + 2

    def _visible_rows(self) -> int:
        return max(1, self.size.height - 2)

    def _scroll_to_cursor(self) -> None:
        shown = self._visible_rows()
        if self.cursor < self._top:
            self._top = self.cursor
        elif self.cursor >= self._top + shown:
            self._top = self.cursor - shown + 1
        self._top = max(0, min(self._top, max(0, len(self.keys) - shown)))

    def on_resize(self, event: events.Resize) -> None:
        self._scroll_to_cursor()
        self._build()  # another size shows other rows, another width more or fewer columns
        self.action_pan(0)  # wider now: show from the left again as far as it fits

    # --- keys and mouse --------------------------------------------------------------------------
    def action_move(self, step: int) -> None:
        if self.keys:
            self.cursor = max(0, min(len(self.keys) - 1, self.cursor + step))
            self._scroll_to_cursor()
            if self._top != self._built_top:
                self._build()  # scrolled: other rows in view
            self.refresh()

    def action_pan(self, step: int) -> None:
        self._left = max(0, min(self._left + step, max(0, self._width - self.size.width)))
        self.refresh()

    def action_page(self, direction: int) -> None:
        self.action_move(direction * self._visible_rows())

    def action_select(self) -> None:
        key = self.cursor_key
        if key is not None:
            self.post_message(self.Selected(key))

    def on_click(self, event: events.Click) -> None:
        index = self._top + event.y - 2
        if event.y >= 2 and 0 <= index < len(self.keys):
            self.cursor = index
            self.refresh()
            if event.chain == 2:
                self.action_select()


def _joined(segments: list[Segment]) -> list[Segment]:
    """Neighbouring segments of one style as one: a row is mostly unstyled figures and the
    blanks between them, and Textual styles, filters and cuts each segment of each line it
    draws (a row of 30 segments becomes a handful)."""
    out: list[Segment] = []
    for segment in segments:
        if out and (segment.style is out[-1].style or segment.style == out[-1].style):
            out[-1] = Segment(out[-1].text + segment.text, out[-1].style)
        elif segment.text:
            out.append(segment)
    return out or [Segment("", NULL_STYLE)]
