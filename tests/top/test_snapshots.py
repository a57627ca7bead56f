"""Pinned screens (pytest-textual-snapshot): the main view over the fixture replay, and help.

Update after an intended change with `pytest tests/top/test_snapshots.py --snapshot-update`
and look at the SVGs it writes under __snapshots__/ before committing them.
"""

from __future__ import annotations

from kvops.frames.replay import ReplaySource
from kvops.top.app import TopApp

from .helpers import T1, T2

SIZE = (120, 40)


def _app() -> TopApp:
    return TopApp(ReplaySource([str(T1), str(T2)], 0.05), 0.05)


async def _until_replayed(pilot) -> None:
    app = pilot.app
    while not app.ended:
        await pilot.pause(0.02)
    await pilot.pause()


def test_main_screen(snap_compare):
    assert snap_compare(_app(), terminal_size=SIZE, run_before=_until_replayed)


def test_main_screen_80x24(snap_compare):
    assert snap_compare(_app(), terminal_size=(80, 24), run_before=_until_replayed)


def test_main_screen_200x60(snap_compare):
    assert snap_compare(_app(), terminal_size=(200, 60), run_before=_until_replayed)


def test_help_screen(snap_compare):
    assert snap_compare(_app(), press=["question_mark"], terminal_size=SIZE, run_before=_until_replayed)


def test_detail_screen(snap_compare):
    assert snap_compare(_app(), press=["enter"], terminal_size=SIZE, run_before=_until_replayed)
