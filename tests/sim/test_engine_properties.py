"""Invariants of the KV-tier model, over random configurations, workloads and seeds (hypothesis)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvops.sim.engine import block_keys
from kvops.sim.server import build_engine
from kvops.sim.workload import PRESETS

COUNTERS = [f.name for f in dataclasses.fields(build_engine().counters)]

configs = st.fixed_dictionaries(
    {
        "seed": st.integers(0, 10_000),
        "workload": st.sampled_from(sorted(PRESETS)),
        "rate": st.floats(0.5, 4.0),
        "length": st.floats(0.05, 0.5),
        "num_gpu_blocks": st.integers(64, 1024),
        # Small blocks (1 KiB per token) keep the CPU tier at a few hundred blocks.
        "kv_bytes_per_token": st.just(1024),
        "kv_offloading_size_gib": st.one_of(st.none(), st.just(0.0), st.floats(0.0001, 0.01)),
        "max_num_batched_tokens": st.sampled_from([512, 2048, 8192]),
        "max_num_seqs": st.sampled_from([4, 32, 256]),
    }
)


@settings(max_examples=25, deadline=None)
@given(options=configs, steps=st.lists(st.floats(0.05, 4.0), min_size=1, max_size=8))
def test_invariants_hold_at_every_scrape(options: dict, steps: list[float]) -> None:
    engine = build_engine(**options)
    cfg = engine.config
    before = dataclasses.asdict(engine.counters)
    t = 0.0
    for dt in steps:
        t += dt
        engine.advance_to(t)
        engine.check()  # blocks conserved, ref counts exact, CPU tier within its size
        c = engine.counters
        now = dataclasses.asdict(c)
        for name in COUNTERS:
            assert now[name] >= before[name], f"{name} went down"
        before = now
        assert c.prefix_hits <= c.prefix_queries
        assert c.external_hits <= c.external_queries <= c.prefix_queries
        assert len(engine.cpu) <= cfg.num_cpu_blocks
        assert len(engine.cpu) * cfg.bytes_per_block <= cfg.cpu_bytes
        assert 0.0 <= engine.kv_cache_usage <= 1.0
        assert c.store_bytes % cfg.bytes_per_block == 0
        assert c.load_bytes % cfg.bytes_per_block == 0
        if not cfg.offload or cfg.num_cpu_blocks == 0:
            assert c.external_hits == 0 and c.load_bytes == 0 and c.store_bytes == 0
        if c.store_bytes:
            # bytes and seconds grow together: the rate stays within the modelled link's range
            assert 0.4 * cfg.link_bytes_per_second < c.store_bytes / c.store_seconds
            assert c.store_bytes / c.store_seconds < 0.6 * cfg.link_bytes_per_second


@settings(max_examples=10, deadline=None)
@given(options=configs)
def test_same_seed_same_run(options: dict) -> None:
    a, b = build_engine(**options), build_engine(**options)
    a.advance_to(5.0)
    b.advance_to(2.0)
    b.advance_to(5.0)  # scrape timing must not change what happened
    assert dataclasses.asdict(a.counters) == dataclasses.asdict(b.counters)


@given(
    prefix=st.lists(st.tuples(st.integers(1, 50), st.integers(1, 40)), min_size=1, max_size=5),
    tail_a=st.lists(st.tuples(st.integers(51, 99), st.integers(1, 40)), max_size=3),
    tail_b=st.lists(st.tuples(st.integers(100, 150), st.integers(1, 40)), max_size=3),
)
def test_block_keys_match_exactly_over_shared_full_blocks(prefix, tail_a, tail_b) -> None:
    a, b = block_keys(prefix + tail_a, 16), block_keys(prefix + tail_b, 16)
    shared = sum(n for _, n in prefix) // 16
    assert a[:shared] == b[:shared]
    # A block that holds tokens past the shared prefix differs (content differs).
    if len(a) > shared and len(b) > shared:
        assert a[shared] != b[shared]


@settings(max_examples=10, deadline=None)
@given(options=configs)
def test_a_zero_gib_buffer_gives_zero_external_hits(options: dict) -> None:
    engine = build_engine(**{**options, "kv_offloading_size_gib": 0.0})
    engine.advance_to(8.0)
    c = engine.counters
    assert c.external_hits == 0 and c.load_bytes == 0 and c.store_bytes == 0
    if c.prefix_queries:
        assert c.external_queries > 0  # the connector was asked: this is not "offloading off"
    if c.requests_finished:
        assert c.allocation_failures > 0  # every store of a full block found no room


@pytest.mark.parametrize("workload", sorted(PRESETS))
def test_every_preset_stores_within_two_seconds(workload: str) -> None:
    engine = build_engine(seed=0, workload=workload)
    engine.advance_to(2.0)
    assert engine.counters.store_bytes > 0
    assert engine.first_seen["store"] < 2.0
