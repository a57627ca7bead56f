"""Every fixture through parser -> Snapshot -> interval, checked against vLLM's truth.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvops.engines.registry import WANTED, normalise
from kvops.exposition.parser import parse
from kvops.rates import interval
from kvops.snapshot import Snapshot, TargetSample

TARGET = "http://10.0.0.5:8000"

# truth.json key -> EngineSample field, for counters that some metric exposes
COUNTERS = {
    "prefix_cache_queries": "local_queries",
    "prefix_cache_hits": "local_hits",
    "external_prefix_cache_queries": "external_queries",
    "external_prefix_cache_hits": "external_hits",
    "store_bytes": "store_bytes",
    "store_time": "store_seconds",
    "load_bytes": "load_bytes",
    "load_time": "load_seconds",
    "preemptions": "preemptions",
}
GAUGES = {"kv_cache_usage": "kv_cache_usage", "num_running_reqs": "requests_running",
          "num_waiting_reqs": "requests_waiting"}  # fmt: skip


def load(path: Path) -> TargetSample:
    return normalise(parse(path.read_text(), WANTED), TARGET)


def truth(vllm_fixtures: Path, version: str) -> dict:
    doc = json.loads((vllm_fixtures / version / "truth.json").read_text())
    return doc


def _exposed(version: str, key: str, dump_engine: dict) -> bool:
    """Which truth counters the release's exposition carries (vllm-metrics.md §5)."""
    if key.startswith(("store_", "load_")):
        return version not in ("0.10.0", "0.11.2")
    if key.startswith("external_"):
        return version != "0.10.0"
    return True


@pytest.mark.parametrize("version", ["0.33.0", "0.20.0", "0.11.2"])
@pytest.mark.parametrize("dump_index", [0, 1])
def test_offload_counters_equal_what_vllm_was_fed(vllm_fixtures: Path, version: str, dump_index: int):
    doc = truth(vllm_fixtures, version)["offload"]
    dump = doc["dumps"][dump_index]
    sample = load(vllm_fixtures / version / dump["file"])
    assert sample.up and sample.parse_errors == 0
    (engine,) = sample.engines
    assert (engine.target, engine.model_name, engine.engine) == (
        TARGET,
        doc["config"]["served_model_name"],
        "0",
    )
    fed = dump["engines"]["0"]
    for key, field in COUNTERS.items():
        value = getattr(engine, field)
        if not _exposed(version, key, fed):
            assert value is None, f"{key}: not exposed by {version}, must be unknown, got {value}"
        elif version == "0.20.0" and key.startswith("load_") and fed["load_jobs"] == 0:
            # 0.16-0.23 create the CPU_to_GPU series on the first load: absent, not zero.
            assert value is None, key
        else:
            # vLLM sums transfer times in its own order: equal to the last bits of a double.
            assert value == pytest.approx(fed[key], rel=1e-12, abs=0), key
    for key, field in GAUGES.items():
        assert getattr(engine, field) == pytest.approx(fed[key], rel=1e-12), key
    assert engine.cpu_tier_bytes == 137438953472


@pytest.mark.parametrize("version", ["0.33.0", "0.20.0", "0.11.2"])
def test_interval_figures_equal_truth(vllm_fixtures: Path, version: str):
    doc = truth(vllm_fixtures, version)["offload"]
    d1, d2 = doc["dumps"]
    expected = doc["intervals"][0]
    wall = expected["delta"]["virtual_time_s"]
    prev = Snapshot(time=100.0, targets=[load(vllm_fixtures / version / d1["file"])])
    cur = Snapshot(time=100.0 + wall, targets=[load(vllm_fixtures / version / d2["file"])])
    (row,) = interval(prev, cur).to_json()["targets"]
    checks = {
        "local_hit_rate": expected["prefix_cache_hit_rate"],
        "external_hit_rate": expected["external_prefix_cache_hit_rate"],
        "store_bandwidth_bytes_per_second": expected["store_bandwidth_bytes_per_transfer_second"],
        "load_bandwidth_bytes_per_second": expected["load_bandwidth_bytes_per_transfer_second"],
        "store_offered_bytes_per_second": expected["store_bytes_per_wall_second"],
        "load_offered_bytes_per_second": expected["load_bytes_per_wall_second"],
        "load_store_ratio": expected["load_to_store_byte_ratio"],
        "store_bytes": expected["delta"]["store_bytes"],
        "load_bytes": expected["delta"]["load_bytes"],
        "preemptions": expected["delta"]["preemptions"],
    }
    for key, value in checks.items():
        if version == "0.11.2" and ("store" in key or "load" in key):
            assert row[key] is None, f"0.11.2 exposes no transfer metrics: {key} must be null"
            continue
        assert row[key] == pytest.approx(value, rel=1e-9), key


def test_0_33_counts_deprecated_and_flat_transfer_series_once(vllm_fixtures: Path):
    engine = load(vllm_fixtures / "0.33.0" / "offload-t2.prom").engines[0]
    fed = truth(vllm_fixtures, "0.33.0")["offload"]["dumps"][1]["engines"]["0"]
    assert engine.store_bytes == fed["store_bytes"]  # not 2x: both names carry the same bytes
    assert engine.load_bytes == fed["load_bytes"]


