"""Mooncake's master as an engine (engine_kind "mooncake"): pages the real master wrote
(tests/fixtures/mooncake-master/README.md) read through `kvops top --once --json --replay`,
from where a user starts, against the client's own account of the traffic (truth.json)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kvops.engines.registry import WANTED, normalise
from kvops.exposition.parser import parse
from kvops.rates import interval
from kvops.snapshot import Snapshot

FIXTURES = Path(__file__).parent.parent / "fixtures" / "mooncake-master"
TRUTH = json.loads((FIXTURES / "truth.json").read_text())


def replay(*pages: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "kvops.cli", "top", "--once", "--json", "--replay", *map(str, pages)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("scenario", ["healthy", "full"])
def test_the_store_row_equals_the_clients_account(scenario: str) -> None:
    truth = TRUTH["scenarios"][scenario]
    doc = replay(FIXTURES / f"{scenario}-t1.prom", FIXTURES / f"{scenario}-t2.prom")
    (row,) = doc["targets"]  # the store is a row of its own, with the storage tier only
    assert row["up"] is True and row["engine_kind"] == "mooncake"
    assert list(row["tiers"]) == ["storage"]
    tier = row["tiers"]["storage"]
    store = tier["store"]
    moved, end = truth["interval"], truth["end"]
    assert store["lookups"] == moved["lookups"]
    assert store["hits"] == moved["hits"]
    assert tier["hit_rate"] == pytest.approx(moved["hit_rate"], rel=1e-12)
    assert tier["load_bytes"] == moved["bytes_served"] == store["hit_bytes_by_medium"]["memory"]
    assert store["hit_bytes_by_medium"]["file"] == 0 and store["hits_by_medium"]["memory"] == moved["hits"]
    assert store["puts"] == moved["puts"]
    assert store["put_failures"] == store["put_no_space_failures"] == moved["put_failures"]
    assert store["get_failures"] == moved["lookups"] - moved["hits"]  # a missing key fails its lookup
    assert tier["capacity_bytes"] == end["capacity_bytes"] == store["capacity_bytes_by_medium"]["memory"]
    assert store["active_clients"] == end["clients"]
    (segment,) = store["segments"].values()
    assert segment["capacity_bytes"] == end["capacity_bytes"]
    assert segment["allocated_bytes"] == tier["used_bytes"]
    # what is left: every stored put, less what the master evicted (its own count)
    evicted_keys = store["evicted_keys"]
    assert store["keys"] == end["puts_ok_ever"] - evicted_keys
    assert tier["used_bytes"] == end["bytes_put_ok_ever"] - store["evicted_bytes"]
    assert tier["usage_ratio"] == pytest.approx(tier["used_bytes"] / end["capacity_bytes"], rel=1e-12)
    if scenario == "healthy":
        assert evicted_keys == 0 and store["evictions"] == 0
    else:
        assert evicted_keys > 0 and store["evictions"] > 0


def test_the_master_page_is_up_and_names_itself() -> None:
    sample = normalise(
        parse((FIXTURES / "healthy-t1.prom").read_text(), WANTED), "http://127.0.0.1:9003/metrics"
    )
    assert sample.up and sample.error is None and sample.vllm_format == "mooncake-master"
    (engine,) = sample.engines
    assert (engine.engine_kind, engine.model_name, engine.engine) == ("mooncake", "", "0")
    assert engine.kv_store_capacity_bytes == {"memory": 64 * 2**20, "ssd": 0.0, "file": 0.0}


def test_an_empty_master_is_up_and_unknowns_stay_unknown() -> None:
    """A master with no client yet (its page before any mount: every family at 0, no segment
    series): up, capacity 0 gives no usage ratio (unknown, not 0 % nor a division error), and no
    lookup gives no hit rate."""
    page = "\n".join(line for line in (FIXTURES / "healthy-t1.prom").read_text().splitlines()
                     if not line.startswith("segment_"))  # fmt: skip
    page = re.sub(
        r"^(master_\w+|mem_cache\w+|valid_get_nums_|total_get_nums_) [0-9.e+]+$", r"\1 0", page, flags=re.M
    )
    sample = normalise(parse(page + "\n", WANTED), "x")
    assert sample.up
    (engine,) = sample.engines
    assert engine.kv_store_segment_capacity_bytes == {} and engine.kv_store_capacity_bytes["memory"] == 0
    (row,) = interval(Snapshot(0.0, [sample]), Snapshot(1.0, [sample])).targets
    tier = row.tiers["storage"]  # type: ignore[union-attr]
    assert tier.usage_ratio is None and tier.hit_rate is None and tier.capacity_bytes == 0
    assert tier.store is not None and tier.store.lookups == 0 and tier.store.segments == {}
