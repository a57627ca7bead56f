"""Engines other than vLLM: pages written by each engine's own metrics code (or, where it
needs a GPU or is Rust, from its cited source: tests/fixtures/<engine>/README.md), normalised
into the tier model (docs/tiers.md) and checked t1 -> t2 against the truth each generator kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvops.engines.registry import WANTED, normalise
from kvops.exposition.parser import parse
from kvops.rates import GB, interval
from kvops.snapshot import Snapshot, TargetSample

FIXTURES = Path(__file__).parent.parent / "fixtures"
REL = 1e-9


def load(path: Path, target: str = "http://10.0.0.9:30000") -> TargetSample:
    return normalise(parse(path.read_text(), WANTED), target)


def approx(value: float) -> object:
    return pytest.approx(value, rel=REL, abs=1e-12)


def sglang_truth() -> dict:
    return json.loads((FIXTURES / "sglang" / "truth.json").read_text())


@pytest.mark.parametrize("dump", [0, 1])
def test_sglang_page_normalises_to_what_sglang_was_fed(dump: int):
    doc = sglang_truth()
    d = doc["dumps"][dump]
    fed = d["fed"]
    sample = load(FIXTURES / "sglang" / d["file"])
    assert sample.up and sample.vllm_format == "sglang"
    (eng,) = sample.engines  # two TP ranks, one engine: ranks are not separate engines
    assert eng.engine_kind == "sglang" and eng.model_name == doc["model"] and eng.engine == "0"
    assert eng.kv_cache_usage == approx(d["token_usage"])
    assert (eng.requests_running, eng.requests_waiting) == (d["running"], d["waiting"])
    assert eng.prompt_tokens_by_source == {"total": fed["prompt_tokens"]}
    assert eng.prompt_tokens_cached_by_source == {"device": fed["cached_device"], "host": fed["cached_host"]}
    # token counters repeat per TP rank: read once; byte and second counters summed over ranks
    assert eng.store_tokens == fed["backup_tokens"] and eng.load_tokens == fed["load_back_tokens"]
    assert eng.dropped_tokens == fed["dropped_tokens"]
    assert eng.store_bytes == approx(fed["backup_bytes"]) and eng.load_bytes == approx(fed["load_back_bytes"])
    assert eng.store_seconds == approx(fed["backup_seconds"])
    assert eng.load_seconds == approx(fed["load_back_seconds"])
    assert eng.tier_used_tokens == {"host": d["host_used_tokens"]}
    assert eng.tier_capacity_tokens == {"host": d["host_total_tokens"]}
    assert eng.offload_tier == "host"
    assert eng.local_queries is None and eng.preemptions is None  # SGLang does not count these


def test_sglang_interval_per_tier_equals_truth():
    doc = sglang_truth()
    (a, b) = doc["dumps"]
    fa, fb = a["fed"], b["fed"]
    prev = Snapshot(time=0.0, targets=[load(FIXTURES / "sglang" / a["file"])])
    cur = Snapshot(time=10.0, targets=[load(FIXTURES / "sglang" / b["file"])])
    (row,) = interval(prev, cur).targets
    prompt = fb["prompt_tokens"] - fa["prompt_tokens"]
    device = fb["cached_device"] - fa["cached_device"]
    host = fb["cached_host"] - fa["cached_host"]
    store = fb["backup_bytes"] - fa["backup_bytes"]
    load_ = fb["load_back_bytes"] - fa["load_back_bytes"]
    assert row.engine_kind == "sglang" and row.prompt_tokens == prompt
    assert row.tiers["gpu"].tokens_saved == device
    assert row.tiers["gpu"].prompt_share == approx(device / prompt)
    assert row.tiers["host"].tokens_saved == host
    assert row.tiers["host"].prompt_share == approx(host / prompt)
    assert row.tiers["host"].hit_rate is None  # SGLang counts no host lookups: no rate
    assert row.tiers["host"].load_bandwidth_bytes_per_second == approx(
        load_ / (fb["load_back_seconds"] - fa["load_back_seconds"])
    )
    assert row.tiers["host"].store_bytes == approx(store)
    assert row.offload_tokens_saved_per_gb_moved == approx(host / ((store + load_) / GB))
    assert row.write_only_tier is False


def _doc(engine: str) -> dict:
    return json.loads((FIXTURES / engine / "truth.json").read_text())


@pytest.mark.parametrize("dump", [0, 1])
def test_kvbm_port_is_its_own_target_with_directions_from_kvbm_docs(dump: int):
    d = _doc("dynamo-kvbm")["dumps"][dump]
    c = d["counters"]
    sample = load(FIXTURES / "dynamo-kvbm" / d["file"], "http://10.0.0.9:6880")
    assert sample.up and sample.vllm_format == "dynamo-kvbm"
    (eng,) = sample.engines
    assert eng.engine_kind == "dynamo-kvbm"
    # offload h2d is host -> disk and onboard d2d is disk -> device (KVBM's naming, not CUDA's)
    assert eng.transfer_blocks == {
        "gpu_to_host": c["offload_blocks_d2h"], "host_to_disk": c["offload_blocks_h2d"],
        "gpu_to_disk": c["offload_blocks_d2d"], "gpu_to_storage": c["offload_blocks_d2o"],
        "host_to_gpu": c["onboard_blocks_h2d"], "disk_to_gpu": c["onboard_blocks_d2d"],
        "storage_to_gpu": c["onboard_blocks_o2d"],
    }  # fmt: skip
    assert eng.tier_hit_rate == {"host": 0.375, "disk": 0.125, "storage": 0.0}
    assert eng.matched_tokens == c["matched_tokens"]
    # blocks are not bytes, and no seconds: no byte or bandwidth figure is made up
    assert eng.store_bytes is None and eng.load_bytes is None and eng.store_seconds is None
    assert eng.external_hits is None  # matched tokens are not added to any engine's hits


@pytest.mark.parametrize("dump", [0, 1])
def test_trtllm_offload_bytes_and_host_pool(dump: int):
    doc = _doc("trtllm")
    d = doc["dumps"][dump]
    fed = d["fed"]
    sample = load(FIXTURES / "trtllm" / d["file"], "http://10.0.0.9:8000")
    assert sample.up and sample.vllm_format == "trtllm"
    (eng,) = sample.engines
    assert eng.engine_kind == "trtllm" and eng.model_name == "meta-llama/Llama-3.1-70B-Instruct"
    assert eng.store_bytes == fed["offload_bytes"]  # GPU -> host
    assert eng.load_bytes == (fed["onboard_bytes"] or None)  # created on the first onboard
    assert eng.store_seconds is None and eng.load_seconds is None  # no time exposed
    assert eng.tier_utilization == {"host": approx(d["host_utilization"])}
    tpb = doc["tokens_per_block"]
    assert eng.local_hits == fed["reused_blocks"] * tpb
    assert eng.local_queries == (fed["reused_blocks"] + fed["missed_blocks"]) * tpb
    assert eng.kv_cache_usage == d["kv_cache_utilization"]


def test_trtllm_interval_has_bytes_but_never_a_bandwidth():
    doc = _doc("trtllm")
    a, b = doc["dumps"]
    prev = Snapshot(time=0.0, targets=[load(FIXTURES / "trtllm" / a["file"])])
    cur = Snapshot(time=15.0, targets=[load(FIXTURES / "trtllm" / b["file"])])
    (row,) = interval(prev, cur).targets
    host = row.tiers["host"]
    assert host.store_bytes == b["fed"]["offload_bytes"] - a["fed"]["offload_bytes"]
    assert host.load_bytes == b["fed"]["onboard_bytes"] - a["fed"]["onboard_bytes"]
    assert host.store_bandwidth_bytes_per_second is None and host.load_bandwidth_bytes_per_second is None
    assert row.store_offered_bytes_per_second == approx(host.store_bytes / 15.0)


def test_every_engine_page_goes_through_the_exporter_and_back():
    """Encode each engine's sample as kvops_* and decode it again: one binding, no loss."""
    from kvops.exporter.encode import encode
    from kvops.exporter.families import target_families
    from kvops.frames.kvops_exposition import EXPORTED, decode

    for path in [FIXTURES / "sglang" / "hicache-t2.prom", FIXTURES / "dynamo-kvbm" / "kvbm-t2.prom",
                 FIXTURES / "trtllm" / "trtllm-t2.prom", FIXTURES / "vllm-tiering" / "tiering-t2.prom",
                 FIXTURES / "vllm-simple-offload" / "simple-t2.prom"]:  # fmt: skip
        sample = load(path)
        page = encode(target_families([sample])).decode()
        back = decode(parse(page, EXPORTED), 0.0)
        (target,) = back.targets
        assert target.engines == sample.engines, path


