"""Issue 42: SGLang 0.5.23's and LMCache 0.5.6's unread families, KVBM v2's disk_to_host edge
and the dynamo_kvbm_ prefix, from pages each engine's own metrics code wrote (KVBM: written from
its source), through `kvops top --once --json --replay` (where a user starts) and the exporter,
checked against the truth each generator kept. Expected figures are worked out here from what
was fed (quantiles from the observations dropped into SGLang's own bucket bounds), not from
kvops's reading."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent.parent / "fixtures"
POOL = FIXTURES / "sglang-pool"
HEALTH = FIXTURES / "lmcache-health"
KVBM = FIXTURES / "dynamo-kvbm"
GB = 1e9
# SGLang 0.5.23 RadixCacheMetricsCollector's default load-back bounds (metrics_collector.py)
LOAD_BACK_BOUNDS = [0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.009, 0.01, 0.02, 0.03,
                    0.04, 0.05, 0.1, 0.2, 0.5, 1.0]  # fmt: skip


def once_json(*files: Path) -> dict:
    """`kvops top --once --json --replay` as a user runs it."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([sys.executable, "-m", "kvops.cli", "top", "--once", "--json", "--replay",
                          *map(str, files)], capture_output=True, text=True, env=env, check=True)  # fmt: skip
    return json.loads(out.stdout)


def truth(folder: Path) -> dict:
    return json.loads((folder / "truth.json").read_text())


def histogram_quantile(q: float, observations: list[float], bounds: list[float]) -> float:
    """Prometheus's histogram_quantile over the observations counted into `bounds`: the bucket
    the rank falls in, linear between its bounds (the first bucket starts at 0)."""
    counts = [sum(1 for o in observations if o <= b) for b in bounds]
    rank = q * len(observations)
    for i, cumulative in enumerate(counts):
        if cumulative >= rank:
            lower, below = (0.0, 0) if i == 0 else (bounds[i - 1], counts[i - 1])
            return lower + (bounds[i] - lower) * (rank - below) / (cumulative - below)
    raise AssertionError("rank beyond the last finite bound")


def _sglang_expected() -> tuple[dict, dict]:
    doc = truth(POOL)
    (t1, t2) = doc["dumps"]
    return t1, t2


def _check_sglang_row(row: dict) -> None:
    t1, t2 = _sglang_expected()
    f1, f2 = t1["fed"], t2["fed"]
    assert row["engine_kind"] == "sglang" and row["model_name"] == "Qwen/Qwen3-32B"
    assert (
        row["storage_prefetch_hit_tokens"]
        == f2["storage_prefetch_hit_tokens"] - f1["storage_prefetch_hit_tokens"]
    )
    assert row["storage_deferred_tokens"] == {
        reason: f2["deferred"][reason] - f1["deferred"][reason]
        for reason in f2["deferred"]
        if f2["deferred"][reason] - f1["deferred"][reason]
    }
    assert row["backup_dropped_tokens"] == f2["backup_dropped_tokens"] - f1["backup_dropped_tokens"]
    assert row["prefetch_aux_alloc_failed_tokens"] == (
        f2["prefetch_aux_alloc_failed_tokens"] - f1["prefetch_aux_alloc_failed_tokens"]
    )
    for state in ("available", "evictable", "used"):  # state at the end of the interval
        assert row[f"kv_{state}_tokens"] == t2["pool"][f"kv_{state}_tokens"]
    assert row["kv_capacity_tokens"] == truth(POOL)["max_total_num_tokens"]
    load_backs = f2["load_back_seconds"][len(f1["load_back_seconds"]) :]
    assert row["load_back_p90_seconds"] == pytest.approx(
        histogram_quantile(0.9, load_backs, LOAD_BACK_BOUNDS)
    )
    evictions = f2["eviction_seconds"][len(f1["eviction_seconds"]) :]
    assert row["eviction_seconds"] == pytest.approx(sum(evictions))
    storage = row["tiers"]["storage"]
    for key, direction in (("prefetch_bandwidth_gbps", "load"), ("backup_bandwidth_gbps", "store")):
        ops = f2[key][len(f1[key]) :]
        assert storage[f"{direction}_op_bandwidth_mean_bytes_per_second"] == pytest.approx(
            sum(ops) / len(ops) * GB
        )
    prompt = f2["prompt_tokens"] - f1["prompt_tokens"]
    cached = sum(f2["cached"][s] - f1["cached"][s] for s in f2["cached"])
    assert row["cached_prompt_share"] == pytest.approx(cached / prompt)  # across device, host and L3


