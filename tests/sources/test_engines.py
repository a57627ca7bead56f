"""Engines other than vLLM: pages written by each engine's own metrics code (or, where it
needs a GPU or is Rust, from its cited source: tests/fixtures/<engine>/README.md), normalised
into the tier model (docs/tiers.md) and checked t1 -> t2 against the truth each generator kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvops.rates import GB, interval
from kvops.snapshot import Snapshot, TargetSample
from kvops.sources.exposition import parse
from kvops.sources.vllm import WANTED, normalise

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