@pytest.mark.parametrize("dump", [0, 1])
def test_lmcache_legacy_surface_equals_what_lmcache_was_fed(dump: int):
    doc = _doc("lmcache")
    d = doc["dumps"][dump]
    sample = load(FIXTURES / "lmcache" / d["file"], "http://10.0.0.9:8000")
    assert sample.up and sample.engines == []
    assert [s.worker_id for s in sample.lmcache] == ["0", "1"]
    for s in sample.lmcache:
        fed = d["fed"][s.worker_id]
        assert s.model_name == doc["model"] and s.engine_kind == "lmcache"
        for field in ("requested_tokens", "hit_tokens", "stored_tokens", "lookup_tokens", "lookup_hits",
                      "vllm_hit_tokens", "prompt_tokens", "retrieve_requests", "store_requests",
                      "lookup_requests", "remote_read_bytes", "remote_write_bytes", "evictions"):  # fmt: skip
            assert getattr(s, field) == fed[field], field
        assert s.slow_retrievals_by_time == fed["slow_by_time"] and s.slow_retrievals_by_speed == 0
        assert s.local_cache_usage_bytes == d["local_cache_usage_bytes"]
        assert s.local_storage_usage_bytes == d["local_storage_usage_bytes"]
        assert s.remote_cache_usage_bytes == d["remote_cache_usage_bytes"]
        assert s.retrieve_seconds is not None and s.retrieve_seconds.count == fed["retrieve_count"]
        assert s.retrieve_seconds.sum == approx(fed["retrieve_seconds_sum"])
        # remote get times are milliseconds in LMCache: kvops exports seconds
        assert s.remote_get_seconds is not None and s.remote_get_seconds.count == fed["remote_get_count"]
        assert s.remote_get_seconds.sum == approx(fed["remote_get_ms_sum"] / 1000.0)
        assert s.remote_get_seconds.buckets[0][0] == approx(0.001)  # LMCache's first bound: 1 ms


