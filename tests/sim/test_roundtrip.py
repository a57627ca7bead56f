"""kvops's own parser and normaliser read every rendered vLLM format back to the sim's numbers."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvops.engines import registry
from kvops.exposition import parser as exposition
from kvops.sim.render import Renderer, parse_version
from kvops.sim.server import build_engine

TARGET = "http://127.0.0.1:8000"
VERSIONS = [
    "0.10.0",
    "0.11.0",
    "0.11.2",
    "0.13.0",
    "0.16.0",
    "0.20.0",
    "0.23.1",
    "0.24.0",
    "0.26.0",
    "0.33.0",
]


# The EngineSample fields the simulator models (Collector.sample sets them). The offload
# surface added by issue 19 (prompt tokens by source, histograms, in-flight ratios, tier) is
# checked against vLLM's own metrics code instead: tests/sources/test_vllm_offload_surface.py.
SIM_FIELDS = (
    "target", "model_name", "engine", "engine_kind", "kv_cache_usage", "local_queries", "local_hits",
    "external_queries", "external_hits", "store_bytes", "store_seconds", "load_bytes", "load_seconds",
    "preemptions", "requests_running", "requests_waiting", "cpu_tier_bytes",
)  # fmt: skip


def modelled(sample: dict[str, object]) -> dict[str, object]:
    return {k: sample[k] for k in SIM_FIELDS}


def read_back(renderer: Renderer) -> dict[str, object]:
    result = exposition.parse(renderer.render().decode(), registry.WANTED)
    assert not result.errors
    target = registry.normalise(result, TARGET)
    assert target.up
    assert len(target.engines) == 1
    return modelled(dataclasses.asdict(target.engines[0]))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("offload", [64.0, None])
def test_every_version_reads_back_to_the_simulators_numbers(version: str, offload: float | None) -> None:
    engine = build_engine(seed=3, workload="chat", kv_offloading_size_gib=offload, num_gpu_blocks=2048)
    renderer = Renderer(engine, parse_version(version), 1.8e9, {"vllm_version": version})
    checked_loads = False
    # Early (first stores, no load yet), then later when loads and evictions have happened.
    for t in (0.5, 25.0, 50.0):
        engine.advance_to(t)
        expected = modelled(dataclasses.asdict(renderer.collector.sample(TARGET)))
        assert read_back(renderer) == expected, (version, t)
        checked_loads |= (expected["load_bytes"] or 0) > 0
    if offload and parse_version(version).minor >= 16:
        assert checked_loads, "the run never loaded from the CPU tier: the test would prove little"


def test_formats_differ_where_vllm_differed() -> None:
    engine = build_engine(seed=0, num_gpu_blocks=2048)
    engine.advance_to(60.0)
    got = {}
    for version in ("0.10.0", "0.11.2", "0.20.0", "0.33.0"):
        got[version] = read_back(Renderer(engine, parse_version(version), 1.8e9, {}))
    assert got["0.10.0"]["external_queries"] is None and got["0.10.0"]["store_bytes"] is None
    assert got["0.11.2"]["store_bytes"] is None  # 0.11 had no offload transfer metrics
    # 0.11.x counted external queries over the whole prompt, later releases over the GPU misses.
    assert got["0.11.2"]["external_queries"] == got["0.11.2"]["local_queries"]
    assert got["0.33.0"]["external_queries"] < got["0.11.2"]["external_queries"]
    assert got["0.20.0"]["store_bytes"] == got["0.33.0"]["store_bytes"] > 0
    assert got["0.33.0"]["cpu_tier_bytes"] == 64 * 2**30


@pytest.mark.parametrize("version", ["0.11.2", "0.20.0", "0.33.0"])
def test_data_parallel_engines_read_back_per_engine(version: str) -> None:
    from kvops.sim.server import Sim

    t = [0.0]
    sim = Sim(version, seed=2, clock=lambda: t[0], data_parallel_size=3, num_gpu_blocks=2048)
    t[0] = 30.0
    result = exposition.parse(sim.metrics().decode(), registry.WANTED)
    engines = registry.normalise(result, TARGET).engines
    assert [e.engine for e in engines] == ["0", "1", "2"]
    for index, got in enumerate(engines):
        want = sim.renderer.collector.sample(TARGET, index)
        assert modelled(dataclasses.asdict(got)) == modelled(dataclasses.asdict(want))
    # Ranks run their own sessions: their counters differ.
    assert len({e.local_queries for e in engines}) == 3


@settings(max_examples=20, deadline=None)
@given(
    minor=st.integers(10, 33),
    patch=st.integers(0, 3),
    seed=st.integers(0, 1000),
    workload=st.sampled_from(["chat", "rag", "bursty", "agent"]),
    offload=st.one_of(st.none(), st.sampled_from([0.0, 0.5, 8.0])),
    t=st.floats(0.1, 20.0),
)
def test_any_release_any_moment_reads_back(minor, patch, seed, workload, offload, t) -> None:
    version = f"0.{minor}.{patch}"
    engine = build_engine(
        seed=seed, workload=workload, kv_offloading_size_gib=offload, num_gpu_blocks=512, length=0.3
    )
    engine.advance_to(t)
    renderer = Renderer(engine, parse_version(version), 1.8e9, {"vllm_version": version})
    assert read_back(renderer) == modelled(dataclasses.asdict(renderer.collector.sample(TARGET)))
