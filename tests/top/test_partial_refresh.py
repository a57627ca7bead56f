"""The table and the charts send Textual only the lines that changed (kvops/top/table.py,
linechart.py): what the terminal shows after each frame must be what a full redraw shows.

A line that changed but was not refreshed stays on screen from Textual's line cache, so each
frame's screen is compared with the screen after every widget is told to redraw whole.
"""

from __future__ import annotations

import threading

from kvops.snapshot import EngineSample, Snapshot, TargetSample
from kvops.top.app import TopApp
from kvops.top.linechart import LineChart
from kvops.top.table import TargetTable

from .helpers import drive, screen_text, wait_until


def _engine(target: str, step: int, moving: bool) -> EngineSample:
    """An engine whose counters grow by a different amount each step (`moving`), or not at all."""
    k = step * (step + 1) // 2 if moving else 0
    return EngineSample(
        target=target, model_name="m", kv_cache_usage=0.1 + (0.07 * step if moving else 0.0),
        local_queries=100.0 + 40 * k, local_hits=50.0 + 9 * k * k,
        external_queries=10.0 + 30 * k, external_hits=5.0 + 7 * k,
        store_bytes=1e9 + 3e8 * k, store_seconds=1.0 + 0.2 * k, load_bytes=1e9 + 1e8 * k * k,
        load_seconds=1.0 + 0.05 * k, requests_running=float(step if moving else 2),
        requests_waiting=0.0, cpu_tier_bytes=64 * 2**30,
    )  # fmt: skip


def _frame(step: int) -> Snapshot:
    """Four targets: one moving every frame, one never, one from the third frame on, one going
    down at the fourth (rows that change, rows that stay, a row whose whole line changes)."""

    def up(name: str, steps: int, moving: bool = True) -> TargetSample:
        target = f"http://{name}:8000"
        return TargetSample(target, up=True, engines=[_engine(target, steps, moving)])

    targets = [up("moving", step), up("still", step, moving=False), up("late", max(0, step - 2))]
    if step == 3:
        targets.append(TargetSample("http://flaky:8000", up=False, error="connection refused"))
    else:
        targets.append(up("flaky", step))
    return Snapshot(time=float(step), targets=targets)


class _Stepped:
    """A live source that hands over the next frame only when the test releases it."""

    live = True
    description = "stepped"
    finished = False

    def __init__(self, frames: list[Snapshot]) -> None:
        self.frames = frames
        self.release = threading.Semaphore(0)

    def next(self) -> Snapshot | None:
        if not self.release.acquire(timeout=10) or not self.frames:
            return None
        return self.frames.pop(0)

    def close(self) -> None:
        self.release.release()


@drive
async def test_each_frame_on_screen_equals_a_full_redraw(monkeypatch):
    partial: dict[str, int] = {"TargetTable": 0, "LineChart": 0}  # refreshes of some lines only

    def counting(cls):
        refresh = cls.refresh

        def spy(self, *regions, **kwargs):
            partial[cls.__name__] += bool(regions)
            return refresh(self, *regions, **kwargs)

        return spy

    for cls in (TargetTable, LineChart):
        monkeypatch.setattr(cls, "refresh", counting(cls))
    source = _Stepped([_frame(step) for step in range(6)])
    app = TopApp(source, 0.02)
    async with app.run_test(size=(120, 40)) as pilot:
        for step in range(6):
            source.release.release()
            await wait_until(pilot, lambda step=step: app.board.frames == step + 1)
            await pilot.pause()
            shown = screen_text(app)
            assert ("flaky" in shown and "down" in shown) or step != 3
            for widget in (app.query_one("#targets", TargetTable), *app.query(LineChart)):
                widget.refresh()  # the whole widget drawn again, from what it holds now
            await pilot.pause()
            assert screen_text(app) == shown, f"frame {step}: a changed line was not redrawn"
    assert partial["TargetTable"] and partial["LineChart"], partial  # the path under test ran
