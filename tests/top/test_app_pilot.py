"""The Textual app driven by Pilot: what it shows equals truth.json, and the keys work."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from textual.containers import VerticalScroll
from textual.widgets import Input

from kvops.frames.replay import ReplaySource
from kvops.top.app import COLUMNS, DetailScreen, HelpScreen, TopApp
from kvops.top.live_source import LiveSource
from kvops.top.table import Cell, TargetTable
from support.upstream import Upstream, body

from .helpers import T1, T2, V033, drive, screen_text, truth_interval, wait_until


def cells(app: TopApp) -> dict[str, dict[str, Cell]]:
    """Visible rows: "target model engine" -> {column key: cell}."""
    table = app.query_one("#targets", TargetTable)
    columns = [key for key, _ in COLUMNS]
    return {" ".join(key): dict(zip(columns, row, strict=True)) for key, row in table.shown_cells()}


def plain(cell: Cell) -> str:
    return cell.plain


def replay_app(*files: Any, interval: float = 0.05) -> TopApp:
    return TopApp(ReplaySource([str(f) for f in files], interval), interval)


@drive
async def test_shown_values_equal_the_truth_interval():
    app = replay_app(T1, T2)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.ended)
        truth = truth_interval()
        [row] = cells(app).values()
        assert plain(row["target"]) == "replay"
        assert plain(row["model"]) == truth["model_name"].rsplit("/", 1)[1]
        expected = {
            "kv": f"{truth['kv_cache_usage'] * 100:.1f}" + ("!" if truth["kv_cache_usage"] >= 0.95 else ""),
            "local": f"{truth['local_hit_rate'] * 100:.1f}" + ("!" if truth["local_hit_rate"] < 0.5 else ""),
            # under 50 %: an alarm, marked "!" as well as red (NO_COLOR shows the mark)
            "external": f"{truth['external_hit_rate'] * 100:.1f}"
            + ("!" if truth["external_hit_rate"] < 0.5 else ""),
            "store": f"{truth['store_bandwidth_bytes_per_second'] / 1e9:.2f}",
            "load": f"{truth['load_bandwidth_bytes_per_second'] / 1e9:.2f}",
            "ratio": f"{truth['load_store_ratio']:.2f}",
            "running": f"{truth['requests_running']}",
            "waiting": f"{truth['requests_waiting']}",
            "preempt": f"{truth['preemptions']}",
        }
        assert {k: plain(row[k]) for k in expected} == expected
        assert (expected["local"], expected["store"]) == ("58.2", "30.33")  # what a person sees
        # The figures behind the cells are the truth to 1e-9, not just to the digits shown.
        [board_row] = app.board.rows.values()
        for name, value in truth.items():
            if not isinstance(value, str):
                assert board_row.get(name) == pytest.approx(value, rel=1e-9), name
        # Colours that mean something: 18 % external hits stand out, 58 % local do not.
        assert "red" in str(row["external"].style)
        assert "red" not in str(row["local"].style)
        assert "yellow" in str(row["kv"].style)  # 98 % of the GPU KV cache in use
        status = screen_text(app)
        assert "holding the last frame" in status
        host = screen_text(app)
        assert "128.0 GiB" in host  # kv_offload_config_info's cpu_kv_cache_size_bytes


@drive
async def test_first_frame_shows_state_but_no_rates():
    app = replay_app(T2)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.ended)
        [row] = cells(app).values()
        assert plain(row["kv"]) == "98.4!"  # 95 % full or more: marked (and yellow)
        assert plain(row["running"]) == "97"
        assert [plain(row[k]) for k in ("local", "external", "store", "load", "preempt")] == ["-"] * 5


@drive
async def test_help_opens_and_q_quits_from_it():
    app = replay_app(T1, T2)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        app.screen.query_one(VerticalScroll).scroll_end(animate=False)  # longer than 40 rows
        await pilot.pause()
        text = screen_text(app)
        assert "GB/s = 10⁹ bytes per second" in text and "GiB = 2³⁰ bytes" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("question_mark", "q")
    assert app.return_code == 0


@drive
async def test_enter_opens_the_detail_view_of_the_picked_target():
    app = replay_app(T1, T2)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.ended)
        await pilot.press("enter")
        assert isinstance(app.screen, DetailScreen)
        figures = screen_text(app)
        for text in ("meta-llama/Llama-3.1-8B-Instruct", "58.2 %", "18.2 %", "30.33 GB/s", "38.84 GB/s",
                     "27.61 GB", "128.0 GiB"):  # fmt: skip
            assert text in figures, text
        await pilot.press("escape")
        assert not isinstance(app.screen, DetailScreen)


@drive
async def test_filter_sort_and_pause():
    upstream = Upstream()
    try:
        urls = [upstream.route(name, body(T2.read_bytes())) for name in ("alpha", "beta")]
        app = TopApp(LiveSource(urls, timeout=2.0, hardware=False), interval=0.2)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: len(cells(app)) == 2)
            await pilot.press("slash", "b", "e", "t", "a")
            await wait_until(pilot, lambda: len(cells(app)) == 1)
            assert "beta" in next(iter(cells(app)))
            await pilot.press("enter")  # keeps the filter, back to the table
            assert app.text_filter == "beta" and app.query_one("#targets", TargetTable).has_focus
            await pilot.press("slash", "escape")  # clears it
            assert app.text_filter == "" and not app.query_one("#filter", Input).has_class("shown")
            await wait_until(pilot, lambda: len(cells(app)) == 2)
            await pilot.press("s")
            assert app.sort_index == 1 and "sort: local hit" in screen_text(app)
            await pilot.press("p")
            frames = app.board.frames
            await pilot.pause(0.3)
            assert app.board.frames == frames and "PAUSED" in screen_text(app)
            await pilot.press("p")
            await wait_until(pilot, lambda: app.board.frames > frames)
    finally:
        upstream.stop()


@drive
async def test_a_target_that_goes_down_shows_down_keeps_history_and_comes_back():
    upstream = Upstream()
    try:
        url = upstream.route("vllm", body(T1.read_bytes()))
        app = TopApp(LiveSource([url], timeout=2.0, hardware=False), interval=0.05)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: app.board.frames >= 2)
            upstream.routes["/vllm/metrics"] = body(T2.read_bytes())
            [key] = app.board.rows
            # The T1 -> T2 frame moved bytes; later T2 -> T2 frames move none.
            await wait_until(pilot, lambda: any(app.board.rows[key].store_history))
            history = len(app.board.rows[key].store_history)
            upstream.routes["/vllm/metrics"] = body("down for maintenance\n", status=503)
            await wait_until(pilot, lambda: not app.board.rows[key].up)
            [row] = cells(app).values()
            assert plain(row["kv"]) == "down" and "red" in str(row["kv"].style)
            assert "HTTP 503" in (app.board.rows[key].error or "")
            assert plain(row["model"]) == "HTTP 503 Service Unavailable"  # the reason, in the table
            assert "1 down" in screen_text(app)
            assert len(app.board.rows[key].store_history) > history  # history kept, gaps added
            upstream.routes["/vllm/metrics"] = body(T2.read_bytes())
            await wait_until(pilot, lambda: app.board.rows[key].up)
            assert list(app.board.rows) == [key]  # the same row came back
    finally:
        upstream.stop()


@drive
async def test_the_ui_keeps_answering_while_a_scrape_hangs():
    upstream = Upstream()
    try:
        from support.upstream import hang

        url = upstream.route("slow", hang(10.0))
        app = TopApp(LiveSource([url], timeout=5.0, hardware=False), interval=0.05)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(0.2)
            assert app._scraping  # the scrape is in flight in its worker ...
            await pilot.press("question_mark")  # ... and keys still work
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape", "s")
            assert app.sort_index == 1
            started = time.monotonic()
        assert time.monotonic() - started < 2.0  # quitting does not wait for the hung scrape
    finally:
        upstream.stop()


@drive
async def test_brackets_in_a_filter_are_text_not_markup():
    app = replay_app(T1, T2)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.ended)
        await pilot.press("slash", "[", "/", "]")
        await pilot.pause()
        assert "filter: '[/]'" in screen_text(app)
        assert cells(app) == {}


class _BrokenAfterFirst(ReplaySource):
    """A replay whose second read fails, as a source with a bug would."""

    def next(self):
        if self.position >= 1:
            raise RuntimeError("disk gone\nsecond line")
        return super().next()


@drive
async def test_a_failing_source_is_reported_and_the_screen_survives():
    app = TopApp(_BrokenAfterFirst([str(T1), str(T2)], 0.05), 0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.scrape_error is not None)
        assert "scrape error: RuntimeError: disk gone" in screen_text(app)
        assert "second line" not in screen_text(app)
        assert [plain(row["running"]) for row in cells(app).values()] == ["60"]  # T1 stays shown
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)


@drive
async def test_charts_plot_the_truth_interval():
    """The charts' last points are the fixture's truth interval, as the table's cells are."""
    from kvops.top.charts import ChartPanel

    truth = truth_interval()
    doc = json.loads((V033 / "truth.json").read_text())["offload"]
    iv = doc["intervals"][0]
    app = TopApp(ReplaySource([str(T1), str(T2)], 1.0), 0.05)  # the replay's interval: 1 s
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.ended)
        await pilot.pause()
        shown = app.query_one("#charts", ChartPanel).shown
        last = {
            chart: {label: points[-1] for label, points in lines.items()} for chart, lines in shown.items()
        }
        assert last["hit"]["GPU cache"] == (0.0, pytest.approx(truth["local_hit_rate"] * 100))
        assert last["hit"]["offload tier"] == (0.0, pytest.approx(truth["external_hit_rate"] * 100))
        assert last["bandwidth"]["stored"] == (0.0, pytest.approx(truth["store_bytes"] / 1e9, rel=1e-6))
        assert last["bandwidth"]["loaded"] == (0.0, pytest.approx(truth["load_bytes"] / 1e9, rel=1e-6))
        assert last["saved"]["GPU"] == (0.0, pytest.approx(iv["delta"]["prefix_cache_hits"] / 1000))
        # Per tier (rates' tokens_saved): vLLM's CPU offloading is the host tier, and its
        # prompt_tokens_cached_by_source puts every external hit there; disk, peer and the
        # connector served none, so they are not drawn (the detail view lists their 0).
        assert last["saved"]["host"] == (
            0.0,
            pytest.approx(iv["delta"]["external_prefix_cache_hits"] / 1000),
        )
        assert set(last["saved"]) == {"GPU", "host"}
        # The first frame has no interval: the line starts unknown, not at zero.
        assert shown["hit"]["GPU cache"][0] == (-1.0, None)
        await pilot.press("w")  # 10 s -> 1 min: over one interval, the same figure
        assert app.window == 60.0
        assert app.query_one("#charts", ChartPanel).shown["hit"]["GPU cache"][-1][1] == pytest.approx(
            truth["local_hit_rate"] * 100
        )