def test_lmcache_inside_vllm_is_never_added_to_vllms_external_tier(vllm_fixtures: Path):
    """One vLLM page with LMCache as its connector: LMCache's figures stay in kvops_lmcache_*,
    vLLM's external counts are vLLM's alone (LMCache *is* that tier)."""
    from kvops.exporter.encode import encode
    from kvops.exporter.families import target_families

    vllm_page = (vllm_fixtures / "0.33.0" / "offload-t2.prom").read_text()
    both = vllm_page + (FIXTURES / "lmcache" / "lmcache-t2.prom").read_text()
    alone = normalise(parse(vllm_page, WANTED), "http://v:8000")
    mixed = normalise(parse(both, WANTED), "http://v:8000")
    assert [e.engine_kind for e in mixed.engines] == ["vllm"]
    assert mixed.engines[0].external_hits == alone.engines[0].external_hits
    assert mixed.engines[0].prompt_tokens_cached_by_source == alone.engines[0].prompt_tokens_cached_by_source
    page = encode(target_families([mixed])).decode()
    external = [line for line in page.splitlines() if line.startswith("kvops_prefix_cache_hits_tokens_total")
                and 'tier="external"' in line]  # fmt: skip
    assert len(external) == 1 and 'engine_kind="vllm"' in external[0]
    assert 'kvops_lmcache_hit_tokens_total{engine_kind="lmcache"' in page


