"""vLLM 0.33's KV connectors (NIXL, MooncakeConnector, MooncakeStoreConnector, HF3FS, HiSparse) and
multi-tier back-pressure with two tiers of one kind, on pages written by vLLM's own metrics code
(tests/fixtures/vllm-connectors, vllm-tiering-2fs): `kvops top --once --json --replay` gives what
was fed, and the exporter's kvops_* series carry it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvops.cli import main
from kvops.engines.registry import WANTED, normalise
from kvops.exposition.parser import parse
from kvops.snapshot import Snapshot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CONNECTORS = FIXTURES / "vllm-connectors"
TWO_FS = FIXTURES / "vllm-tiering-2fs"


def _once(capsys: pytest.CaptureFixture[str], folder: Path) -> tuple[dict, dict, dict]:
    truth = json.loads((folder / "truth.json").read_text())
    t1, t2 = truth["dumps"]
    pages = [str(folder / t1["file"]), str(folder / t2["file"])]
    assert main(["top", "--once", "--json", "--replay", *pages]) == 0
    [row] = json.loads(capsys.readouterr().out)["targets"]
    return row, t1["fed"], t2["fed"]


def _exported(folder: Path, page: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """What `kvops exporter` serves for one page (its text sink), parsed by prometheus_client."""
    from prometheus_client.parser import text_string_to_metric_families

    from kvops.exporter.text_sink import write

    target = normalise(parse((folder / page).read_text(), WANTED), "http://p:8000")
    text = write(Snapshot(time=0.0, targets=[target])).decode()
    return {
        (
            s.name,
            tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("target", "model_name"))),
        ): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def test_nixl_and_mooncake_transfers_failures_and_expiries_equal_what_vllm_was_fed(capsys) -> None:
    row, before, after = _once(capsys, CONNECTORS)

    def d(connector: str, name: str) -> float:
        return after[connector][name] - before[connector][name]

    for connector in ("nixl", "mooncake"):
        figures = row["kv_transfers"][connector]
        assert figures["transfers"] == d(connector, "transfers")
        assert figures["bytes"] == d(connector, "bytes")
        assert figures["seconds"] == pytest.approx(d(connector, "seconds"))
        assert figures["bandwidth_bytes_per_second"] == pytest.approx(
            d(connector, "bytes") / d(connector, "seconds")
        )
        assert figures["mean_transfer_seconds"] == pytest.approx(
            d(connector, "seconds") / d(connector, "transfers")
        )
        assert figures["mean_descriptors"] == pytest.approx(
            d(connector, "descriptors") / d(connector, "transfers")
        )
        assert figures["expired_requests"] == d(connector, "expired")
    # fed: NIXL 12 ms transfers (the p90 is in the 0.01-0.025 bucket), Mooncake 40 ms (0.025-0.05)
    assert 0.01 < row["kv_transfers"]["nixl"]["p90_transfer_seconds"] <= 0.025
    assert 0.025 < row["kv_transfers"]["mooncake"]["p90_transfer_seconds"] <= 0.05
    nixl = row["kv_transfers"]["nixl"]
    # vLLM counts handshake and notification failures as failed transfers too
    failed = sum(d("nixl", k) for k in ("failed_transfers", "failed_handshakes", "failed_notifications"))
    assert nixl["failed_transfers"] == failed
    assert nixl["failed_notifications"] == d("nixl", "failed_notifications")
    assert nixl["notifications_after_expiry"] == d("nixl", "after_expiry")
    assert nixl["mean_post_seconds"] == pytest.approx(d("nixl", "post_seconds") / d("nixl", "transfers"))
    mooncake = row["kv_transfers"]["mooncake"]
    assert mooncake["failed_transfers"] == d("mooncake", "failed_transfers")
    assert mooncake["failed_receives"] == d("mooncake", "failed_recvs")
    assert mooncake["mean_post_seconds"] is None  # Mooncake does not time posting
    peer = row["tiers"]["peer"]
    assert peer["transport"] == "nixl+mooncake"
    assert peer["transfer_bytes"] == d("nixl", "bytes") + d("mooncake", "bytes")
    assert peer["failed_transfers"] == failed + d("mooncake", "failed_transfers") + d(
        "mooncake", "failed_recvs"
    )


def test_mooncake_store_and_3fs_operations_equal_what_vllm_was_fed(capsys) -> None:
    row, before, after = _once(capsys, CONNECTORS)
    ops = row["storage_operations"]
    for op, fed in after["store"].items():
        was = before["store"][op]
        figures = ops[f"mooncake_store/{op}"]
        for key, name in (("operations", "operations"), ("not_ok_operations", "not_ok"), ("keys", "keys"),
                          ("failed_keys", "failed_keys"), ("bytes", "bytes")):  # fmt: skip
            assert figures[key] == fed[name] - was[name], (op, key)
        assert figures["seconds"] == pytest.approx(fed["seconds"] - was["seconds"])
        moved = fed["bytes"] - was["bytes"]
        want = moved / (fed["seconds"] - was["seconds"]) if moved else None
        assert figures["bandwidth_bytes_per_second"] == (pytest.approx(want) if want else None)
    assert 0.1 < ops["mooncake_store/load_get"]["p90_seconds"] <= 0.2  # fed: every 6th get is a 0.15 s error
    for key in ("save", "load"):
        figures = ops[f"hf3fs/{key}"]
        ok = after["hf3fs"][f"{key}_ok"] - before["hf3fs"][f"{key}_ok"]
        failed = after["hf3fs"][f"{key}_failed"] - before["hf3fs"][f"{key}_failed"]
        assert figures["operations"] == ok + failed
        assert figures["not_ok_operations"] == failed
        seconds = after["hf3fs"][f"{key}_seconds"] - before["hf3fs"][f"{key}_seconds"]
        assert figures["mean_seconds"] == pytest.approx(seconds / ok)
        assert figures["bytes"] is None  # 3FS counts no bytes
    storage = row["tiers"]["storage"]
    assert (
        storage["store_bytes"] == after["store"]["save_put"]["bytes"] - before["store"]["save_put"]["bytes"]
    )
    assert storage["load_bytes"] == after["store"]["load_get"]["bytes"] - before["store"]["load_get"]["bytes"]
    assert storage["failed_operations"] == sum(f["not_ok_operations"] for f in ops.values())


def test_hisparse_hit_rate_host_to_device_bytes_and_host_pool_use(capsys) -> None:
    row, before, after = _once(capsys, CONNECTORS)
    truth = json.loads((CONNECTORS / "truth.json").read_text())
    hits = after["hisparse"]["hits"] - before["hisparse"]["hits"]
    misses = after["hisparse"]["misses"] - before["hisparse"]["misses"]
    assert row["hisparse_hit_rate"] == pytest.approx(hits / (hits + misses))
    host = row["tiers"]["host"]
    assert host["load_bytes"] == after["hisparse"]["h2d_bytes"] - before["hisparse"]["h2d_bytes"]
    gauges = truth["dumps"][1]["gauges"]
    assert host["usage_ratio"] == pytest.approx(gauges["host_cache_usage_perc"])
    assert row["hisparse_pending_transfers"] == gauges["pending_page_transfers"]


def test_two_fs_tiers_keep_their_identity_and_the_disk_tier_is_their_sum(capsys) -> None:
    row, before, after = _once(capsys, TWO_FS)
    truth = json.loads((TWO_FS / "truth.json").read_text())

    def d(name: str, label: str) -> float:
        return after[name][label] - before[name][label]

    rows = row["configured_tiers"]
    assert {name: r["kind"] for name, r in rows.items()} == {
        "0:primary": "host",
        "1:fs": "disk",
        "2:fs": "disk",
    }
    for label in ("1:fs", "2:fs"):
        tier = rows[label]
        assert tier["store_bytes"] == d("write_bytes", label)
        assert tier["store_bandwidth_bytes_per_second"] == pytest.approx(
            d("write_bytes", label) / d("write_time", label)
        )
        assert tier["chunk_lookups"] == d("chunk_queries", label)
        assert tier["backpressure_stores_dropped"] == d("stores_dropped", label)
        assert tier["backpressure_blocks_dropped"] == d("blocks_dropped", label)
        ema = truth["dumps"][1]["gauges"]["store_latency_ema"][label]
        assert tier["backpressure_store_latency_ema_seconds_per_mib"] == pytest.approx(ema)
    disk = row["tiers"]["disk"]
    assert disk["store_bytes"] == d("write_bytes", "1:fs") + d("write_bytes", "2:fs")
    assert disk["backpressure_blocks_dropped"] == d("blocks_dropped", "1:fs") + d("blocks_dropped", "2:fs")
    hits = d("chunk_hits", "1:fs") + d("chunk_hits", "2:fs")
    assert disk["hit_rate"] == pytest.approx(hits / (d("chunk_queries", "1:fs") + d("chunk_queries", "2:fs")))
    # fed: half of the slow tier's async lookups waited 0.04 s, half 0.25 s: the p90 is in (0.1, 0.5]
    assert 0.1 < rows["2:fs"]["lookup_async_delay_p90_seconds"] <= 0.5
    assert rows["1:fs"]["lookup_async_delay_p90_seconds"] is None  # it never answered retry
    assert disk["lookup_async_delay_p90_seconds"] == rows["2:fs"]["lookup_async_delay_p90_seconds"]


def test_the_exporter_serves_each_configured_tier_and_each_connector() -> None:
    fed = json.loads((TWO_FS / "truth.json").read_text())["dumps"][1]["fed"]
    served = _exported(TWO_FS, "tiering-2fs-t2.prom")
    base = (("engine", "0"), ("engine_kind", "vllm"))
    for label in ("1:fs", "2:fs"):
        labels = tuple(sorted((*base, ("tier", "disk"), ("tier_name", label))))
        assert (
            served[("kvops_offload_tier_backpressure_stores_dropped_total", labels)]
            == fed["stores_dropped"][label]
        )
        assert served[("kvops_offload_tier_write_bytes_total", labels)] == fed["write_bytes"][label]
    fed = json.loads((CONNECTORS / "truth.json").read_text())["dumps"][1]["fed"]
    served = _exported(CONNECTORS, "connectors-t2.prom")
    nixl = tuple(sorted((*base, ("connector", "nixl"))))
    failed = sum(fed["nixl"][k] for k in ("failed_transfers", "failed_handshakes", "failed_notifications"))
    assert served[("kvops_kv_transfer_failures_total", nixl)] == failed
    assert served[("kvops_kv_transfer_expired_requests_total", nixl)] == fed["nixl"]["expired"]
    assert served[("kvops_kv_transfer_size_bytes_sum", nixl)] == fed["nixl"]["bytes"]
    put = tuple(sorted((*base, ("operation", "mooncake_store/save_put"))))
    assert served[("kvops_offload_storage_operation_bytes_total", put)] == fed["store"]["save_put"]["bytes"]
    assert (
        served[("kvops_offload_storage_operations_not_ok_total", put)] == fed["store"]["save_put"]["not_ok"]
    )
    hit = tuple(sorted((*base, ("result", "hit"))))
    assert served[("kvops_offload_hisparse_lookups_total", hit)] == fed["hisparse"]["hits"]


@pytest.mark.parametrize(
    ("folder", "page"), [(CONNECTORS, "connectors-t2.prom"), (TWO_FS, "tiering-2fs-t2.prom")]
)
def test_connector_and_tier_figures_survive_the_exporter_and_its_decoder(folder: Path, page: str) -> None:
    from kvops.exporter.encode import encode
    from kvops.exporter.families import target_families
    from kvops.frames.kvops_exposition import EXPORTED, decode

    sample = normalise(parse((folder / page).read_text(), WANTED), "http://h:8000")
    [back] = decode(parse(encode(target_families([sample])).decode(), EXPORTED), 0.0).targets
    assert back.engines == sample.engines
