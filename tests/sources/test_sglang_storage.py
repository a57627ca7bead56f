"""SGLang 0.5.23's L3 storage pipeline and eviction, pages written by SGLang's own collectors
(tests/fixtures/sglang-storage): `kvops top --once --json` gives what was fed, and the exporter
carries it and reads it back."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from kvops.cli import main

FOLDER = Path(__file__).resolve().parents[1] / "fixtures" / "sglang-storage"
BOUNDS = [0.1, 0.5, 1, 5, 10, 50, 100]  # SGLang's bucket_bandwidth, GB/s


def _bucket(gbps: float) -> tuple[float, float]:
    upper = next(b for b in BOUNDS if gbps <= b)
    lower = max([0.0, *(b for b in BOUNDS if b < upper)])
    return lower * 1e9, upper * 1e9


def test_storage_tokens_unfulfilled_reasons_and_eviction_equal_what_sglang_was_fed(capsys) -> None:
    truth = json.loads((FOLDER / "truth.json").read_text())
    t1, t2 = truth["dumps"]
    assert (
        main(["top", "--once", "--json", "--replay", str(FOLDER / t1["file"]), str(FOLDER / t2["file"])]) == 0
    )
    [row] = json.loads(capsys.readouterr().out)["targets"]
    before, after = t1["fed"], t2["fed"]
    storage = row["tiers"]["storage"]
    assert storage["load_tokens"] == after["prefetched_tokens"] - before["prefetched_tokens"]
    assert storage["store_tokens"] == after["backuped_tokens"] - before["backuped_tokens"]
    assert storage["tokens_saved"] == after["cached"]["storage"] - before["cached"]["storage"]
    assert row["storage_unfulfilled_tokens"] == {
        reason: after["unfulfilled"][reason] - before["unfulfilled"][reason]
        for reason in after["unfulfilled"]
    }
    assert (
        row["evicted_tokens_per_second"] == after["evicted_tokens"] - before["evicted_tokens"]
    )  # 1 s replay
    assert row["eviction_mean_seconds"] == pytest.approx(
        (after["eviction_seconds"] - before["eviction_seconds"]) / (after["evictions"] - before["evictions"])
    )
    # the median per-op bandwidth lies in the bucket holding the median of what was fed
    for direction, name in (("load", "prefetch_bandwidth_gbps"), ("store", "backup_bandwidth_gbps")):
        fed = after[name][len(before[name]) :]
        lower, upper = _bucket(statistics.median_low(fed))
        assert lower <= storage[f"{direction}_op_bandwidth_p50_bytes_per_second"] <= upper


def test_storage_figures_survive_the_exporter_and_its_decoder() -> None:
    from kvops.engines.registry import WANTED, normalise
    from kvops.exporter.encode import encode
    from kvops.exporter.families import target_families
    from kvops.exposition.parser import parse
    from kvops.frames.kvops_exposition import EXPORTED, decode

    sample = normalise(parse((FOLDER / "storage-t2.prom").read_text(), WANTED), "http://h:30000")
    [back] = decode(parse(encode(target_families([sample])).decode(), EXPORTED), 0.0).targets
    assert back.engines == sample.engines
    assert sample.engines[0].storage_unfulfilled_tokens["host_capacity"] > 0


RANKS = FOLDER / "ranks"  # TP 2 x PP 2, served through SGLang's multiprocess registry


def test_four_ranks_are_one_engine_with_logical_token_counts_and_the_pages_model(capsys) -> None:
    """Every (tp, pp) rank repeats the logical token counts (SGLang: "All PP/TP ranks will get
    the same min_completed_tokens"): read once, never multiplied by the rank count. The storage
    and radix-cache series carry no model_name: they belong to the page's one model, with the
    storage tier's served tokens from the tokenizer."""
    truth = json.loads((RANKS / "truth.json").read_text())
    t1, t2 = truth["dumps"]
    assert (
        main(["top", "--once", "--json", "--replay", str(RANKS / t1["file"]), str(RANKS / t2["file"])]) == 0
    )
    [row] = json.loads(capsys.readouterr().out)["targets"]
    assert (row["model_name"], row["engine"]) == (truth["model"], "0")
    before, after = t1["fed"], t2["fed"]
    storage = row["tiers"]["storage"]
    assert storage["load_tokens"] == after["prefetched_tokens"] - before["prefetched_tokens"]
    assert storage["store_tokens"] == after["backuped_tokens"] - before["backuped_tokens"]
    assert storage["tokens_saved"] == after["cached_storage"] - before["cached_storage"]
    assert row["storage_unfulfilled_tokens"] == {
        reason: after["unfulfilled"][reason] - before["unfulfilled"][reason]
        for reason in after["unfulfilled"]
    }
    assert (
        row["evicted_tokens_per_second"] == after["evicted_tokens"] - before["evicted_tokens"]
    )  # 1 s replay
    # per-op bandwidth: the lowest rank's own ops (tp 0, pp 0), not a blend of every shard's
    for direction, name in (("load", "prefetch_bandwidth_gbps"), ("store", "backup_bandwidth_gbps")):
        fed = after[name]["0,0"][len(before[name]["0,0"]) :]
        lower, upper = _bucket(statistics.median_low(fed))
        assert lower <= storage[f"{direction}_op_bandwidth_p50_bytes_per_second"] <= upper, direction
