"""The exporter on pages a real vLLM 0.32.0 served (tests/fixtures/vllm-real/0.32.0, README there):
every figure equals the page's own sample, read with prometheus_client's parser; a server without
offloading gets no offload tier."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.exporter_harness import Samples, value
from support.upstream import Upstream, body

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-real" / "0.32.0"
ME = {"model_name": "tiny-llama", "engine": "0"}


def truth(name: str) -> Samples:
    text = (REAL / name).read_text()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}  # fmt: skip


def exported(upstream: Upstream, make_exporter, name: str) -> Samples:
    url = upstream.route(name.replace(".", "-"), body((REAL / name).read_text()))
    return make_exporter([url]).samples()


@pytest.mark.parametrize("page", ["plain-idle.prom", "plain-mid.prom", "plain-after.prom"])
def test_a_real_server_without_offloading_has_no_offload_tier(upstream, make_exporter, page: str) -> None:
    kvops = exported(upstream, make_exporter, page)
    assert not [key for key in kvops if key[0] == "kvops_offload_tier_info"]
    assert not [key for key in kvops if key[0].startswith("kvops_offload_")]
    own = truth(page)
    assert value(kvops, "kvops_prefix_cache_hits_tokens_total", tier="local") == value(
        own, "vllm:prefix_cache_hits_total", **ME
    )


@pytest.mark.parametrize("mode", ["offload", "small-tier"])
@pytest.mark.parametrize("when", ["idle", "mid", "after"])
def test_a_real_offloading_servers_figures_pass_through_exactly(
    upstream, make_exporter, mode: str, when: str
) -> None:
    page = f"{mode}-{when}.prom"
    kvops, own = exported(upstream, make_exporter, page), truth(page)
    assert value(kvops, "kvops_offload_tier_info", tier="host") == 1.0
    for direction, typed in (("store", "GPU_to_CPU"), ("load", "CPU_to_GPU")):
        flat = value(own, f"vllm:kv_offload_{direction}_bytes_total", **ME)
        either = value(own, "vllm:kv_offload_total_bytes_total", transfer_type=typed, **ME)
        # the flat series appears with the first transfer; until then the transfer_type one (0)
        assert value(kvops, "kvops_offload_transfer_bytes_total", direction=direction) == (
            either if flat is None else flat
        )
        assert flat is None or flat == either  # vLLM counts each transfer twice: kvops once
    for tier, prefix in (("local", "vllm:prefix_cache"), ("external", "vllm:external_prefix_cache")):
        assert value(kvops, "kvops_prefix_cache_queries_tokens_total", tier=tier) == value(
            own, f"{prefix}_queries_total", **ME
        )
    skipped = value(own, "vllm:kv_offload_stores_skipped_total", **ME)
    assert value(kvops, "kvops_offload_stores_skipped_total") == skipped
    assert (skipped is not None) == (mode == "small-tier" and when != "idle")
    assert value(own, "vllm:kv_offload_allocation_failure_total", **ME) is None
    assert value(kvops, "kvops_offload_allocation_failures_total") is None
