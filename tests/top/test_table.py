"""The target table with more engines than fit: cursor keys, scrolling, Enter on the picked one."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from textual.pilot import Pilot

from kvops.frames.replay import ReplaySource
from kvops.snapshot import Snapshot
from kvops.top.app import COLUMNS, DROP_ORDER, DetailScreen, TopApp
from kvops.top.table import TargetTable

from .helpers import T1, T2, drive, screen_text, wait_until
from .test_sources import _vllm_target, exporter_text

N = 50  # more than the 40-line terminal shows


def _fleet(tmp: Path) -> list[str]:
    files = []
    for i, path in enumerate((T1, T2)):
        targets = [_vllm_target(path, f"http://node-{n:02d}:8000") for n in range(N)]
        files.append(tmp / f"fleet-{i}.prom")
        files[-1].write_text(exporter_text(Snapshot(time=i, targets=targets)))
    return [str(f) for f in files]


@contextlib.asynccontextmanager
async def fleet(
    tmp: Path, size: tuple[int, int] = (120, 40)
) -> AsyncIterator[tuple[TopApp, Pilot, TargetTable]]:
    """The app showing the whole fleet's last frame, its pilot and its table."""
    app = TopApp(ReplaySource(_fleet(tmp), 1.0), 0.05)
    async with app.run_test(size=size) as pilot:
        await wait_until(pilot, lambda: app.ended)
        yield app, pilot, app.query_one("#targets", TargetTable)


@drive
async def test_cursor_keys_scroll_and_enter_opens_the_picked_target(tmp_path):
    async with fleet(tmp_path) as (app, pilot, table):
        assert table.row_count == N and table.cursor == 0
        assert "node-00" in screen_text(app) and "node-49" not in screen_text(app)
        await pilot.press("down", "down")
        assert table.cursor_key is not None and table.cursor_key[0] == "http://node-02:8000"
        await pilot.press("end")
        assert table.cursor == N - 1
        await pilot.pause()
        assert "node-49" in screen_text(app) and "node-00" not in screen_text(app)  # scrolled
        await pilot.press("up")
        await pilot.press("enter")
        assert isinstance(app.screen, DetailScreen) and app.screen.key[0] == "http://node-48:8000"
        await pilot.press("escape", "home")
        assert table.cursor == 0


@drive
async def test_cursor_stays_on_its_target_when_the_filter_changes(tmp_path):
    async with fleet(tmp_path) as (_app, pilot, table):
        await pilot.press(*["down"] * 7)
        assert table.cursor_key is not None and table.cursor_key[0] == "http://node-07:8000"
        await pilot.press("slash", "0", "7")
        await wait_until(pilot, lambda: table.row_count == 1)
        await pilot.press("escape")  # filter cleared: all rows back, the cursor still on node-07
        await wait_until(pilot, lambda: table.row_count == N)
        assert table.cursor_key[0] == "http://node-07:8000" and table.cursor == 7


@drive
async def test_narrow_terminal_leaves_out_the_least_important_columns_whole(tmp_path):
    async with fleet(tmp_path, size=(80, 24)) as (app, _pilot, table):
        assert table.columns == list(COLUMNS)  # one kind, no tier beyond GPU and offload
        shown = [COLUMNS[i][0] for i in table.shown_columns]
        assert shown[:2] == ["target", "model"] and {"kv", "local", "external"} <= set(shown)
        assert "store_trend" not in shown and "load_trend" not in shown
        # What was left out is a prefix of the drop order: nothing important went first.
        left_out = [key for key, _ in COLUMNS if key not in shown]
        present = [key for key in DROP_ORDER if key in dict(COLUMNS)]
        assert left_out and set(left_out) == set(present[: len(left_out)])
        header = screen_text(app).splitlines()[1:3]
        words = {word for line in header for word in line.split()}
        assert words <= {word for _, label in COLUMNS for word in label.split()}, header
        assert table._width <= 80


@drive
async def test_terminal_narrower_than_the_kept_columns_scrolls_sideways(tmp_path):
    async with fleet(tmp_path, size=(40, 24)) as (app, pilot, _):
        assert "Ext" not in screen_text(app)
        await pilot.press(*["right"] * 10)
        screen = screen_text(app)
        assert "Ext" in screen  # the right-hand columns came into view
        assert "node-00" not in screen  # and the left ones went out
        await pilot.press(*["left"] * 10)
        assert "node-00" in screen_text(app)


def _cursor_background(table: TargetTable):
    strip = table.render_line(2 + table.cursor - table._top)
    return {segment.style.bgcolor for segment in strip if segment.style and segment.text.strip()}


@drive
async def test_cursor_row_dims_when_the_table_loses_focus_and_brightens_again(tmp_path):
    """The table keeps its resolved styles between frames: focus changes must still show."""
    async with fleet(tmp_path) as (_app, pilot, table):
        focused = _cursor_background(table)
        await pilot.press("slash")  # the filter box takes the focus
        await pilot.pause()
        blurred = _cursor_background(table)
        assert blurred and focused and blurred != focused
        await pilot.press("escape")
        await pilot.pause()
        assert _cursor_background(table) == focused
