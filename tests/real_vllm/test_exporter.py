"""The exporter against a real vLLM 0.32.0 running vLLM's own offloading code (through
kvops_host_offload: NOT STOCK vLLM, host copies for the device primitives; docs/dev/real-vllm-harness.md).

Every kvops figure the exporter derives must equal the server's own counters, read with
prometheus_client's parser from pages taken just before and just after the exporter's scrape of
an idle server (so all three saw the same counters).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from real_vllm.conftest import Truth, counters, idle_page, one, page, parse
from support.real_vllm import traffic
from support.real_vllm.server import MODEL_NAME, RealVllm

pytestmark = [pytest.mark.real_vllm, pytest.mark.timeout(1200)]

HISTOGRAMS = [  # (kvops family, its split label or None, vLLM family)
    ("kvops_offload_lookup_delay_seconds", {"mode": "sync"}, "vllm:kv_offload_lookup_sync_delay_seconds"),
    ("kvops_offload_transfer_size_bytes", {"direction": "store"}, "vllm:kv_offload_store_size"),
    ("kvops_offload_transfer_size_bytes", {"direction": "load"}, "vllm:kv_offload_load_size"),
    ("kvops_offload_cpu_allocation_chunks", {}, "vllm:kv_offload_cpu_allocation_size"),
]


def exporter_and_truth(server: RealVllm, make_exporter: Callable[..., object]) -> tuple[Truth, Truth]:
    """(kvops page, the server's own page) with the server idle around the exporter's scrape."""
    before = parse(idle_page(server))
    exporter = make_exporter([server.metrics_url], timeout=30.0)
    kvops = exporter.samples()  # type: ignore[attr-defined]
    after = parse(page(server.metrics_url))
    assert counters(before) == counters(after), "the server moved while the exporter read it"
    return kvops, before


def buckets(truth: Truth, name: str, **labels: str) -> dict[str, float]:
    return {dict(ls)["le"]: v for (n, ls), v in truth.items()
            if n == name + "_bucket" and all(item in ls for item in labels.items())}  # fmt: skip


@pytest.mark.parametrize("mode", ["offload", "small-tier"])
def test_every_exporter_figure_equals_the_servers_own(
    mode: str, real_vllm: Callable[[str], RealVllm], make_exporter: Callable[..., object]
) -> None:
    server = real_vllm(mode)
    start = counters(parse(idle_page(server)))
    result = traffic.drive(server.url, MODEL_NAME, rounds=2, concurrency=2, seconds=180)
    assert result.failed == 0 and result.requests > 0, result.errors
    kvops, truth = exporter_and_truth(server, make_exporter)
    me = {"model_name": MODEL_NAME, "engine": "0"}

    def moved(name: str, **labels: str) -> float:
        key = (name, tuple(sorted({**me, **labels}.items())))
        return truth[key] - start.get(key, 0.0)

    # The interval had what every judged interval must have: stores, loads and local hits.
    assert moved("vllm:prefix_cache_hits_total") > 0
    assert moved("vllm:external_prefix_cache_hits_total") > 0
    assert moved("vllm:kv_offload_store_bytes_total") > 0 and moved("vllm:kv_offload_load_bytes_total") > 0

    def k(name: str, **labels: str) -> float | None:
        return one(kvops, name, **me, **labels)

    def v(name: str, **labels: str) -> float | None:
        return one(truth, name, **me, **labels)

    for tier, prefix in (("local", "vllm:prefix_cache"), ("external", "vllm:external_prefix_cache")):
        assert k("kvops_prefix_cache_queries_tokens_total", tier=tier) == v(f"{prefix}_queries_total")
        assert k("kvops_prefix_cache_hits_tokens_total", tier=tier) == v(f"{prefix}_hits_total")
    for direction, typed in (("store", "GPU_to_CPU"), ("load", "CPU_to_GPU")):
        for unit, flat, kvops_name in (("bytes", "bytes", "kvops_offload_transfer_bytes_total"),
                                       ("time", "time", "kvops_offload_transfer_seconds_total")):  # fmt: skip
            own = v(f"vllm:kv_offload_{direction}_{flat}_total")
            # vLLM reports each transfer twice (flat and transfer_type): counted once
            assert own == v(f"vllm:kv_offload_total_{unit}_total", transfer_type=typed)
            assert k(kvops_name, direction=direction) == own
    for source in ("local_compute", "local_cache_hit", "external_kv_transfer"):
        assert k("kvops_prompt_tokens_total", source=source) == v(
            "vllm:prompt_tokens_by_source_total", source=source
        )
    for source in ("device", "host", "p2p", "disk", "external_unspecified"):
        assert k("kvops_prompt_tokens_cached_total", source=source) == v(
            "vllm:prompt_tokens_cached_by_source_total", source=source
        )
    for op, name in (("any", ""), ("read", "read_"), ("write", "write_")):
        assert k("kvops_offload_cpu_in_flight_ratio", op=op) == v(
            f"vllm:kv_offload_cpu_cache_{name}usage_perc"
        )
    for kvops_name, split, family in HISTOGRAMS:
        assert buckets(kvops, kvops_name, **me, **split) == buckets(truth, family, **me), family
        assert k(f"{kvops_name}_count", **split) == v(f"{family}_count")
        assert k(f"{kvops_name}_sum", **split) == v(f"{family}_sum")
    # vLLM declares the allocation-failure family but has no sample until one happens: nor has kvops
    assert v("vllm:kv_offload_allocation_failure_total") is None
    assert k("kvops_offload_allocation_failures_total") is None
    assert k("kvops_offload_tier_info", tier="host") == 1.0
    if mode == "small-tier":  # a 4 MiB tier with store_threshold 2: stores are skipped
        skipped = v("vllm:kv_offload_stores_skipped_total")
        assert skipped is not None and moved("vllm:kv_offload_stores_skipped_total") > 0
        assert k("kvops_offload_stores_skipped_total") == skipped
    else:
        assert v("vllm:kv_offload_stores_skipped_total") is None
        assert k("kvops_offload_stores_skipped_total") is None


def test_a_server_without_offloading_exports_no_offload_tier(
    real_vllm: Callable[[str], RealVllm], make_exporter: Callable[..., object]
) -> None:
    server = real_vllm("plain")
    result = traffic.drive(server.url, MODEL_NAME, rounds=1, concurrency=2, seconds=120)
    assert result.failed == 0, result.errors
    kvops, truth = exporter_and_truth(server, make_exporter)
    assert not any(name.startswith("vllm:kv_offload") for name, _ in truth)
    assert one(truth, "vllm:prefix_cache_hits_total") > 0  # type: ignore[operator]
    assert not [key for key in kvops if key[0] == "kvops_offload_tier_info"]
    assert not [key for key in kvops if key[0].startswith("kvops_offload_transfer")]
    assert one(kvops, "kvops_prefix_cache_hits_tokens_total", tier="local") == one(
        truth, "vllm:prefix_cache_hits_total"
    )
