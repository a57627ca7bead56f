"""`kvops top` on every engine's tiers: the detail view's tier table and derived signals, the
extra tier columns, the engine kind where the page has no vLLM, and `--group-by` live.

Every expected figure is computed here from the fixtures' truth.json (the values fed into
each engine's own metrics code), never read back from kvops.
"""

from __future__ import annotations

import io
import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from kvops.frames.replay import ReplaySource
from kvops.top.app import DetailScreen, TopApp
from kvops.top.command import View, print_once
from kvops.top.live_source import LiveSource
from kvops.top.table import TargetTable
from support.upstream import Upstream, body

from .helpers import T1, T2, V033, drive, rate_shown, screen_text, wait_until

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
KVBM = FIXTURES / "dynamo-kvbm"
SGLANG = FIXTURES / "sglang"
TRTLLM = FIXTURES / "trtllm"
LMCACHE = FIXTURES / "lmcache"


def _truth(engine: Path) -> dict[str, Any]:
    return json.loads((engine / "truth.json").read_text())


def cells(app: TopApp) -> dict[str, dict[str, str]]:
    """Visible rows: "target model engine" -> {column key: plain text}, by the table's own columns."""
    table = app.query_one("#targets", TargetTable)
    keys = [key for key, _ in table.columns]
    return {
        " ".join(key): {k: c.plain for k, c in zip(keys, row, strict=True)}
        for key, row in table.shown_cells()
    }


def tier_line(screen: str, tier: str) -> list[str]:
    """The detail view's row for one tier, split into its cells."""
    for line in screen.splitlines():
        words = line.split()
        if words and words[0] == tier:
            return words
    raise AssertionError(f"no {tier} row in\n{screen}")


def figure(screen: str, label: str) -> str:
    """The value right of a label in the detail view's figures."""
    for line in screen.splitlines():
        if f" {label} " in f" {line} ":
            return line.split(label, 1)[1].strip().split("  ")[0]
    raise AssertionError(f"no {label!r} in\n{screen}")


def replay(engine: Path, interval: float = 1.0) -> TopApp:
    files = sorted(str(p) for p in engine.glob("*-t[12].prom"))
    return TopApp(ReplaySource(files, interval), 0.05)


async def _detail(app: TopApp, pilot: Any) -> str:
    await wait_until(pilot, lambda: app.ended)
    await pilot.press("enter")
    await wait_until(pilot, lambda: isinstance(app.screen, DetailScreen))
    await pilot.pause()
    return screen_text(app)


@drive
async def test_detail_view_lists_vllm_0_33s_tiers_as_the_truth_says():
    doc = json.loads((V033 / "truth.json").read_text())["offload"]
    iv = doc["intervals"][0]
    delta = iv["delta"]
    app = TopApp(ReplaySource([str(T1), str(T2)], 1.0), 0.05)
    async with app.run_test(size=(140, 50)) as pilot:
        screen = await _detail(app, pilot)
        gpu = tier_line(screen, "gpu")
        assert gpu[1] == f"{iv['prefix_cache_hit_rate'] * 100:.1f}"
        assert gpu[3] == str(delta["prefix_cache_hits"])  # the GPU cache saved its hits
        host = tier_line(screen, "host")  # vLLM's CPU offloading: the host tier
        assert host[1] == f"{iv['external_prefix_cache_hit_rate'] * 100:.1f}"
        assert host[3] == str(delta["external_prefix_cache_hits"])
        assert host[6] == f"{delta['store_bytes'] / 1e9:.2f}"
        assert host[8] == f"{delta['load_bytes'] / 1e9:.2f}"
        assert host[10] == f"{iv['store_bandwidth_bytes_per_transfer_second'] / 1e9:.2f}"
        assert host[11] == f"{iv['load_bandwidth_bytes_per_transfer_second'] / 1e9:.2f}"
        for tier in ("disk", "peer"):  # counted by prompt_tokens_cached_by_source: served none
            assert tier_line(screen, tier)[1:3] == ["-", "0"]
        moved_gb = (delta["store_bytes"] + delta["load_bytes"]) / 1e9
        assert figure(screen, "offload tokens saved per GB moved") == (
            f"{delta['external_prefix_cache_hits'] / moved_gb:.0f}"
        )
        assert figure(screen, "write-only tier") == "no"  # loads flowed
        assert figure(screen, "engine kind") == "vllm"
        # allocation failures are absent until the first one: unknown, never 0
        assert doc["dumps"][1]["engines"]["0"]["allocation_failures"] == 0
        assert figure(screen, "allocation failures /s") == "-"


