"""vLLM's whole offload surface, from fixtures written by vLLM's own metrics code, exported as
kvops_* series and read back with prometheus_client's own parser: every figure equals what was
fed into vLLM (truth.json), absent stays absent, histograms keep buckets, sum and count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kvops import names
from kvops.engines.registry import WANTED, normalise
from kvops.exporter.encode import encode
from kvops.exporter.families import target_families
from kvops.exposition.parser import parse
from kvops.rates import GB, interval, quantile
from kvops.snapshot import Histogram, Snapshot, TargetSample

TARGET = "http://10.0.0.5:8000"
REL = 1e-9


def load(path: Path) -> TargetSample:
    return normalise(parse(path.read_text(), WANTED), TARGET)


def exported(sample: TargetSample) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The exporter's page for one target, parsed by prometheus_client (not by kvops)."""
    text = encode(target_families([sample])).decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def one(page: dict, name: str, **labels: str) -> float | None:
    found = [v for lab, v in page.get(name, []) if all(lab.get(k) == x for k, x in labels.items())]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


def truth(vllm_fixtures: Path, version: str) -> dict:
    return json.loads((vllm_fixtures / version / "truth.json").read_text())["offload"]


@pytest.mark.parametrize("dump", [0, 1])
def test_033_every_offload_family_equals_what_vllm_was_fed(vllm_fixtures: Path, dump: int):
    doc = truth(vllm_fixtures, "0.33.0")
    fed = doc["dumps"][dump]["engines"]["0"]
    page = exported(load(vllm_fixtures / "0.33.0" / doc["dumps"][dump]["file"]))
    approx = lambda v: pytest.approx(v, rel=REL, abs=1e-12)  # noqa: E731
    # which tier served each prompt token: the three sources add up to the prompt tokens fed
    by_source = {lab["source"]: v for lab, v in page["kvops_prompt_tokens_total"]}
    assert set(by_source) == {"local_compute", "local_cache_hit", "external_kv_transfer"}
    assert all(lab["engine_kind"] == "vllm" for lab, _ in page["kvops_prompt_tokens_total"])
    assert sum(by_source.values()) == approx(fed["prompt_tokens"])
    cached = "kvops_prompt_tokens_cached_total"
    assert one(page, cached, source="device") == approx(fed["prefix_cache_hits"])
    assert one(page, cached, source="host") == approx(fed["external_prefix_cache_hits"])
    assert one(page, cached, source="disk") == 0 and one(page, cached, source="p2p") == 0
    # transfer-size histograms: count = transfer jobs, sum = bytes (flat 0.24+ names)
    size = "kvops_offload_transfer_size_bytes"
    assert one(page, size + "_count", direction="store") == approx(fed["store_jobs"])
    assert one(page, size + "_sum", direction="store") == approx(fed["store_bytes"])
    assert one(page, size + "_bucket", direction="store", le="+Inf") == approx(fed["store_jobs"])
    # load: t1 has no flat load series yet; the deprecated pre-created one says 0 jobs
    assert one(page, size + "_count", direction="load") == approx(fed["load_jobs"])
    assert one(page, size + "_sum", direction="load") == approx(fed["load_bytes"])
    chunks = "kvops_offload_cpu_allocation_chunks"
    assert one(page, chunks + "_count") == approx(fed["cpu_allocation_calls"])
    assert one(page, chunks + "_sum") == approx(fed["cpu_chunks_allocated"])
    delay = "kvops_offload_lookup_delay_seconds"
    assert one(page, delay + "_count", mode="sync") == approx(fed["lookup_calls"])
    assert one(page, delay + "_count", mode="async") is None  # no deferred lookup yet: absent
    ratio = "kvops_offload_cpu_in_flight_ratio"
    assert one(page, ratio, op="any") == approx(fed["cpu_cache_usage_perc"])
    assert one(page, ratio, op="read") == approx(fed["cpu_cache_read_usage_perc"])
    assert one(page, ratio, op="write") == approx(fed["cpu_cache_write_usage_perc"])
    # absent, never 0: no threshold configured, no failure happened
    assert "kvops_offload_stores_skipped_total" not in page
    assert "kvops_offload_allocation_failures_total" not in page
    waiting = sum(v for _, v in page.get("kvops_vllm_requests_waiting_by_reason", []))
    assert waiting == approx(fed["num_waiting_reqs"])
    assert one(page, "kvops_offload_tier_info", tier="host") == 1.0


def test_every_exported_family_is_declared_in_names(vllm_fixtures: Path):
    page = exported(load(vllm_fixtures / "0.33.0" / "offload-t2.prom"))
    known = {n for spec in names.all_specs() for n in spec.sample_names}
    assert set(page) <= known


def test_histogram_buckets_pass_through_unchanged(vllm_fixtures: Path):
    """Bucket bounds and counts as vLLM wrote them, so histogram_quantile works on kvops_*."""
    text = (vllm_fixtures / "0.33.0" / "offload-t2.prom").read_text()
    raw = {
        s.labels["le"]: s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == "vllm:kv_offload_lookup_sync_delay_seconds_bucket"
    }
    page = exported(load(vllm_fixtures / "0.33.0" / "offload-t2.prom"))
    ours = {
        lab["le"]: v for lab, v in page["kvops_offload_lookup_delay_seconds_bucket"] if lab["mode"] == "sync"
    }
    assert {float(k): v for k, v in ours.items()} == {float(k): v for k, v in raw.items()}