def test_sglang_0_5_23_families_reach_once_json_as_fed():
    (row,) = once_json(POOL / "pool-t1.prom", POOL / "pool-t2.prom")["targets"]
    assert row["engine"] == "0"
    _check_sglang_row(row)


def test_a_page_through_sglangs_router_is_read_as_sglang():
    """`sglang_` names and a worker_addr label: the same figures, one engine per worker."""
    (row,) = once_json(POOL / "router" / "pool-t1.prom", POOL / "router" / "pool-t2.prom")["targets"]
    assert row["engine"] == truth(POOL)["router_worker"] + "/0"
    _check_sglang_row(row)
    t1, t2 = _sglang_expected()
    assert (
        row["tiers"]["storage"]["load_tokens"]
        == t2["fed"]["prefetched_tokens"] - t1["fed"]["prefetched_tokens"]
    )


def test_lmcache_remote_health_deltas_per_worker_as_fed():
    """Put and blocking-get failures are gauges holding running counts: shown as deltas."""
    doc = truth(HEALTH)
    t1, t2 = doc["dumps"]
    rows = {
        r["engine"]: r for r in once_json(HEALTH / "health-t1.prom", HEALTH / "health-t2.prom")["targets"]
    }
    assert set(rows) == {"0", "1"}
    for worker, row in rows.items():
        before, after = t1["fed"][worker], t2["fed"][worker]
        assert row["engine_kind"] == "lmcache"
        for key, fed in (("remote_put_failures", "put_failures"),
                         ("remote_get_blocking_failures", "get_blocking_failures"),
                         ("remote_ping_errors", "ping_errors"), ("remote_ping_successes", "ping_successes"),
                         ("local_cpu_evict_failures", "local_cpu_evict_failures"),
                         ("forced_unpins", "forced_unpins")):  # fmt: skip
            assert row[key] == after[fed] - before[fed], (worker, key)
        assert row["remote_ping_latency_seconds"] == pytest.approx(
            t2["remote_ping_latency_ms"][worker] / 1000
        )


def test_lmcache_multiprocess_l1_and_l2_chunks_reach_once_json():
    folder = FIXTURES / "lmcache-mp"
    t1, t2 = (d["fed"] for d in truth(folder)["dumps"])
    (row,) = once_json(folder / "lmcache-mp-t1.prom", folder / "lmcache-mp-t2.prom")["targets"]
    pairs = (
        ("l1_read_chunks", "l1_read_chunks"),
        ("l1_write_chunks", "l1_write_chunks"),
        ("l1_evicted_chunks", "l1_evicted_chunks"),
        ("l2_stored_chunks", "l2_store_completed_chunks"),
        ("l2_prefetched_chunks", "l2_prefetch_load_completed_chunks"),
    )
    for key, fed in pairs:
        assert row[key] == t2[fed] - t1[fed], key


@pytest.mark.parametrize("folder", ["v2", "v2-dynamo-prefix"])
def test_kvbm_v2_disk_to_host_edge_and_the_dynamo_prefix(folder: str):
    dumps = [d for d in truth(KVBM)["v2_dumps"] if d["file"].startswith(folder + "/")]
    before, after = (d["counters"] for d in dumps)
    (row,) = once_json(*(KVBM / d["file"] for d in dumps))["targets"]
    assert row["engine_kind"] == "dynamo-kvbm"
    edges = row["transfer_blocks_by_edge"]
    assert edges["disk_to_host"] == after["onboard_blocks_d2h"] - before["onboard_blocks_d2h"]
    assert edges["host_to_gpu"] == after["onboard_blocks_h2d"] - before["onboard_blocks_h2d"]
    assert edges["host_to_disk"] == after["offload_blocks_h2d"] - before["offload_blocks_h2d"]
    assert row["tiers"]["host"]["engine_hit_rate"] == dumps[1]["gauges"]["host_cache_hit_rate"]