@drive
async def test_sglang_hicache_host_tier_in_the_detail_view():
    t1, t2 = (d["fed"] for d in _truth(SGLANG)["dumps"])
    dump2 = _truth(SGLANG)["dumps"][1]
    app = replay(SGLANG)
    async with app.run_test(size=(140, 50)) as pilot:
        await wait_until(pilot, lambda: app.ended)
        [row] = cells(app).values()
        assert row["model"] == "Qwen3-32B" and "kind" not in row  # one kind: no kind column
        screen = await _detail(app, pilot)
        host = tier_line(screen, "host")
        saved = t2["cached_host"] - t1["cached_host"]
        prompt = t2["prompt_tokens"] - t1["prompt_tokens"]
        assert host[2] == str(saved) and host[3] == f"{saved / prompt * 100:.1f}"
        backup = t2["backup_bytes"] - t1["backup_bytes"]
        assert host[5] == f"{backup / 1e9:.2f}"
        assert host[9] == f"{backup / (t2['backup_seconds'] - t1['backup_seconds']) / 1e9:.2f}"
        used, total = dump2["host_used_tokens"], dump2["host_total_tokens"]
        assert f"{used / total * 100:.1f} % ({used} of {total} tok)" in screen
        gpu = tier_line(screen, "gpu")
        assert gpu[2] == str(t2["cached_device"] - t1["cached_device"])
        # the replay's frames are 1 s apart
        assert figure(screen, "tokens dropped /s") == f"{t2['dropped_tokens'] - t1['dropped_tokens']:.2f}"


@drive
async def test_kvbm_is_labelled_by_its_kind_with_its_tiers_hit_rates_and_blocks():
    d1, d2 = _truth(KVBM)["dumps"]
    c1, c2, gauges = d1["counters"], d2["counters"], d2["gauges"]
    app = replay(KVBM)
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_until(pilot, lambda: app.ended)
        [row] = cells(app).values()
        assert row["model"] == "dynamo-kvbm"  # its page names no model
        assert "no vLLM engine" not in screen_text(app)
        # KVBM's own hit-rate gauges, one column per tier beyond the GPU cache
        assert row["hit_host"] == rate_shown(gauges["host_cache_hit_rate"])
        assert row["hit_disk"] == rate_shown(gauges["disk_cache_hit_rate"])
        assert row["hit_storage"] == rate_shown(gauges["object_cache_hit_rate"])
        screen = await _detail(app, pilot)

        def blocks(name: str) -> str:
            return f"{c2[name] - c1[name]}"

        host, disk = tier_line(screen, "host"), tier_line(screen, "disk")
        assert host[1] == f"{gauges['host_cache_hit_rate'] * 100:.1f}" and host[2] == "%*"
        assert host[5:9] == [blocks("offload_blocks_d2h"), "blocks", blocks("onboard_blocks_h2d"), "blocks"]
        assert disk[5:9] == [blocks("offload_blocks_d2d"), "blocks", blocks("onboard_blocks_d2d"), "blocks"]
        assert "* the engine's own hit-rate gauge" in screen
        assert figure(screen, "engine kind") == "dynamo-kvbm"


@drive
async def test_kvbm_object_tier_shows_its_failed_blocks_beside_what_moved():
    """KVBM's object-storage failures (blocks) in the storage row of the detail view."""
    folder = KVBM / "object-failures"
    d1, d2 = _truth(KVBM)["failure_dumps"]
    c1, c2 = d1["counters"], d2["counters"]
    app = replay(folder)
    async with app.run_test(size=(200, 40)) as pilot:
        screen = await _detail(app, pilot)
        storage = tier_line(screen, "storage")

        def delta(name: str) -> str:
            return f"{c2[name] - c1[name]}"

        write_failed, read_failed = delta("object_write_failures"), delta("object_read_failures")
        assert storage[5:9] == [delta("offload_blocks_d2o"), "blocks", f"({write_failed}", "failed)"]
        assert storage[9:13] == [delta("onboard_blocks_o2d"), "blocks", f"({read_failed}", "failed)"]
        assert "failed" not in " ".join(tier_line(screen, "host"))


@drive
async def test_narrow_terminal_leaves_the_extra_tier_columns_out_first():
    app = replay(KVBM)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.ended)
        table = app.query_one("#targets", TargetTable)
        shown = [table.columns[i][0] for i in table.shown_columns]
        assert not any(key.startswith("hit_") for key in shown)
        assert {"target", "model", "kv", "local", "external"} <= set(shown)


@drive
async def test_lmcache_alone_has_a_row_per_worker_with_its_figures():
    """Issue 28: an LMCache page is a row per worker with its lookup hit rate, not one blank
    row labelled lmcache (tests/top/test_lmcache_rows.py checks the figures)."""
    app = replay(LMCACHE)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_until(pilot, lambda: app.ended)
        rows = list(cells(app).values())
        assert len(rows) == 2
        assert all(row["external"] == "29.7!" and row["engine"] in ("0", "1") for row in rows)  # ! under 50 %


