"""Board (what top keeps between frames) and the unit formatting, without a terminal."""

from __future__ import annotations

from kvops.snapshot import EngineSample, Snapshot, TargetSample
from kvops.top import numbers as units
from kvops.top.board import HISTORY_POINTS, Board


def _snap(t: float, *targets: TargetSample) -> Snapshot:
    return Snapshot(time=t, targets=list(targets))


def _up(
    target: str, store_bytes: float, hits: float = 50, queries: float = 100, model: str = "m"
) -> TargetSample:
    engine = EngineSample(target=target, model_name=model, store_bytes=store_bytes,
                          store_seconds=store_bytes / 10, local_hits=hits, local_queries=queries,
                          cpu_tier_bytes=64 * 2**30)  # fmt: skip
    return TargetSample(target, up=True, engines=[engine])


def test_first_frame_has_state_but_no_interval_figures():
    board = Board()
    board.update(_snap(0, _up("a", 100)))
    [row] = board.rows.values()
    assert row.up and row.get("store_bytes") is None and row.get("local_hit_rate") is None
    assert list(row.store_history) == [None]


def test_rates_come_from_rates_interval():
    board = Board()
    board.update(_snap(0, _up("a", 100, hits=10, queries=20)))
    board.update(_snap(2, _up("a", 300, hits=40, queries=80)))
    [row] = board.rows.values()
    assert row.get("store_bytes") == 200
    assert row.get("store_bandwidth_bytes_per_second") == 10.0  # 200 B over 20 s of transfer time
    assert row.get("local_hit_rate") == 0.5  # 30 hits of 60 queries
    assert list(row.store_history) == [None, 100.0]  # 200 B over 2 s of wall time


def test_down_target_keeps_its_row_and_history_and_comes_back():
    board = Board()
    board.update(_snap(0, _up("a", 100)))
    board.update(_snap(1, _up("a", 200)))
    board.update(_snap(2, TargetSample("a", up=False, error="connection refused")))
    [(key, row)] = board.rows.items()
    assert key == ("a", "m", "0")
    assert not row.up and row.error == "connection refused"
    assert row.get("kv_cache_usage") is None and row.get("store_bytes") is None  # nothing stale shown
    assert list(row.store_history) == [None, 100.0, None]
    board.update(_snap(3, _up("a", 300)))
    assert row.up and list(board.rows) == [key]
    assert row.get("store_bytes") is None  # the start of this interval was unknown
    board.update(_snap(4, _up("a", 400)))
    assert row.get("store_bytes") == 100


def test_never_up_target_has_one_row_that_is_replaced_when_it_comes_up():
    board = Board()
    board.update(_snap(0, TargetSample("a", up=False, error="refused")))
    assert list(board.rows) == [("a", "", "")]
    board.update(_snap(1, _up("a", 1)))
    assert list(board.rows) == [("a", "m", "0")]


def test_a_target_gone_from_the_source_is_shown_down():
    board = Board()
    board.update(_snap(0, _up("a", 1), _up("b", 1)))
    board.update(_snap(1, _up("a", 2)))
    assert board.rows[("b", "m", "0")].up is False
    assert board.rows[("b", "m", "0")].error == "not in the last sample"


def test_filter_and_sort_worst_hit_rate_first():
    board = Board()
    board.update(_snap(0, _up("x", 0, 0, 0, "llama"), _up("y", 0, 0, 0, "qwen"), _up("z", 0, 0, 0, "llama")))
    board.update(
        _snap(1, _up("x", 0, 90, 100, "llama"), _up("y", 0, 10, 100, "qwen"), _up("z", 0, 50, 100, "llama"))
    )
    assert [r.target for r in board.visible("LLAMA")] == ["x", "z"]
    assert [r.target for r in board.visible("", sort=1)] == ["y", "z", "x"]  # local hit, worst first
    assert [r.target for r in board.visible("", sort=0)] == ["x", "y", "z"]
    assert board.offload_tier_bytes() == 64 * 2**30


def test_history_is_bounded():
    board = Board()
    for i in range(HISTORY_POINTS + 50):
        board.update(_snap(i, _up("a", i * 10.0)))
    assert len(board.rows[("a", "m", "0")].store_history) == HISTORY_POINTS


def test_units_people_read():
    assert units.gbps(30_334_622_924.87) == "30.33 GB/s"  # GB = 1e9
    assert units.gib(137_438_953_472) == "128.0 GiB"  # GiB = 2**30
    assert units.pct(0.5818) == "58.2 %"
    assert units.pct(None) == units.gbps(None) == "-"
    assert units.hit_rate_style(0.49) and not units.hit_rate_style(0.5) and not units.hit_rate_style(None)
    assert units.link_style(0.91) and not units.link_style(0.9)


def test_sparkline_scales_to_its_maximum_and_shows_gaps():
    assert units.sparkline([0.0, 5.0, 10.0, None, 10.0], 5) == "▁▅█ █"
    assert units.sparkline([1.0], 4) == "   █"
    assert units.sparkline([0.0, 0.0], 2) == "▁▁"


def test_a_target_down_for_the_whole_history_window_is_dropped():
    board = Board()
    board.update(_snap(0, _up("a", 1), _up("b", 1)))
    for i in range(1, HISTORY_POINTS):
        board.update(_snap(i, _up("a", i)))
    assert ("b", "m", "0") in board.rows  # down for 299 frames: still shown
    board.update(_snap(HISTORY_POINTS, _up("a", HISTORY_POINTS)))
    assert list(board.rows) == [("a", "m", "0")]


def test_a_target_up_without_vllm_engines_is_listed_not_hidden():
    board = Board()
    board.update(_snap(0, TargetSample("lmcache", up=True)))
    [row] = board.rows.values()
    assert row.key == ("lmcache", "", "") and row.up and row.get("kv_cache_usage") is None


def test_rows_are_capped_and_what_was_cut_is_counted():
    from kvops.top.board import MAX_ROWS

    def fleet(t: float) -> Snapshot:
        return _snap(t, *[_up(f"http://n{i:05d}:8000", t * 100) for i in range(MAX_ROWS + 25)])

    board = Board()
    board.update(fleet(0))
    board.update(fleet(1))
    assert len(board.rows) == MAX_ROWS and board.rows_cut == 25
    assert len(board.interval.targets) == MAX_ROWS  # cut before the rates: bounded work too
    uncapped = Board(max_rows=None)  # --once is never cut
    uncapped.update(fleet(0))
    assert len(uncapped.rows) == MAX_ROWS + 25 and uncapped.rows_cut == 0


def test_history_is_float32_rings_not_python_floats():
    board = Board()
    for i in range(HISTORY_POINTS * 2):
        board.update(_snap(i, _up("a", i * 10.0)))
    row = board.rows[("a", "m", "0")]
    assert len(row.trend) == HISTORY_POINTS and row.store_history._data.itemsize == 4
