"""The rule files: promtool accepts and tests them, every alert has a firing and a boundary
case, the tests catch a shifted threshold, and every name is one the exporter defines."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from kvops import names

pytestmark = pytest.mark.slow  # promtool, Prometheus's own binary, run once per case and mutation

ALERTS = Path(__file__).resolve().parents[2] / "alerts"
TEST_FILES = sorted((ALERTS / "tests").glob("*.yml"))


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_promtool_check_rules_accepts_every_rule_file(promtool: str) -> None:
    files = sorted(str(p) for p in ALERTS.glob("*.yml"))
    assert len(files) >= 2
    result = run(promtool, "check", "rules", *files)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests_pass(promtool: str) -> None:
    assert TEST_FILES
    result = run(promtool, "test", "rules", *map(str, TEST_FILES))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_firing_case_and_a_case_that_does_not_fire(alerts: list[dict[str, Any]]) -> None:
    firing: set[str] = set()
    silent: set[str] = set()
    for path in TEST_FILES:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                (firing if check.get("exp_alerts") else silent).add(check["alertname"])
    defined = {a["alert"] for a in alerts}
    assert defined - firing == set(), "alerts without a case that fires"
    assert defined - silent == set(), "alerts without a boundary case that must not fire"


# Each mutation moves one alert's threshold or duration just across the boundary its test pins:
# the promtool tests must then fail, or they are not testing that boundary.
MUTATIONS = {
    "hit rate threshold": ('{tier="external"} < 0.5', '{tier="external"} <= 0.5'),
    "bandwidth share": ("0.25 * target:", "0.2501 * target:"),
    "preemption for": (
        "kvops:vllm_preemptions:rate5m > 0\n        for: 15m",
        "kvops:vllm_preemptions:rate5m > 0\n        for: 14m",
    ),
    "host memory margin": (
        "kvops_host_memory_available_bytes\n            < on (job, instance)\n          0.1 *",
        "kvops_host_memory_available_bytes\n            < on (job, instance)\n          0.1000001 *",
    ),
    "shm comparison": (
        "kvops_host_shm_free_bytes\n            < on",
        "kvops_host_shm_free_bytes\n            <= on",
    ),
    "replay window": (
        "rate(kvops_gpu_pcie_replay_total[5m]) > 0",
        "rate(kvops_gpu_pcie_replay_total[5m]) >= 0",
    ),
    "target down": ("kvops_target_up == 0", "kvops_target_up <= 1"),
    "allocation failures for": (
        "kvops_offload_dropped_tokens_total[5m]) > 0\n        for: 15m",
        "kvops_offload_dropped_tokens_total[5m]) > 0\n        for: 14m",
    ),
    "write-only tier for": (
        '{direction="load"}[30m]) > 0\n        for: 30m',
        '{direction="load"}[30m]) > 0\n        for: 29m',
    ),
    "lookup delay threshold": ('{mode="sync"} > 0.01', '{mode="sync"} > 0.0497'),
    "vendor collector history": ("[1d]) == 1", "[1d]) >= 0"),
    # issue 42 (h42a)
    "kv transfer failure share": (
        "            > 0.05\n        for: 10m",
        "            >= 0.05\n        for: 10m",
    ),
    "back-pressure for": (
        "stores_dropped_total[5m]) > 0\n        for: 15m",
        "stores_dropped_total[5m]) > 0\n        for: 12m",
    ),
    "target collectors left to KvopsTargetDown": (
        'collector!~"vllm|lmcache|nvidia|amd"',
        'collector!~"nvidia|amd"',
    ),
    # --- the KV store alerts (Mooncake's master; alerts/tests/kvops-store-alerts.test.yml) ---
    "store full for": (
        "kvops_kv_store_put_no_space_failures_total[5m]) > 0\n        for: 10m",
        "kvops_kv_store_put_no_space_failures_total[5m]) > 0\n        for: 9m",
    ),
    "store full threshold": ("put_no_space_failures_total[5m]) > 0", "put_no_space_failures_total[5m]) >= 0"),
    "abandoned puts, not failed starts": (
        "increase(kvops_kv_store_puts_abandoned_total[5m])",
        "increase(kvops_kv_store_put_failures_total[5m])",
    ),
    "eviction storm capacity": (
        'engine_kind)\n          kvops_kv_store_capacity_bytes{medium="memory"}',
        'engine_kind)\n          0.8 * kvops_kv_store_capacity_bytes{medium="memory"}',
    ),
    "eviction storm for": (
        'kvops_kv_store_capacity_bytes{medium="memory"}\n        for: 15m',
        'kvops_kv_store_capacity_bytes{medium="memory"}\n        for: 14m',
    ),
}


@pytest.mark.parametrize("mutation", MUTATIONS.values(), ids=list(MUTATIONS))
def test_promtool_tests_catch_a_shifted_boundary(
    promtool: str, tmp_path: Path, mutation: tuple[str, str]
) -> None:
    old, new = mutation
    source = (ALERTS / "kvops-alerts.yml").read_text()
    assert source.count(old) == 1, f"mutation anchor not found once: {old!r}"
    shutil.copy(ALERTS / "kvops-rules.yml", tmp_path / "kvops-rules.yml")
    (tmp_path / "kvops-alerts.yml").write_text(source.replace(old, new))
    (tmp_path / "tests").mkdir()
    for path in TEST_FILES:
        shutil.copy(path, tmp_path / "tests" / path.name)
    assert run(promtool, "check", "rules", str(tmp_path / "kvops-alerts.yml")).returncode == 0
    result = run(promtool, "test", "rules", *(str(tmp_path / "tests" / p.name) for p in TEST_FILES))
    assert result.returncode != 0, f"promtool tests still pass with {new!r}"


def test_alerts_follow_the_conventions(alerts: list[dict[str, Any]]) -> None:
    assert len(alerts) >= 7
    for alert in alerts:
        name = alert["alert"]
        assert re.fullmatch(r"Kvops(?:[A-Z][a-z0-9]*)+", name), f"{name}: CamelCase, Kvops prefix"
        assert alert["labels"]["severity"] in {"warning", "critical"}, name
        assert re.fullmatch(r"\d+[smh]", alert["for"]), f"{name}: needs a for: duration"
        for key in ("summary", "description", "runbook_url"):
            assert alert["annotations"].get(key, "").strip(), f"{name}: no {key}"


def test_recording_rules_are_named_level_metric_operations(recording_rules: list[dict[str, Any]]) -> None:
    assert recording_rules
    for rule in recording_rules:
        level, metric, operations = rule["record"].split(":")
        assert level and operations, rule["record"]
        prefixes = (
            "kvops_",
            "prefix_cache",
            "prompt_tokens",
            "offload",
            "vllm",
            "time_to_first_token",
            "request_queue",
        )
        assert metric.startswith(prefixes), rule["record"]


def test_rule_expressions_use_only_names_the_exporter_defines(
    generator: ModuleType, alerts: list[dict[str, Any]], recording_rules: list[dict[str, Any]]
) -> None:
    recorded = {r["record"] for r in recording_rules}
    problems = {
        rule.get("alert") or rule["record"]: generator.unknown_names(rule["expr"], recorded)
        for rule in alerts + recording_rules
    }
    assert {k: v for k, v in problems.items() if v} == {}
    # Recording rules read only raw kvops_* metrics, so their order within the group does not matter.
    for rule in recording_rules:
        exposed = {n for spec in names.all_specs() for n in spec.sample_names}
        assert generator.metric_names(rule["expr"]) <= exposed, rule["record"]