# --- several engines, live -------------------------------------------------------------------

ENGINES = {  # route -> (t1, t2)
    "vllm-a": (T1, T2),
    "vllm-b": (T1, T2),
    "sglang": (SGLANG / "hicache-t1.prom", SGLANG / "hicache-t2.prom"),
    "kvbm": (KVBM / "kvbm-t1.prom", KVBM / "kvbm-t2.prom"),
    "trtllm": (TRTLLM / "trtllm-t1.prom", TRTLLM / "trtllm-t2.prom"),
}


def _t1_then_t2(first: Path, second: Path) -> Any:
    """The first request gets t1, every later one t2 (one interval, then a still engine)."""
    lock, served = threading.Lock(), [0]

    def handle(h: BaseHTTPRequestHandler) -> None:
        with lock:
            served[0] += 1
            n = served[0]
        body((first if n == 1 else second).read_bytes())(h)

    return handle


@contextmanager
def engines() -> Iterator[list[str]]:
    upstream = Upstream()
    try:
        yield [upstream.route(name, _t1_then_t2(*files)) for name, files in ENGINES.items()]
    finally:
        upstream.stop()


class TwoFrames:
    """LiveSource's first two scrapes, then nothing new: the live view holds the t1 -> t2
    interval, as `--once` computes it (a wrapper at the edge; the scraping is LiveSource's)."""

    def __init__(self, source: LiveSource) -> None:
        self.source, self.frames = source, 0
        self.description, self.live, self.finished = source.description, True, False

    def next(self) -> Any:
        if self.frames >= 2:
            return None
        self.frames += 1
        return self.source.next()

    def close(self) -> None:
        self.source.close()


def _once_groups(urls: list[str], by: str) -> list[dict[str, Any]]:
    out, saved = io.StringIO(), sys.stdout
    sys.stdout = out
    try:
        source = LiveSource(urls, timeout=2.0, hardware=False)
        try:
            assert print_once(source, 0.2, True, View(group_by=by)) == 0
        finally:
            source.close()
    finally:
        sys.stdout = saved
    return json.loads(out.getvalue())["groups"]


def _as_shown(group: dict[str, Any]) -> dict[str, str]:
    def num(name: str, scale: float, digits: int) -> str:
        value = group[name]
        return "-" if value is None else f"{value / scale:.{digits}f}"

    return {
        "engines": str(group["engines"]),
        "down": str(group["engines_down"]),
        "local": rate_shown(group["local_hit_rate"]),
        "external": rate_shown(group["external_hit_rate"]),
        "store": num("store_bandwidth_bytes_per_second", 1e9, 2),
        "load": num("load_bandwidth_bytes_per_second", 1e9, 2),
        "running": num("requests_running", 1, 0),
        "waiting": num("requests_waiting", 1, 0),
        "preempt": num("preemptions", 1, 0),
    }


@pytest.mark.parametrize("by", ["kind", "model"])
@drive
async def test_group_by_live_equals_once_group_by(by):
    with engines() as urls:
        expected = {g["group"]: _as_shown(g) for g in _once_groups(urls, by)}
    with engines() as urls:
        source = TwoFrames(LiveSource(urls, timeout=2.0, hardware=False))
        app = TopApp(source, interval=0.2, view=View(group_by=by))
        async with app.run_test(size=(160, 40)) as pilot:
            await wait_until(pilot, lambda: app.board.frames == 2 and not app._scraping)
            await pilot.pause()
            rows = {key.split(" ", 2)[2].strip(): row for key, row in cells(app).items()}
            shown = {name: {k: row[k] for k in expected[name]} for name, row in rows.items()}
            assert shown == expected
            assert f"grouped by {by}" in screen_text(app)
            await pilot.press("enter")  # a group has no detail view of its own
            assert not isinstance(app.screen, DetailScreen)
    if by == "kind":
        assert set(expected) == {"vllm", "sglang", "dynamo-kvbm", "trtllm"}
        assert expected["vllm"]["engines"] == "2"
        iv = json.loads((V033 / "truth.json").read_text())["offload"]["intervals"][0]
        # two engines doing the same work: the group's hit rate is each one's
        assert expected["vllm"]["local"] == f"{iv['prefix_cache_hit_rate'] * 100:.1f}"


