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


def test_multi_process_health_failures_by_reason_and_usage_equal_what_lmcache_was_fed(capsys):
    folder = FIXTURES / "lmcache-mp"
    truth = json.loads((folder / "truth.json").read_text())
    t1, t2 = truth["dumps"]
    [row] = _once(capsys, folder / t1["file"], folder / t2["file"])["targets"]
    expected = {}
    names = {"l1_allocation": "l1_allocation_failure_chunks", "l1_read": "l1_read_failure_chunks",
             "l2_prefetch": "l2_prefetch_failure_chunks"}  # fmt: skip
    for kind, name in names.items():
        for key, value in t2["fed"][name].items():
            if value:  # LMCache's counter exists from its first failure
                expected[f"{kind}/{key}"] = value - t1["fed"][name][key]
    assert row["lmcache_failures"] == expected
    assert row["tiers"]["host"]["usage_ratio"] == t2["gauges"]["l1_usage_ratio"]
    assert row["tiers"]["host"]["used_bytes"] == t2["gauges"]["l1_memory_usage_bytes"]
    assert row["tiers"]["storage"]["used_bytes"] == sum(t2["gauges"]["l2_usage_bytes"].values())


def test_multi_process_health_survives_the_exporter_and_its_decoder():
    from kvops.engines.registry import WANTED, normalise
    from kvops.exporter.encode import encode
    from kvops.exporter.families import target_families
    from kvops.exposition.parser import parse
    from kvops.frames.kvops_exposition import EXPORTED, decode

    sample = normalise(
        parse((FIXTURES / "lmcache-mp" / "lmcache-mp-t2.prom").read_text(), WANTED), "http://h:9000"
    )
    [back] = decode(parse(encode(target_families([sample])).decode(), EXPORTED), 0.0).targets
    assert back.lmcache == sample.lmcache
    assert sample.lmcache[0].l2_prefetch_failures["l1_oom"] > 0