@pytest.mark.parametrize("version", ["0.33.0", "0.20.0"])
def test_interval_tiers_equal_truth(vllm_fixtures: Path, version: str):
    doc = truth(vllm_fixtures, version)
    d1, d2 = doc["dumps"]
    f1, f2 = d1["engines"]["0"], d2["engines"]["0"]
    wall = doc["intervals"][0]["delta"]["virtual_time_s"]
    prev = Snapshot(time=5.0, targets=[load(vllm_fixtures / version / d1["file"])])
    cur = Snapshot(time=5.0 + wall, targets=[load(vllm_fixtures / version / d2["file"])])
    (row,) = interval(prev, cur).targets
    prompt = f2["prompt_tokens"] - f1["prompt_tokens"]
    local_saved = f2["prefix_cache_hits"] - f1["prefix_cache_hits"]
    assert row.prompt_tokens == pytest.approx(prompt, rel=REL)
    gpu, host = row.tiers["gpu"], row.tiers["host"]
    assert gpu.prompt_share == pytest.approx(local_saved / prompt, rel=REL)
    assert gpu.hit_rate == pytest.approx(doc["intervals"][0]["prefix_cache_hit_rate"], rel=REL)
    assert host.hit_rate == pytest.approx(doc["intervals"][0]["external_prefix_cache_hit_rate"], rel=REL)
    store = f2["store_bytes"] - f1["store_bytes"]
    load_ = f2["load_bytes"] - f1["load_bytes"]
    assert host.store_bytes == pytest.approx(store, rel=REL)
    assert host.load_bytes == pytest.approx(load_, rel=REL)
    assert host.load_bandwidth_bytes_per_second == pytest.approx(
        load_ / (f2["load_time"] - f1["load_time"]), rel=REL
    )
    if version == "0.33.0":  # per-tier hits (prompt_tokens_cached_by_source) from 0.32
        host_saved = f2["external_prefix_cache_hits"] - f1["external_prefix_cache_hits"]
        assert host.tokens_saved == pytest.approx(host_saved, rel=REL)
        assert host.prompt_share == pytest.approx(host_saved / prompt, rel=REL)
        assert row.offload_tokens_saved_per_gb_moved == pytest.approx(
            host_saved / ((store + load_) / GB), rel=REL
        )
    assert row.write_only_tier is False  # loads happened
    assert row.allocation_failures_per_second is None  # never exposed: unknown, not 0
    json.dumps(interval(prev, cur).to_json(), allow_nan=False)


def test_write_only_tier_and_pressure_per_second():
    from kvops.snapshot import EngineSample

    def snap(t: float, **values: float) -> Snapshot:
        eng = EngineSample(target=TARGET, model_name="m", **values)  # type: ignore[arg-type]
        return Snapshot(time=t, targets=[TargetSample(TARGET, up=True, engines=[eng])])

    (row,) = interval(
        snap(0, store_bytes=1e9, store_seconds=0.1, allocation_failures=2),
        snap(10, store_bytes=3e9, store_seconds=0.2, allocation_failures=12, stores_skipped=5),
    ).targets
    assert row.write_only_tier is True
    assert row.allocation_failures_per_second == pytest.approx(1.0)
    assert row.stores_skipped_per_second == pytest.approx(0.5)  # created in between: from 0


def test_quantile_matches_histogram_quantile_interpolation():
    hist = Histogram(((0.001, 50.0), (0.01, 90.0), (0.1, 100.0), (float("inf"), 100.0)), 1.0, 100.0)
    assert quantile(0.5, hist) == pytest.approx(0.001)
    assert quantile(0.99, hist) == pytest.approx(0.01 + 0.09 * 9 / 10)
    assert quantile(0.99, Histogram(((1.0, 0.0), (float("inf"), 0.0)), 0.0, 0.0)) is None


@pytest.mark.parametrize("dump", [0, 1])
def test_020_earlier_forms_equal_what_vllm_was_fed(vllm_fixtures: Path, dump: int):
    """0.20: transfer sizes only as vllm:kv_offload_size{transfer_type}, no per-tier cached
    tokens, no lookup histograms, no in-flight ratio: those stay absent."""
    doc = truth(vllm_fixtures, "0.20.0")
    fed = doc["dumps"][dump]["engines"]["0"]
    page = exported(load(vllm_fixtures / "0.20.0" / doc["dumps"][dump]["file"]))
    approx = lambda v: pytest.approx(v, rel=REL, abs=1e-12)  # noqa: E731
    assert sum(v for _, v in page["kvops_prompt_tokens_total"]) == approx(fed["prompt_tokens"])
    size = "kvops_offload_transfer_size_bytes"
    assert one(page, size + "_count", direction="store") == approx(fed["store_jobs"])
    assert one(page, size + "_sum", direction="store") == approx(fed["store_bytes"])
    # the CPU_to_GPU series is created on the first load: absent before it, never 0
    loads = one(page, size + "_count", direction="load")
    assert loads == (approx(fed["load_jobs"]) if fed["load_jobs"] else None)
    waiting = sum(v for _, v in page.get("kvops_vllm_requests_waiting_by_reason", []))
    assert waiting == approx(fed["num_waiting_reqs"])
    absent = (
        "kvops_prompt_tokens_cached_total",
        "kvops_offload_lookup_delay_seconds_count",
        "kvops_offload_cpu_in_flight_ratio",
        "kvops_offload_allocation_failures_total",
    )
    assert [name for name in absent if name in page] == []
    assert one(page, "kvops_offload_tier_info", tier="host") == 1.0