def test_llmd_suffixed_series_are_per_tier_edges(vllm_fixtures: Path):
    """llm-d's filesystem connector beside vLLM's CPU one: the second connector's series carry
    its spec's suffix (WRITTEN FROM SOURCE: llm-d-kv-cache-manager's
    install_offload_metric_suffix_patch renames vLLM's 0.16-0.23 families)."""
    base = (vllm_fixtures / "0.20.0" / "offload-t2.prom").read_text()
    extra = "\n".join(
        line.replace("vllm:kv_offload_total_bytes_total", "vllm:kv_offload_total_bytes_sharedstorage_total")
        .replace("vllm:kv_offload_total_time_total", "vllm:kv_offload_total_time_sharedstorage_total")
        .replace("CPU", "SHARED_STORAGE")
        for line in base.splitlines()
        if line.startswith(("vllm:kv_offload_total_bytes_total", "vllm:kv_offload_total_time_total"))
    )  # fmt: skip
    sample = normalise(parse(base + extra + "\n", WANTED), "http://v:8000")
    (eng,) = sample.engines
    truth = json.loads((vllm_fixtures / "0.20.0" / "truth.json").read_text())["offload"]["dumps"][1][
        "engines"
    ]["0"]
    # the CPU connector keeps vLLM's own names: host tier as before
    assert eng.store_bytes == truth["store_bytes"] and eng.offload_tier == "host"
    # the suffixed connector is its own tier, never added to the CPU one
    assert eng.transfer_bytes_by_edge == {
        "gpu_to_storage": truth["store_bytes"],
        "storage_to_gpu": truth["load_bytes"],
    }
    assert eng.transfer_seconds_by_edge["gpu_to_storage"] == approx(truth["store_time"])


def test_kvbm_interval_blocks_per_tier_and_no_bytes():
    doc = _doc("dynamo-kvbm")
    a, b = doc["dumps"]
    ca, cb = a["counters"], b["counters"]
    prev = Snapshot(time=0.0, targets=[load(FIXTURES / "dynamo-kvbm" / a["file"])])
    cur = Snapshot(time=30.0, targets=[load(FIXTURES / "dynamo-kvbm" / b["file"])])
    (row,) = interval(prev, cur).targets
    host, disk = row.tiers["host"], row.tiers["disk"]
    assert host.store_blocks == cb["offload_blocks_d2h"] - ca["offload_blocks_d2h"]
    assert host.load_blocks == cb["onboard_blocks_h2d"] - ca["onboard_blocks_h2d"]
    assert disk.load_blocks == cb["onboard_blocks_d2d"] - ca["onboard_blocks_d2d"]  # onboard d2d: disk -> GPU
    assert (
        disk.store_blocks == cb["offload_blocks_d2d"] - ca["offload_blocks_d2d"]
    )  # offload d2d: GPU -> disk
    assert host.engine_hit_rate == 0.375 and disk.engine_hit_rate == 0.125
    assert host.store_bytes is None and host.load_bandwidth_bytes_per_second is None
    assert row.offload_tokens_saved_per_gb_moved is None


def _kvbm_interval(key: str):
    a, b = _doc("dynamo-kvbm")[key]
    prev = Snapshot(time=0.0, targets=[load(FIXTURES / "dynamo-kvbm" / a["file"], "http://10.0.0.9:6880")])
    cur = Snapshot(time=30.0, targets=[load(FIXTURES / "dynamo-kvbm" / b["file"], "http://10.0.0.9:6880")])
    (row,) = interval(prev, cur).targets
    return a["counters"], b["counters"], row


def test_kvbm_object_tier_is_the_storage_tier_in_bytes_and_blocks():
    """KVBM with an S3/GCS tier (metrics_kvbm.rs @3c24940): d2o/o2d blocks and the object byte
    counters land on the storage tier, bytes per direction over the interval."""
    ca, cb, row = _kvbm_interval("object_dumps")
    storage = row.tiers["storage"]
    assert storage.store_bytes == cb["offload_bytes_object"] - ca["offload_bytes_object"] > 0
    assert storage.load_bytes == cb["onboard_bytes_object"] - ca["onboard_bytes_object"] > 0
    assert storage.store_blocks == cb["offload_blocks_d2o"] - ca["offload_blocks_d2o"]
    assert storage.load_blocks == cb["onboard_blocks_o2d"] - ca["onboard_blocks_o2d"]
    assert storage.engine_hit_rate == 0.25
    # no seconds on KVBM's page: bytes yes, bandwidth no
    assert storage.store_bandwidth_bytes_per_second is None
    assert storage.store_failed_blocks is None  # this version registers no failure counter


