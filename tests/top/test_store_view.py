"""A Mooncake master in `kvops top`: a store row of its own, whose detail view shows what the
store served and refused and how full it is (pages the real master wrote,
tests/fixtures/mooncake-master/README.md; truth.json is the client's own account)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kvops.frames.replay import ReplaySource
from kvops.top.app import DetailScreen, TopApp

from .helpers import drive, screen_text, wait_until

FOLDER = Path(__file__).resolve().parents[1] / "fixtures" / "mooncake-master"
TRUTH = json.loads((FOLDER / "truth.json").read_text())["scenarios"]


def figure(screen: str, label: str) -> str:
    for line in screen.splitlines():
        if f" {label} " in f" {line} ":
            return line.split(label, 1)[1].strip().split("  ")[0]
    raise AssertionError(f"no {label!r} in\n{screen}")


async def detail_of(pages: list[Path]) -> str:
    app = TopApp(ReplaySource([str(p) for p in pages], 1.0), 0.05)
    async with app.run_test(size=(220, 60)) as pilot:
        await wait_until(pilot, lambda: app.ended)
        table = screen_text(app)
        assert "mooncake" in table  # the row names its kind
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, DetailScreen))
        await pilot.pause()
        return screen_text(app)


@drive
async def test_a_full_stores_detail_shows_refused_puts_evictions_and_its_fill() -> None:
    truth: dict[str, Any] = TRUTH["full"]
    screen = await detail_of([FOLDER / "full-t1.prom", FOLDER / "full-t2.prom"])
    moved = truth["interval"]
    assert figure(screen, "engine kind") == "mooncake"
    assert figure(screen, "store lookups") == f"{moved['lookups']} ({moved['hits']} hit)"
    assert figure(screen, "puts") == str(moved["puts"])
    failed = moved["put_failures"]
    assert figure(screen, "failed put starts") == f"{failed} ({failed} no space)"
    assert figure(screen, "puts abandoned") == "0"
    evicted = re.fullmatch(r"(\d+) keys \(([\d.]+) MiB\)", figure(screen, "evicted"))
    assert evicted and int(evicted.group(1)) == truth["end"]["puts_ok_ever"] - truth["interval"]["hits"]
    assert figure(screen, "active clients") == "1"
    assert figure(screen, "memory used").endswith("(13.0 MiB of 16.0 MiB)")  # 13 keys of 1 MiB left
    assert re.search(r"segment 127\.0\.0\.1:\d+ +81\.2 % of 16\.0 MiB", screen), screen


@drive
async def test_a_hostile_segment_name_is_shown_never_run(tmp_path: Path) -> None:
    """A segment label is the store's text: an escape sequence in it is shown escaped."""
    paths = []
    for name in ("healthy-t1.prom", "healthy-t2.prom"):
        text = re.sub(r'segment="[^"]*"', 'segment="evil\x1b]0;pwned\x07"', (FOLDER / name).read_text())
        paths.append(tmp_path / name)
        paths[-1].write_text(text)
    screen = await detail_of(paths)
    assert "\x1b" not in screen and "\x07" not in screen
    assert "segment evil" in screen
