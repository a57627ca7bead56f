"""LMCache targets are rows of `kvops top` (issue 28): legacy pages written by LMCache 0.5.6's own
code, and multi-process (lmcache_mp_*) pages, give their figures in `--once --json` and the table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvops.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _once(capsys: pytest.CaptureFixture[str], *pages: Path) -> dict:
    assert main(["top", "--once", "--json", "--replay", *map(str, pages)]) == 0
    return json.loads(capsys.readouterr().out)


def test_legacy_lmcache_workers_are_rows_with_hit_rate_remote_bandwidth_cpu_use_and_evictions(capsys):
    folder = FIXTURES / "lmcache"
    truth = json.loads((folder / "truth.json").read_text())
    t1, t2 = truth["dumps"]
    doc = _once(capsys, folder / t1["file"], folder / t2["file"])
    rows = {row["engine"]: row for row in doc["targets"]}
    assert sorted(rows) == sorted(t2["fed"])  # one row per worker
    for worker, row in rows.items():
        before, after = t1["fed"][worker], t2["fed"][worker]

        def delta(name: str, before: dict = before, after: dict = after) -> float:
            return after[name] - before[name]

        assert row["engine_kind"] == "lmcache" and row["up"] is True
        assert row["external_hit_rate"] == pytest.approx(delta("lookup_hits") / delta("lookup_tokens"))
        # remote read while transferring: LMCache's own remote get time (milliseconds on the page)
        assert row["load_bandwidth_bytes_per_second"] == pytest.approx(
            delta("remote_read_bytes") / (delta("remote_get_ms_sum") / 1000)
        )
        seconds = doc["interval_seconds"]
        assert row["load_offered_bytes_per_second"] == pytest.approx(delta("remote_read_bytes") / seconds)
        assert row["store_offered_bytes_per_second"] == pytest.approx(delta("remote_write_bytes") / seconds)
        assert row["evictions_per_second"] == pytest.approx(delta("evictions") / seconds)
        assert row["tiers"]["host"]["used_bytes"] == t2["local_cache_usage_bytes"]
        # nothing a fleet sum would count twice beside vLLM's own external tier
        assert row["external_queries"] is None and row["store_bytes"] is None


def test_multi_process_lmcache_is_a_row_with_its_level_split(capsys):
    folder = FIXTURES / "lmcache-mp"
    truth = json.loads((folder / "truth.json").read_text())
    t1, t2 = truth["dumps"]
    doc = _once(capsys, folder / t1["file"], folder / t2["file"])
    [row] = doc["targets"]

    def delta(name: str) -> float:
        return t2["fed"][name] - t1["fed"][name]

    assert row["engine_kind"] == "lmcache"
    assert row["external_hit_rate"] == pytest.approx(delta("hit_tokens") / delta("requested_tokens"))
    assert row["tiers"]["host"]["tokens_saved"] == delta("l1_hit_tokens")
    assert row["tiers"]["storage"]["prompt_share"] == pytest.approx(
        delta("l2_hit_tokens") / delta("requested_tokens")
    )


def test_the_table_shows_the_lmcache_row(capsys):
    folder = FIXTURES / "lmcache"
    assert (
        main(["top", "--once", "--replay", str(folder / "lmcache-t1.prom"), str(folder / "lmcache-t2.prom")])
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines[1:] if line.startswith("replay")]
    assert len(rows) == 2 and all("29.7 %" in line for line in rows)  # the lookup hit rate