@drive
async def test_escape_sequences_in_labels_are_shown_not_run(tmp_path):
    """A target's model_name with terminal escapes: every place top shows it escapes them."""
    from kvops.top.command import print_once

    evil = "evil\x1b]0;pwned\x07\x1b[31m\u202e"
    files = []
    for i, path in enumerate((T1, T2)):
        text = path.read_text().replace("meta-llama/Llama-3.1-8B-Instruct", evil.replace("\x1b", "\\x1b"))
        files.append(tmp_path / f"f{i}.prom")
        # The exposition format escapes only \\, " and newline: raw control bytes go in as they are.
        files[-1].write_text(text.replace("\\x1b", "\x1b"))
    app = TopApp(ReplaySource([str(f) for f in files], 1.0), 0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.ended)
        [row] = app.board.rows.values()
        assert row.model == evil  # kept as the target sent it
        screen = screen_text(app)
        assert "\x1b" not in screen and "\x07" not in screen and "\u202e" not in screen
        assert "evil\\x1b]0;pwned\\x07" in screen
        await pilot.press("enter")
        assert isinstance(app.screen, DetailScreen)
        await pilot.pause()
        detail = screen_text(app)
        assert "\x1b" not in detail and "\\u202e" in detail
    source = ReplaySource([str(f) for f in files], 1.0)
    import io
    import sys

    out, saved = io.StringIO(), sys.stdout
    sys.stdout = out
    try:
        assert print_once(source, 1.0, False) == 0
    finally:
        sys.stdout = saved
    assert "\x1b" not in out.getvalue() and "evil\\x1b]0;pwned" in out.getvalue()


