"""Every dashboard query against a real Prometheus that scrapes the real exporter.

Prometheus (Debian's) loads alerts/*.yml and scrapes `kvops exporter` pointed at `kvops sim`
(and at two more sims on vLLM's multi-tier and SimpleCPUOffload connectors), with the NVML and
AMD SMI stubs standing in for two NVIDIA and two AMD GPUs. Each panel query, variables set to
"All", must parse and return at least one series; each variable must list a value; each rule
must evaluate without error and each recording rule must produce data.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_stack import (
    CONNECTOR_SIM_OFFLOAD_GIB,
    CONNECTOR_SIMS,
    ROOT,
    SIM_ENGINES,
    SIM_OFFLOAD_GIB,
    PrometheusStack,
    substitute,
)

pytestmark = pytest.mark.slow

DASHBOARDS = sorted((ROOT / "dashboards").glob("*.json"))
RULE_FILES = sorted((ROOT / "alerts").glob("*.yml"))

# The NVML and AMD SMI stubs give the GPU panels (NVLink and XGMI included) data. Queries of
# series that exist only after an event the simulated vLLM never has (a full tier, a store
# threshold) or only on another engine (SGLang, KVBM, TensorRT-LLM) must parse and evaluate;
# their data is checked by the engine fixtures (tests/sources/test_engines.py) instead.
NOT_FROM_THE_SIM = {
    ("Tier pressure: failed and skipped stores", "A"),  # allocation failures: the tier never fills
    ("Tier pressure: failed and skipped stores", "B"),  # stores skipped: no store threshold
    ("Tier pressure: failed and skipped stores", "C"),  # dropped tokens: SGLang
    ("Blocks moved between tiers (KVBM)", "A"),
    ("Blocks moved between tiers (KVBM)", "B"),  # failed moves: KVBM's object storage
    ("Tier fill", "A"),  # SGLang host pool
    ("Tier fill", "B"),  # TensorRT-LLM host pool
    # issue 42 (h42a): vLLM's KV connectors and back-pressure are not simulated; their figures
    # are checked on pages vLLM 0.33's own code wrote (tests/sources/test_vllm_connectors.py)
    ("KV transfer bandwidth by connector", "A"),
    ("KV transfer failures and expired requests", "A"),
    ("KV transfer failures and expired requests", "B"),
    ("KV transfer failures and expired requests", "C"),
    ("Tier back-pressure: blocks dropped", "A"),
    ("Storage connector bytes and failed operations", "A"),
    ("Storage connector bytes and failed operations", "B"),
}


def panel_targets() -> list[tuple[str, str, str, str]]:
    """(file, panel title, refId, expr) for every query of every committed dashboard."""
    out = []
    for path in DASHBOARDS:
        for panel in json.loads(path.read_text())["panels"]:
            for target in panel.get("targets", []):
                out.append((path.name, panel["title"], target["refId"], target["expr"]))
    return out


TARGETS = panel_targets()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusStack]:
    with PrometheusStack(tmp_path_factory.mktemp("prometheus-stack"), RULE_FILES) as running:
        # Data is there once a 5m-window recording rule over a counter has two samples.
        ready = running.wait_for("kvops:offload_bandwidth_bytes_per_second:rate5m", 60)
        assert ready, "the recording rules produced nothing within 60 s"
        running.wait_for(substitute("rate(kvops_gpu_pcie_replay_total[$__rate_interval])"), 30)
        # The tiering sim's first injected failures come after its first promotions (seconds in).
        failures = "rate(kvops_offload_tier_promotion_failures_total[$__rate_interval])"
        running.wait_for(substitute(failures), 60)
        yield running


@pytest.mark.parametrize(
    ("file_name", "title", "ref", "expr"), TARGETS, ids=[f"{t[0][6:-5]}:{t[1]}:{t[2]}" for t in TARGETS]
)
def test_panel_query_returns_series(
    stack: PrometheusStack, file_name: str, title: str, ref: str, expr: str
) -> None:
    result = stack.query(substitute(expr))  # raises if Prometheus cannot parse or evaluate it
    if (title, ref) in NOT_FROM_THE_SIM:
        return
    assert result, f"{file_name} / {title} / {ref}: no series for {substitute(expr)}"


def test_every_variable_lists_a_value(stack: PrometheusStack) -> None:
    for path in DASHBOARDS:
        for var in json.loads(path.read_text())["templating"]["list"]:
            if var["type"] != "query":
                continue
            inner = var["definition"][len("label_values(") : -1]
            selector, _, label = inner.rpartition(", ")
            values = stack.api(f"label/{label}/values", **{"match[]": substitute(selector)})
            assert values, f"{path.name}: variable {var['name']} has no values"


def test_every_rule_evaluates_and_every_recording_rule_has_data(stack: PrometheusStack) -> None:
    groups: list[dict[str, Any]] = stack.api("rules")["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    assert {r["name"] for r in rules if r["type"] == "alerting"} >= {
        "KvopsTargetDown",
        "KvopsCollectorFailing",
    }
    # The stack fixture waited for a recording rule's data, so every group has run by now:
    # "unknown" (never evaluated) is as wrong as "err" (say, a many-to-many join).
    assert {r["name"]: r.get("lastError") for r in rules if r["health"] != "ok"} == {}
    # Includes the target-to-GPU join: kvops_target_gpu_info from the sim's PID in the stub
    # GPUs' process lists, times each GPU's link max.
    empty = [r["name"] for r in rules if r["type"] == "recording" and not stack.wait_for(r["name"], 10)]
    assert empty == [], "recording rules without data"


def test_alerts_go_pending_on_the_exporters_real_series(stack: PrometheusStack) -> None:
    # The closed-port target, and the sim's 64 TiB tier on this host: the alert expressions
    # (joins on job/instance included) match what the exporter really serves.
    want = {"KvopsTargetDown", "KvopsHostMemoryLowForOffload", "KvopsShmFreeLowForOffload"}
    deadline = time.monotonic() + 30
    while not want <= {a["labels"]["alertname"] for a in stack.alerts()} and time.monotonic() < deadline:
        time.sleep(0.5)
    alerts = stack.alerts()
    by_name: dict[str, list[dict[str, str]]] = {}
    for alert in alerts:
        by_name.setdefault(alert["labels"]["alertname"], []).append(alert["labels"])
    assert [labels["target"] for labels in by_name.get("KvopsTargetDown", [])] == [stack.dead_url]
    exporter_instance = stack.exporter_url.removeprefix("http://")
    for name in ("KvopsHostMemoryLowForOffload", "KvopsShmFreeLowForOffload"):
        assert [labels["instance"] for labels in by_name.get(name, [])] == [exporter_instance], name
    # The dead target fails the vllm collector too; that is KvopsTargetDown's to report, and
    # the stub GPUs and the host answer: no KvopsCollectorFailing, not even pending.
    assert by_name.get("KvopsCollectorFailing", []) == []
    assert {a["state"] for a in alerts} <= {"pending", "firing"}


def test_scrape_is_of_the_exporter_not_a_fixture(stack: PrometheusStack) -> None:
    up = stack.query('up{job="kvops"}')
    assert [float(s["value"][1]) for s in up] == [1.0]
    targets = {s["metric"]["target"]: float(s["value"][1]) for s in stack.query("kvops_target_up")}
    connector_sims = stack.connector_sim_urls
    assert targets == {
        stack.sim_url: 1.0,
        stack.dead_url: 0.0,
        **dict.fromkeys(connector_sims.values(), 1.0),
        stack.store_url: 1.0,  # the Mooncake master's page: a store is a target of its own
    }
    engines = stack.query(f'kvops_vllm_requests_running{{target="{stack.sim_url}"}}')
    assert sorted(s["metric"]["engine"] for s in engines) == [str(i) for i in range(SIM_ENGINES)]
    # Each data-parallel engine has its own tier; the host carries them all.
    tier = stack.query("instance:kvops_offload_cpu_tier_bytes:sum")
    gib = SIM_ENGINES * SIM_OFFLOAD_GIB + len(CONNECTOR_SIMS) * CONNECTOR_SIM_OFFLOAD_GIB
    assert [float(s["value"][1]) for s in tier] == [gib * 2**30]
    # the connector panels' data comes from the sims on those connectors, not from the plain one
    tiering = stack.query("kvops_offload_tier_chunk_lookups_total")
    assert {s["metric"]["target"] for s in tiering} == {connector_sims["tiering"]}
    outcomes = stack.query("kvops_offload_simple_save_outcomes_blocks_total")
    assert {s["metric"]["target"] for s in outcomes} == {connector_sims["simple"]}