@pytest.mark.parametrize("dump", [0, 1])
def test_kvbm_object_failures_are_failed_blocks_on_the_storage_edges(dump: int):
    d = _doc("dynamo-kvbm")["failure_dumps"][dump]
    c = d["counters"]
    (eng,) = load(FIXTURES / "dynamo-kvbm" / d["file"], "http://10.0.0.9:6880").engines
    # write = a store into object storage, read = a load back to the GPU (KVBM's own HELP texts)
    assert eng.failed_blocks_by_edge == {
        "gpu_to_storage": c["object_write_failures"],
        "storage_to_gpu": c["object_read_failures"],
    }
    assert eng.transfer_bytes_by_edge == {}  # the later registry has no byte counters: none made up


def test_kvbm_object_failures_per_interval_on_the_storage_tier():
    ca, cb, row = _kvbm_interval("failure_dumps")
    storage = row.tiers["storage"]
    assert storage.store_failed_blocks == cb["object_write_failures"] - ca["object_write_failures"] > 0
    assert storage.load_failed_blocks == cb["object_read_failures"] - ca["object_read_failures"] > 0
    assert storage.store_blocks == cb["offload_blocks_d2o"] - ca["offload_blocks_d2o"]
    assert storage.store_bytes is None
    assert row.tiers["host"].store_failed_blocks is None  # KVBM counts failures for objects only


@pytest.mark.parametrize("dump", [0, 1])
def test_lmcache_multiprocess_mode_lookup_and_l1(dump: int):
    doc = _doc("lmcache-mp")
    d = doc["dumps"][dump]
    fed = d["fed"]
    sample = load(FIXTURES / "lmcache-mp" / d["file"], "http://10.0.0.9:9090")
    assert sample.up and sample.engines == []
    (s,) = sample.lmcache  # lookup series carry the model, L1 series none: one sample
    assert s.model_name == doc["model"] and s.worker_id == "0"
    assert s.lookup_tokens == fed["requested_tokens"] and s.lookup_hits == fed["hit_tokens"]
    assert s.l1_hit_tokens == fed["l1_hit_tokens"] and s.l2_hit_tokens == fed["l2_hit_tokens"]
    assert s.lookup_requests == fed["lookups"]
    assert (s.l1_read_chunks, s.l1_write_chunks, s.l1_evicted_chunks) == (
        fed["l1_read_chunks"], fed["l1_write_chunks"], fed["l1_evicted_chunks"])  # fmt: skip


def test_the_exporter_serves_every_engine_kind_side_by_side(upstream, make_exporter):
    """One exporter, a vLLM, an SGLang, a KVBM port and a TensorRT-LLM: each up, its kind from
    its page (no flag), every engine series labelled with it."""
    from support.exporter_harness import value
    from support.upstream import body

    pages = {
        "vllm": Path(__file__).parents[1] / "fixtures" / "vllm" / "0.33.0" / "offload-t2.prom",
        "sglang": FIXTURES / "sglang" / "hicache-t2.prom",
        "dynamo-kvbm": FIXTURES / "dynamo-kvbm" / "object-failures" / "kvbm-failures-t2.prom",
        "trtllm": FIXTURES / "trtllm" / "trtllm-t2.prom",
    }
    urls = {kind: upstream.route(kind, body(path.read_bytes())) for kind, path in pages.items()}
    s = make_exporter(list(urls.values())).samples()
    for kind, url in urls.items():
        assert value(s, "kvops_target_up", target=url) == 1.0, kind
        kinds = {dict(labels).get("engine_kind") for (_, labels) in s if dict(labels).get("target") == url}
        assert kinds - {None} == {kind}, (kind, kinds)
    kvbm = urls["dynamo-kvbm"]
    assert value(s, "kvops_offload_transfer_blocks_total", target=kvbm, edge="disk_to_gpu") is not None
    assert value(s, "kvops_offload_transfer_bytes_total", target=kvbm, direction="load") is None
    failures = _doc("dynamo-kvbm")["failure_dumps"][1]["counters"]
    assert (
        value(s, "kvops_offload_edge_failed_blocks_total", target=kvbm, edge="gpu_to_storage")
        == (failures["object_write_failures"])
    )
    assert (
        value(s, "kvops_offload_edge_failed_blocks_total", target=kvbm, edge="storage_to_gpu")
        == (failures["object_read_failures"])
    )
