"""Shared pieces of the `kvops top` tests: the fixture files, their truth, waiting on the app."""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from textual.app import App, ComposeResult
from textual.pilot import Pilot

from kvops.top.linechart import LineChart
from support.paths import VLLM_FIXTURES

V033 = VLLM_FIXTURES / "0.33.0"
T1: Path = V033 / "offload-t1.prom"
T2: Path = V033 / "offload-t2.prom"


class OneChart(App[None]):
    """An app holding one LineChart (id "chart"), for tests that draw a chart by hand."""

    def compose(self) -> ComposeResult:
        yield LineChart(id="chart")


def truth() -> dict[str, Any]:
    return json.loads((V033 / "truth.json").read_text())["offload"]


def truth_interval() -> dict[str, Any]:
    """The t1 -> t2 figures, named as kvops top's JSON names them."""
    doc = truth()
    iv, t2 = doc["intervals"][0], doc["dumps"][1]["engines"]["0"]
    return {
        "model_name": doc["config"]["served_model_name"],
        "kv_cache_usage": t2["kv_cache_usage"],
        "local_hit_rate": iv["prefix_cache_hit_rate"],
        "external_hit_rate": iv["external_prefix_cache_hit_rate"],
        "store_bandwidth_bytes_per_second": iv["store_bandwidth_bytes_per_transfer_second"],
        "load_bandwidth_bytes_per_second": iv["load_bandwidth_bytes_per_transfer_second"],
        "load_store_ratio": iv["load_to_store_byte_ratio"],
        "store_bytes": iv["delta"]["store_bytes"],
        "load_bytes": iv["delta"]["load_bytes"],
        "preemptions": iv["delta"]["preemptions"],
        "requests_running": t2["num_running_reqs"],
        "requests_waiting": t2["num_waiting_reqs"],
        "cpu_tier_bytes": doc["config"]["kv_offload_config_info"]["cpu_kv_cache_size_bytes"],
    }


async def wait_until(pilot: Pilot[Any], condition: Callable[[], bool], timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.02)


def drive(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async Pilot test on a fresh event loop (no pytest async plugin needed)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


def screen_text(app: App[Any]) -> str:
    """What the terminal shows now, as plain text lines (the compositor's own output)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def style_of(app: App[Any], needle: str) -> str:
    """The style of the first on-screen segment that contains `needle`."""
    for strip in app.screen._compositor.render_strips():
        for segment in strip:
            if needle in segment.text:
                return str(segment.style)
    raise AssertionError(f"{needle!r} is not on screen")


def rate_shown(rate: float | None, alarm_below: float = 0.5) -> str:
    """A hit rate as the table shows it: a percentage, "!" after it under 50 % (an alarm that
    NO_COLOR still shows), "-" when unknown."""
    if rate is None:
        return "-"
    return f"{rate * 100:.1f}" + ("!" if rate < alarm_below else "")