def test_the_exporter_serves_issue_42_figures(upstream, make_exporter):
    from support.exporter_harness import value
    from support.upstream import body

    pages = {
        "sglang": POOL / "router" / "pool-t2.prom",
        "lmcache": HEALTH / "health-t2.prom",
        "kvbm": KVBM / "v2-dynamo-prefix" / "kvbm-v2-t2.prom",
        "vllm": FIXTURES / "vllm-real" / "0.32.0" / "fs-tier-after.prom",
    }
    urls = {kind: upstream.route(kind, body(path.read_bytes())) for kind, path in pages.items()}
    s = make_exporter(list(urls.values())).samples()
    fed, pool = truth(POOL)["dumps"][1]["fed"], truth(POOL)["dumps"][1]["pool"]
    sg = urls["sglang"]
    assert (
        value(s, "kvops_offload_storage_prefetch_hit_tokens_total", target=sg)
        == fed["storage_prefetch_hit_tokens"]
    )
    assert (
        value(s, "kvops_offload_storage_deferred_tokens_total", target=sg, reason="host_capacity")
        == (fed["deferred"]["host_capacity"])
    )
    assert (
        value(s, "kvops_offload_storage_backup_dropped_tokens_total", target=sg)
        == fed["backup_dropped_tokens"]
    )
    assert value(s, "kvops_kv_pool_tokens", target=sg, state="evictable") == pool["kv_evictable_tokens"]
    assert value(s, "kvops_kv_pool_capacity_tokens", target=sg) == truth(POOL)["max_total_num_tokens"]
    assert value(s, "kvops_offload_load_back_seconds_count", target=sg) == len(fed["load_back_seconds"])
    health = truth(HEALTH)["dumps"][1]
    lm = urls["lmcache"]
    assert (
        value(s, "kvops_lmcache_remote_failures_total", target=lm, worker_id="1", op="put")
        == (health["fed"]["1"]["put_failures"])
    )
    assert (
        value(s, "kvops_lmcache_remote_pings_total", target=lm, worker_id="0", outcome="error")
        == (health["fed"]["0"]["ping_errors"])
    )
    kv = urls["kvbm"]
    counters = [d for d in truth(KVBM)["v2_dumps"] if d["file"].startswith("v2-dynamo-prefix/")][1][
        "counters"
    ]
    assert (
        value(s, "kvops_offload_transfer_blocks_total", target=kv, edge="disk_to_host")
        == (counters["onboard_blocks_d2h"])
    )
    # The real vLLM 0.32.0 page's KV families no reader consumes, counted
    expected = set(EXPECTED_KV.read_text().split())
    from kvops.engines.registry import WANTED_FAMILIES

    on_page = _type_names(pages["vllm"]) & expected
    assert value(s, "kvops_target_unread_families", target=urls["vllm"]) == len(on_page - WANTED_FAMILIES)


# --- unread families -----------------------------------------------------------------------
REAL = FIXTURES / "vllm-real" / "0.32.0"
EXPECTED_KV = REAL / "kv-families.txt"


def _type_names(path: Path) -> set[str]:
    return {line.split()[2] for line in path.read_text().splitlines() if line.startswith("# TYPE ")}


@pytest.mark.parametrize("page", sorted(p.name for p in REAL.glob("*.prom")))
def test_the_kv_pattern_picks_the_real_vllm_pages_kv_families(page: str):
    """The committed list is every KV-related family of the real vLLM 0.32.0 pages: the pattern
    calls exactly those KV (never the multimodal cache, http_, process_ or request timing)."""
    from kvops.scrape.unread import is_kv_family

    names = {n for n in _type_names(REAL / page) if not n.endswith("_created")}
    expected = set(EXPECTED_KV.read_text().split())
    assert {n for n in names if is_kv_family(n)} == names & expected
    assert "vllm:mm_cache_hits_total" in names and not is_kv_family("vllm:mm_cache_hits_total")