def test_0_33_first_dump_has_load_zero_from_precreated_deprecated_series(vllm_fixtures: Path):
    engine = load(vllm_fixtures / "0.33.0" / "offload-t1.prom").engines[0]
    assert engine.load_bytes == 0.0 and engine.load_seconds == 0.0


def test_nooffload_0_33(vllm_fixtures: Path):
    doc = truth(vllm_fixtures, "0.33.0")["nooffload"]
    fed = doc["dumps"][0]["engines"]["0"]
    (engine,) = load(vllm_fixtures / "0.33.0" / "nooffload.prom").engines
    assert engine.local_queries == fed["prefix_cache_queries"]
    assert engine.local_hits == fed["prefix_cache_hits"]
    assert engine.preemptions == fed["preemptions"]
    # vLLM 0.33 registers the external counters even without a connector: they read 0.
    assert engine.external_queries == 0.0 and engine.external_hits == 0.0
    assert engine.store_bytes is None and engine.load_bytes is None
    assert engine.cpu_tier_bytes is None


def test_0_10_prefers_current_names_over_deprecated_ones(vllm_fixtures: Path):
    doc = json.loads((vllm_fixtures / "0.10.0" / "truth.json").read_text())
    text = (vllm_fixtures / "0.10.0" / "nooffload.prom").read_text()
    (engine,) = normalise(parse(text, WANTED), TARGET).engines
    result = parse(text, WANTED)
    assert engine.kv_cache_usage == result.get("vllm:kv_cache_usage_perc")[0][1]
    assert engine.local_queries == result.get("vllm:prefix_cache_queries_total")[0][1]
    assert "gpu_cache_usage_perc" in text  # both generations are in this file
    assert json.dumps(doc)  # truth is readable


def test_0_11_show_hidden_file_reads_the_same_as_without(vllm_fixtures: Path):
    (engine,) = load(vllm_fixtures / "0.11.2" / "showhidden-nooffload.prom").engines
    assert engine.kv_cache_usage is not None and engine.local_queries is not None


def test_early_v1_without_engine_label_is_engine_0(vllm_fixtures: Path):
    sample = load(vllm_fixtures / "pasted" / "02_production-stack-318_early-v1-no-engine-label.txt")
    assert sample.up and sample.parse_errors == 1
    (engine,) = sample.engines
    assert engine.engine == "0" and engine.model_name == "Qwen/Qwen2.5-Coder-32B-Instruct"
    assert engine.kv_cache_usage == 0.0  # from vllm:gpu_cache_usage_perc
    assert engine.local_queries is None  # its line was cut off: unknown, not zero


def test_data_parallel_engines_stay_apart():
    text = "\n".join(
        f'vllm:prefix_cache_queries_total{{engine="{e}",model_name="m"}} {100 * (e + 1)}\n'
        f'vllm:prefix_cache_hits_total{{engine="{e}",model_name="m"}} {10 * (e + 1)}'
        for e in (0, 1, 10, 2)
    )
    engines = normalise(parse(text, WANTED), TARGET).engines
    assert [e.engine for e in engines] == ["0", "1", "2", "10"]
    assert [e.local_queries for e in engines] == [100, 200, 300, 1100]


def test_transfer_type_mediums_map_to_directions():
    text = "\n".join([
        'vllm:kv_offload_total_bytes_total{engine="0",model_name="m",transfer_type="GPU_to_CPU"} 100',
        'vllm:kv_offload_total_bytes_total{engine="0",model_name="m",transfer_type="CPU_to_GPU"} 40',
        'vllm:kv_offload_total_time_total{engine="0",model_name="m",transfer_type="GPU_to_CPU"} 2',
        'vllm:kv_offload_total_time_total{engine="0",model_name="m",transfer_type="CPU_to_GPU"} 1',
        'vllm:kv_offload_total_bytes_total{engine="0",model_name="m",transfer_type="CPU_to_DISK"} 999',
    ])  # fmt: skip
    (engine,) = normalise(parse(text, WANTED), TARGET).engines
    assert (engine.store_bytes, engine.store_seconds, engine.load_bytes, engine.load_seconds) == (
        100,
        2,
        40,
        1,
    )


def test_lmcache_metrics_kept_apart_per_worker(vllm_fixtures: Path):
    sample = load(vllm_fixtures / "pasted" / "05_lmcache-pr-1300_lookup-metrics-in-vllm-metrics.txt")
    assert sample.up and sample.engines == []
    assert [s.worker_id for s in sample.lmcache] == ["0", "1", "2", "3"]
    assert all(s.lookup_requests == 2.0 and s.hit_tokens is None for s in sample.lmcache)


def test_exposition_without_vllm_samples_is_down():
    sample = normalise(parse("python_info 1\n", WANTED), TARGET)
    assert not sample.up and "no vllm: or lmcache: sample, nor one of another engine" in (sample.error or "")
