"""`kvops sim --offload-path simple|tiering`: the simulator serves SimpleCPUOffloadConnector's and
multi-tier offloading's families with the names, types, HELP and label sets vLLM 0.33's own code
writes (tests/fixtures/vllm-simple-offload, tests/fixtures/vllm-tiering), and kvops reads back
what the simulated engine counted."""

from __future__ import annotations

import functools
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kvops.engines.registry import WANTED, normalise
from kvops.exposition.parser import parse
from kvops.sim.engine import Engine
from kvops.sim.offload_paths import FS, PRIMARY
from kvops.sim.render import Renderer, parse_version
from kvops.sim.server import build_engine

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PAGES = {
    "simple": (FIXTURES / "vllm-simple-offload" / "simple-t2.prom", "vllm:simple_kv_offload_"),
    "tiering": (FIXTURES / "vllm-tiering" / "tiering-t2.prom", "vllm:kv_offload_tiering_"),
}
# Series the fixture's workload creates and the simulated one never does (docs/sim.md):
NEVER_IN_THE_SIM = {
    "vllm:kv_offload_tiering_promotion_allocation_failures",  # the primary always has room
    "vllm:simple_kv_offload_save_outcomes/dropped_cpu_full",  # transfers finish within the step
    "vllm:simple_kv_offload_save_outcomes/skipped_in_flight",
    "vllm:simple_kv_offload_save_outcomes/dropped_request_gone",
}


@functools.cache
def run(path: str, seconds: float = 300.0) -> tuple[Engine, str]:
    engine = build_engine(workload="chat", offload_path=path, kv_offloading_size_gib=4.0)
    engine.advance_to(seconds)
    page = Renderer([engine], parse_version("0.33.0"), time.time(), {}).render().decode()
    return engine, page


def shape(text: str, prefix: str) -> dict[str, tuple[str, str, frozenset[frozenset[str]]]]:
    """family -> (type, HELP, the label-name sets of its samples), for one connector's families."""
    out = {}
    for fam in text_string_to_metric_families(text):
        if fam.name.startswith(prefix) and not fam.name.endswith("_created"):
            keys = frozenset(
                frozenset(s.labels) - {"le"} for s in fam.samples if not s.name.endswith("_created")
            )
            out[fam.name] = (fam.type, fam.documentation, keys)
    return out


def outcome_sets(text: str, name: str) -> set[str]:
    return {
        s.labels["outcome"] for f in text_string_to_metric_families(text) if f.name == name for s in f.samples
    }


@pytest.mark.parametrize("path", ["simple", "tiering"])
def test_the_sims_families_are_shaped_as_vllm_0_33_writes_them(path: str) -> None:
    fixture, prefix = PAGES[path]
    _, page = run(path)
    want, got = shape(fixture.read_text(), prefix), shape(page, prefix)
    assert set(got) == set(want)
    for name, (kind, help_, keys) in got.items():
        real_kind, real_help, real_keys = want[name]
        assert kind == real_kind and help_.startswith(real_help), name  # the sim's HELP adds a note
        assert keys <= real_keys, name  # every series labelled as vLLM labels it
        if real_keys and name not in NEVER_IN_THE_SIM:
            assert keys, f"{name}: vLLM writes series, the sim none"
    if path == "simple":
        name = "vllm:simple_kv_offload_save_outcomes"
        extra = outcome_sets(page, name) - outcome_sets(fixture.read_text(), name)
        assert extra == set()


def test_the_native_path_serves_neither_connectors_families() -> None:
    _, page = run("native", 60.0)
    assert "vllm:simple_kv_offload_" not in page and "vllm:kv_offload_tiering_" not in page


def test_simple_path_is_read_back_as_the_engine_counted() -> None:
    engine, page = run("simple")
    (sample,) = normalise(parse(page, WANTED), "http://sim:8000").engines
    assert sample.save_outcomes == engine.simple.outcomes and sample.save_outcomes["stored"] > 0
    assert sample.simple_load_blocks == engine.simple.load_blocks > 0
    assert sample.simple_capacity_blocks == engine.config.num_cpu_blocks
    assert sample.simple_backend == "cpu"
    # SimpleCPUOffloadConnector is not the OffloadingConnector: no byte counters on its page
    assert sample.store_bytes is None and sample.load_bytes is None


def test_tiering_path_is_read_back_per_tier_as_the_engine_counted() -> None:
    engine, page = run("tiering")
    assert engine.fs is not None
    primary, fs = engine.fs.tiers[PRIMARY], engine.fs.tiers[FS]
    (sample,) = normalise(parse(page, WANTED), "http://sim:8000").engines
    # kept under vLLM's own labels (0:primary is the host tier, 1:fs the disk tier: docs/tiers.md)
    assert sample.tier_chunk_queries == {PRIMARY: primary.chunk_queries, FS: fs.chunk_queries}
    assert sample.tier_chunk_hits == {PRIMARY: primary.chunk_hits, FS: fs.chunk_hits}
    assert sample.tier_read_bytes == {FS: fs.read_bytes} and fs.read_bytes > 0
    assert sample.tier_read_seconds[FS] == pytest.approx(fs.read_seconds)
    assert sample.tier_write_bytes == {FS: fs.write_bytes} and fs.write_bytes > 0
    assert sample.tier_promotion_failures == {FS: fs.promotion_failures} and fs.promotion_failures > 0
    assert sample.tier_cascade_failures == {FS: fs.cascade_failures} and fs.cascade_failures > 0
    assert sample.tier_active_cascades == {FS: 0.0}
    assert sample.tier_promotion_latency[FS].count == fs.promotions
    # the OffloadingConnector's own GPU<->CPU figures are still there (the spec is a CPU spec)
    assert sample.store_bytes == engine.counters.store_bytes > 0