def test_unread_families_in_once_json_are_the_kv_families_no_reader_consumes():
    from kvops.engines.registry import WANTED_FAMILIES

    page = REAL / "fs-tier-after.prom"
    (row, *_) = once_json(page, page)["targets"]
    expected = sorted((_type_names(page) & set(EXPECTED_KV.read_text().split())) - WANTED_FAMILIES)
    assert row["unread_families"] == expected
    assert "vllm:request_prefill_kv_computed_tokens" in expected  # read by no reader today
    assert "vllm:kv_offload_store_bytes_total" not in expected  # read


def test_unread_families_are_worked_out_when_due_or_after_the_target_was_down():
    from kvops.scrape.unread import UnreadFamilies

    now = [0.0]
    unread = UnreadFamilies(clock=lambda: now[0], every=60.0)
    page = (REAL / "fs-tier-after.prom").read_text()
    first = unread.whole_page(page)
    assert first and unread.whole_page("") is first  # kept within the minute
    now[0] = 61.0
    assert unread.whole_page("") == []  # worked out again once due
    assert unread.whole_page(page) == []  # and kept
    unread.forget()  # the target was down: the next whole page is looked at
    assert unread.whole_page(page) == first


def test_a_filtered_page_keeps_the_whole_pages_unread_families() -> None:
    """A prometheus_client server answers kvops's filtered page with only what kvops reads, so
    no unread family is on it: the list from the last whole page is kept."""
    import time

    from prometheus_client import CollectorRegistry, Counter, Histogram

    from kvops.scrape.target import TargetScraper
    from tests.sources.test_page_filter import LABELS, serve, vllm_like, wait_for_decision

    registry = CollectorRegistry()
    vllm_like(registry)
    computed = Histogram("vllm:request_prefill_kv_computed_tokens", "KV computed per request", LABELS,
                         registry=registry, buckets=[1, 10, 100])  # fmt: skip
    mm = Counter("vllm:mm_cache_hits", "multimodal cache hits", LABELS, registry=registry)
    computed.labels("m", "0").observe(5)
    mm.labels("m", "0").inc()
    url, server = serve(registry)
    scraper = TargetScraper(url)
    try:
        whole = [scraper.scrape(time.monotonic() + 5) for _ in range(2)]
        wait_for_decision(scraper)
        assert whole[-1].unread_families == ["vllm:request_prefill_kv_computed_tokens"]
        assert scraper.fetch_url() != scraper.url  # the filtered page is in use
        sample = scraper.scrape(time.monotonic() + 5)
        assert sample.up and sample.unread_families == whole[-1].unread_families
    finally:
        scraper.close()
        server.shutdown()  # type: ignore[attr-defined]


def test_a_restarted_target_is_looked_at_again_at_once(upstream):
    """Down, then up as another release: its next whole page names the families, not the list
    kept from before."""
    import time

    from kvops.scrape.target import TargetScraper
    from support.upstream import body

    plain = (REAL / "plain-after.prom").read_text()
    # the next release's page: one more KV family no reader knows
    tiered = (
        plain + "# TYPE vllm:kv_offload_next_release_total counter\nvllm:kv_offload_next_release_total 1\n"
    )
    url = upstream.route("vllm", body(plain))
    scraper = TargetScraper(url, probe=False)
    try:
        before = scraper.scrape(time.monotonic() + 5).unread_families
        upstream.route("vllm", body("down for a restart", status=503))
        assert not scraper.scrape(time.monotonic() + 5).up
        upstream.route("vllm", body(tiered))
        after = scraper.scrape(time.monotonic() + 5).unread_families
    finally:
        scraper.close()
    assert before is not None and after == sorted([*before, "vllm:kv_offload_next_release_total"])
