"""vLLM 0.33's multi-tier (TieringOffloadingSpec) and SimpleCPUOffloadConnector pages, written by
vLLM's own metrics code (tests/fixtures/vllm-tiering, vllm-simple-offload), give what was fed:
per tier of docs/tiers.md in `kvops top --once --json`, and back through the exporter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvops.cli import main
from kvops.engines.vllm_tiering import tier_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TIERING = FIXTURES / "vllm-tiering"
SIMPLE = FIXTURES / "vllm-simple-offload"


def _once(capsys: pytest.CaptureFixture[str], folder: Path) -> tuple[dict, dict, dict]:
    truth = json.loads((folder / "truth.json").read_text())
    t1, t2 = truth["dumps"]
    assert (
        main(["top", "--once", "--json", "--replay", str(folder / t1["file"]), str(folder / t2["file"])]) == 0
    )
    [row] = json.loads(capsys.readouterr().out)["targets"]
    return row, t1, t2


@pytest.mark.parametrize(
    ("label", "tier"),
    [("0:primary", "host"), ("1:fs", "disk"), ("2:obj", "storage"),
     ("1:StripedFileSystemTierManager", "disk"), ("3:kvcr", "storage"), ("2:p2p", "peer")],
)  # fmt: skip
def test_vllm_tier_labels_map_onto_the_tier_model(label: str, tier: str) -> None:
    assert tier_of(label) == tier


def test_tiering_per_tier_hit_rate_bandwidth_failures_and_jobs_equal_what_vllm_was_fed(capsys) -> None:
    row, t1, t2 = _once(capsys, TIERING)
    assert row["engine_kind"] == "vllm"
    for label in ("0:primary", "1:fs", "2:obj"):
        figures = row["tiers"][tier_of(label)]

        def delta(name: str, label: str = label) -> float:
            return t2["fed"][name][label] - t1["fed"][name][label]

        assert figures["chunk_lookups"] == delta("chunk_queries")
        assert figures["hit_rate"] == pytest.approx(delta("chunk_hits") / delta("chunk_queries"))
        if label == "0:primary":
            continue
        assert figures["load_bytes"] == delta("read_bytes")
        assert figures["load_bandwidth_bytes_per_second"] == pytest.approx(
            delta("read_bytes") / delta("read_time")
        )
        assert figures["store_bytes"] == delta("write_bytes")
        assert figures["store_bandwidth_bytes_per_second"] == pytest.approx(
            delta("write_bytes") / delta("write_time")
        )
        assert figures["active_cascades"] == t2["gauges"]["active_cascade_jobs"][label]
    obj = row["tiers"]["storage"]
    assert (
        obj["promotion_failures"]
        == t2["fed"]["promotion_job_failures"]["2:obj"] - t1["fed"]["promotion_job_failures"]["2:obj"]
    )
    assert (
        obj["cascade_failures"]
        == t2["fed"]["cascade_job_failures"]["2:obj"] - t1["fed"]["cascade_job_failures"]["2:obj"]
    )
    # fed: fs promotions 0.03 s, obj 0.3 s: the p90 lies in the bucket holding them
    assert 0.025 < row["tiers"]["disk"]["promotion_latency_p90_seconds"] <= 0.05
    assert 0.25 < obj["promotion_latency_p90_seconds"] <= 0.5
    allocation = t2["fed"]["promotion_allocation_failures"] - t1["fed"]["promotion_allocation_failures"]
    assert row["promotion_allocation_failures_per_second"] == allocation  # replay interval: 1 s


def test_simple_cpu_offload_blocks_and_pool_full_drops_equal_what_vllm_was_fed(capsys) -> None:
    row, t1, t2 = _once(capsys, SIMPLE)
    host = row["tiers"]["host"]  # info: backend=cpu
    before, after = t1["fed"]["save_outcomes"], t2["fed"]["save_outcomes"]
    outcomes = {k: after[k] - before[k] for k in after}
    assert host["store_blocks"] == outcomes["stored"]
    assert host["load_blocks"] == t2["fed"]["load_blocks"] - t1["fed"]["load_blocks"]
    assert host["used_blocks"] == t2["gauges"]["used_blocks"]
    assert host["pending_store_blocks"] == t2["gauges"]["pending_store_blocks"]
    info = json.loads((SIMPLE / "truth.json").read_text())["info"]
    assert host["capacity_blocks"] == float(info["capacity_blocks"])
    assert row["pool_full_drop_ratio"] == pytest.approx(outcomes["dropped_cpu_full"] / sum(outcomes.values()))
    assert host["store_bytes"] is None and host["load_bytes"] is None  # blocks, never invented bytes


def test_a_real_vllm_0_32_fs_tier_page_reads_onto_the_disk_tier() -> None:
    """A page a real vLLM 0.32.0 served with a filesystem secondary tier (tests/fixtures/vllm-real)."""
    from prometheus_client.parser import text_string_to_metric_families

    from kvops.engines.registry import WANTED, normalise
    from kvops.exposition.parser import parse

    page = FIXTURES / "vllm-real" / "0.32.0" / "fs-tier-after.prom"
    [engine] = normalise(parse(page.read_text(), WANTED), "http://h:8000").engines
    for fam in text_string_to_metric_families(page.read_text()):
        for s in fam.samples:
            if s.name == "vllm:kv_offload_tiering_read_bytes_total":
                assert engine.tier_read_bytes[s.labels["tier"]] == s.value
            if s.name == "vllm:kv_offload_tiering_chunk_queries_total":
                assert engine.tier_chunk_queries[s.labels["tier"]] == s.value
    assert engine.tier_read_bytes["1:fs"] > 0  # vLLM's own tier label: tiers keep their identity