def _page_sum(path: Any, name: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    return sum(
        s.value
        for fam in text_string_to_metric_families(path.read_text())
        for s in fam.samples
        if s.name == name
    )


@drive
async def test_payoff_chart_and_detail_show_ttft_p90_beside_the_offload_share(capsys):
    """The payoff chart's TTFT p90 is --once --json's (checked against promtool in
    tests/payoff); its offload share is the pages' external hits over their prompt tokens."""
    from kvops.cli import main
    from kvops.top.charts import ChartPanel

    assert main(["top", "--once", "--json", "--replay", str(T1), str(T2)]) == 0
    [entry] = json.loads(capsys.readouterr().out)["targets"]
    p90 = entry["ttft_p90_seconds"]
    assert p90 is not None and p90 > 0
    prompt = _page_sum(T2, "vllm:prompt_tokens_by_source_total") - _page_sum(
        T1, "vllm:prompt_tokens_by_source_total"
    )
    hits = json.loads((V033 / "truth.json").read_text())["offload"]["intervals"][0]["delta"]
    app = TopApp(ReplaySource([str(T1), str(T2)], 1.0), 0.05)
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_until(pilot, lambda: app.ended)
        await pilot.pause()
        payoff = app.query_one("#charts", ChartPanel).shown["payoff"]
        assert payoff["TTFT p90"][-1] == (0.0, pytest.approx(p90 * 1000))
        assert payoff["offload share"][-1] == (
            0.0,
            pytest.approx(hits["external_prefix_cache_hits"] / prompt * 100),
        )
        assert "TTFT p90" in screen_text(app)  # the column
        await pilot.press("enter")
        await pilot.pause()
        detail = screen_text(app)
        assert re.search(rf"TTFT p90 +{p90 * 1000:.0f} ms", detail)
        share = hits["external_prefix_cache_hits"] / prompt * 100
        assert re.search(rf"offload share of prompt +{share:.1f} %", detail)


@drive
async def test_nothing_answering_shows_the_first_run_hint_and_each_reason():
    """`kvops top` with nothing on its URL: the row says why in a few words, and the screen how
    to get something to look at; the hint goes once a target answers."""
    upstream = Upstream()
    try:
        url = upstream.route("vllm", body("maintenance\n", status=503))
        app = TopApp(LiveSource([url, "http://127.0.0.1:1"], timeout=2.0, hardware=False), interval=0.05)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: app.board.frames >= 1)
            await pilot.pause()
            reasons = {key.split(" ")[0]: plain(row["model"]) for key, row in cells(app).items()}
            assert reasons == {
                "http://127.0.0.1:1": "connection refused",
                url: "HTTP 503 Service Unavailable",
            }
            text = screen_text(app)
            assert "kvops sim --listen 127.0.0.1:8000 &" in text and "nothing answers at" in text, text
            upstream.routes["/vllm/metrics"] = body(T1.read_bytes())
            await wait_until(pilot, lambda: any(r.up for r in app.board.rows.values()))
            await pilot.pause()
            assert "kvops sim --listen" not in screen_text(app)
    finally:
        upstream.stop()


@drive
async def test_a_simulators_tier_is_not_judged_against_this_host(capsys):
    """`kvops top` on `kvops sim` with this machine's own host collector: a simulated 100,000
    GiB tier raised red RAM and /dev/shm alarms; the simulator's page says it is one."""
    from kvops.sim import server
    from kvops.top.command import print_once

    with server.start(kv_offloading_size_gib=100_000) as sim:
        app = TopApp(LiveSource([sim.url], timeout=2.0, hardware=True), interval=0.2)
        async with app.run_test(size=(160, 40)) as pilot:
            await wait_until(pilot, lambda: app.board.has_interval)
            await pilot.pause()
            [host] = [line for line in screen_text(app).splitlines() if "RAM" in line]
            assert "!" not in host and "100000.0 GiB simulated, not judged against this host" in host
        source = LiveSource([sim.url], timeout=2.0, hardware=True, one_shot=True)
        try:
            assert print_once(source, 0.2, as_json=False) == 0
        finally:
            source.close()
    [host] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Host:")]
    assert "!" not in host and "simulated, not judged" in host