@drive
async def test_a_page_of_mixed_kinds_names_each_rows_kind():
    with engines() as urls:
        source = TwoFrames(LiveSource(urls, timeout=2.0, hardware=False))
        app = TopApp(source, interval=0.2)
        async with app.run_test(size=(200, 40)) as pilot:
            await wait_until(pilot, lambda: app.board.frames == 2 and not app._scraping)
            await pilot.pause()
            rows = cells(app)
            kinds = {key.split(" ", 1)[0].rsplit("/", 1)[1]: row["kind"] for key, row in rows.items()}
            assert kinds == {"vllm-a": "vllm", "vllm-b": "vllm", "sglang": "sglang",
                             "kvbm": "dynamo-kvbm", "trtllm": "trtllm"}  # fmt: skip
            await pilot.press("slash", *"dynamo", "enter")  # the filter matches kinds too
            await wait_until(pilot, lambda: len(cells(app)) == 1)


def test_once_text_names_each_rows_kind_on_a_mixed_page(capsys):
    with engines() as urls:
        source = LiveSource(urls, timeout=2.0, hardware=False)
        try:
            assert print_once(source, 0.2, False, View()) == 0
        finally:
            source.close()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["TARGET", "MODEL", "ENG", "KIND"]
    kinds = {line.split()[0].rsplit("/", 1)[1]: line.split()[3] for line in lines[1:6]}
    assert kinds == {"vllm-a": "vllm", "vllm-b": "vllm", "sglang": "sglang",
                     "kvbm": "dynamo-kvbm", "trtllm": "trtllm"}  # fmt: skip
    kvbm = next(line.split() for line in lines if line.split()[0].endswith("/kvbm"))
    assert kvbm[1] == "dynamo-kvbm"  # no model on its page: its kind in the model column


TIERING = FIXTURES / "vllm-tiering"
SIMPLE = FIXTURES / "vllm-simple-offload"


@drive
async def test_vllm_multi_tier_rows_show_each_tiers_hit_rate_and_the_detail_its_jobs():
    """Issue 28: vLLM's TieringOffloadingSpec pages (written by vLLM 0.33's own code) give a
    hit-rate column per tier, and the detail view each tier's failures and jobs in flight."""
    truth = _truth(TIERING)
    t1, t2 = truth["dumps"]

    def rate(label: str) -> float:
        hits = t2["fed"]["chunk_hits"][label] - t1["fed"]["chunk_hits"][label]
        return hits / (t2["fed"]["chunk_queries"][label] - t1["fed"]["chunk_queries"][label])

    app = replay(TIERING)
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_until(pilot, lambda: app.ended)
        [row] = cells(app).values()
        assert row["hit_disk"] == rate_shown(rate("1:fs"))  # "!" after a rate under 50 %
        assert row["hit_storage"] == rate_shown(rate("2:obj"))
        screen = await _detail(app, pilot)
    failed = sum(t2["fed"][f"{k}_job_failures"]["2:obj"] - t1["fed"][f"{k}_job_failures"]["2:obj"]
                 for k in ("promotion", "cascade"))  # fmt: skip
    storage = " ".join(tier_line(screen, "storage"))
    assert f"{failed} failed · 0/1 in flight" in storage
    assert "Jobs (promote/cascade)" in screen
    assert figure(screen, "promotion alloc. failures /s") == "3.00"


@drive
async def test_simple_cpu_offload_detail_shows_blocks_and_the_pool_full_share():
    truth = _truth(SIMPLE)
    t1, t2 = truth["dumps"]
    outcomes = {
        k: t2["fed"]["save_outcomes"][k] - t1["fed"]["save_outcomes"][k] for k in t2["fed"]["save_outcomes"]
    }
    app = replay(SIMPLE)
    async with app.run_test(size=(200, 50)) as pilot:
        screen = await _detail(app, pilot)
    host = " ".join(tier_line(screen, "host"))
    assert f"{outcomes['stored']:.0f} blocks" in host
    assert f"{t2['gauges']['used_blocks']} of {truth['info']['capacity_blocks']} blk pinned" in host
    share = outcomes["dropped_cpu_full"] / sum(outcomes.values())
    assert figure(screen, "stores dropped, pool full") == f"{share * 100:.1f} %"


@drive
async def test_sglang_storage_detail_shows_eviction_and_unfulfilled_prefetches():
    folder = FIXTURES / "sglang-storage"
    t1, t2 = _truth(folder)["dumps"]
    app = replay(folder)
    async with app.run_test(size=(200, 50)) as pilot:
        screen = await _detail(app, pilot)
    evicted = t2["fed"]["evicted_tokens"] - t1["fed"]["evicted_tokens"]
    assert figure(screen, "tokens evicted /s") == f"{evicted:.0f}"
    short = t2["fed"]["unfulfilled"]["host_capacity"] - t1["fed"]["unfulfilled"]["host_capacity"]
    assert figure(screen, "storage prefetch short (host_capacity)") == f"{short:.0f} tok"
