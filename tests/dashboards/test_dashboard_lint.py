"""The committed dashboards follow the conventions grafana/dashboard-linter checks (the rules
that apply to kvops; the linter itself is a Go binary, not on PyPI) and cover what issue 6
asks each dashboard to show."""

from __future__ import annotations

import re
from types import ModuleType
from typing import Any

import pytest

from kvops import names

UIDS = {
    "kvops-kv-store.json": "kvops-kv-store",
    "kvops-offload-overview.json": "kvops-offload-overview",
    "kvops-gpu-host-memory.json": "kvops-gpu-host-memory",
}
UNITS = {"percentunit", "bytes", "Bps", "reqps", "short", "none", "s"}
DATASOURCE_UID = "${datasource}"

# What each dashboard must query (issue 6, "What to build").
MUST_QUERY = {
    # A KV store's own view (Mooncake's master; issue 42): full, failing, evicting
    "kvops-kv-store.json": {
        "kvops_kv_store_allocated_bytes",
        "kvops_kv_store_capacity_bytes",
        "kvops_kv_store_keys",
        "kvops_kv_store_lookups_total",
        "kvops_kv_store_lookup_hits_total",
        "kvops_kv_store_hit_bytes_total",
        "kvops_kv_store_puts_total",
        "kvops_kv_store_put_no_space_failures_total",
        "kvops_kv_store_puts_abandoned_total",
        "kvops_kv_store_evicted_bytes_total",
    },
    "kvops-offload-overview.json": {
        "kvops:prefix_cache_hit_ratio:rate5m",  # local and external hit rate
        "kvops:offload_bandwidth_bytes_per_second:rate5m",  # store/load bandwidth
        "kvops_offload_transfer_bytes_total",  # offered load
        "kvops:offload_load_store_ratio:rate5m",
        "kvops_vllm_kv_cache_usage_ratio",
        "kvops_vllm_preemptions_total",
        "kvops_vllm_requests_running",
        "kvops_vllm_requests_waiting",
        "kvops_offload_cpu_tier_bytes",
    },
    "kvops-gpu-host-memory.json": {
        "kvops_gpu_memory_used_bytes",
        "kvops_gpu_memory_total_bytes",
        "kvops_gpu_pcie_transmit_bytes_total",
        "kvops_gpu_pcie_receive_bytes_total",
        "kvops_gpu_pcie_transmit_bytes_per_second",
        "kvops_gpu_pcie_receive_bytes_per_second",
        "kvops_gpu_pcie_link_max_bytes_per_second",
        "kvops_gpu_nvlink_transmit_bytes_total",
        "kvops_gpu_nvlink_receive_bytes_total",
        "kvops_gpu_xgmi_read_bytes_total",
        "kvops_gpu_xgmi_write_bytes_total",
        "kvops_host_memory_available_bytes",
        "kvops_host_memory_shmem_bytes",
        "kvops_host_memory_mlocked_bytes",
        "kvops_host_shm_free_bytes",
        "kvops_vllm_process_memory_bytes",
    },
}


def panels(model: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in model["panels"] if p["type"] != "row"]


def variables(model: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in model["templating"]["list"]}


def test_each_file_is_an_importable_dashboard_model(dashboards: dict[str, dict[str, Any]]) -> None:
    assert set(dashboards) == set(UIDS)
    for name, model in dashboards.items():
        assert "dashboard" not in model, f"{name}: API envelope, not the import format"
        assert model["uid"] == UIDS[name]
        assert model["id"] is None
        assert model["schemaVersion"] == 41
        assert model["title"].startswith("kvops / ")
        assert "kvops" in model["tags"]


def test_datasource_job_and_instance_variables(dashboards: dict[str, dict[str, Any]]) -> None:
    for name, model in dashboards.items():
        found = variables(model)
        ds = [v for v in found.values() if v["type"] == "datasource"]
        assert len(ds) == 1 and ds[0]["name"] == "datasource" and ds[0]["label"] == "Data source", name
        assert ds[0]["query"] == "prometheus"
        assert {"job", "instance"} <= set(found), name
    assert "model" in variables(dashboards["kvops-offload-overview.json"])
    assert "gpu" in variables(dashboards["kvops-gpu-host-memory.json"])


def test_variable_queries_read_defined_metrics_and_labels(dashboards: dict[str, dict[str, Any]]) -> None:
    specs = names.by_name()
    for model in dashboards.values():
        for var in variables(model).values():
            if var["type"] != "query":
                continue
            match = re.fullmatch(r"label_values\((\w+)(?:\{[^}]*\})?, (\w+)\)", var["definition"])
            assert match, var["definition"]
            metric, label = match.groups()
            assert metric in specs, var["definition"]
            assert label in (*specs[metric].labels, "job", "instance"), var["definition"]
            assert var["query"]["query"] == var["definition"]
            assert var["datasource"]["uid"] == DATASOURCE_UID


def test_every_panel_has_description_unit_and_the_datasource_variable(
    dashboards: dict[str, dict[str, Any]],
) -> None:
    for name, model in dashboards.items():
        for panel in panels(model):
            where = f"{name}: {panel['title']}"
            assert len(panel["description"]) > 40, where
            assert panel["fieldConfig"]["defaults"]["unit"] in UNITS, where
            assert panel["datasource"]["uid"] == DATASOURCE_UID, where
            assert panel["targets"], where
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == DATASOURCE_UID, where


def test_units_match_what_is_measured(dashboards: dict[str, dict[str, Any]], generator: ModuleType) -> None:
    for model in dashboards.values():
        for panel in panels(model):
            used = set().union(*(generator.metric_names(t["expr"]) for t in panel["targets"]))
            unit = panel["fieldConfig"]["defaults"]["unit"]
            if used and all(n.endswith(("_ratio", "hit_ratio:rate5m", "ratio:rate5m")) for n in used):
                assert unit == "percentunit", panel["title"]
            if all(n.endswith("_bytes") or n.endswith("bytes:sum") for n in used):
                assert unit == "bytes", panel["title"]
            if used and all(n.endswith(("_seconds", "_seconds:p99_rate5m")) for n in used):
                assert unit == "s", panel["title"]
            if any("bytes_per_second" in n for n in used) or any(
                n.endswith("_bytes_total") and "rate(" in t["expr"] for t in panel["targets"] for n in used
            ):
                assert unit == "Bps", panel["title"]


def test_queries_filter_by_the_variables_and_use_rate_interval(
    dashboards: dict[str, dict[str, Any]], generator: ModuleType
) -> None:
    specs = names.by_name()
    for model in dashboards.values():
        var_names = set(variables(model))
        for panel in panels(model):
            for target in panel["targets"]:
                expr = target["expr"]
                for bracket in re.findall(r"\[([^\]]*)\]", expr):
                    assert bracket == "$__rate_interval", f"{panel['title']}: [{bracket}]"
                selectors = generator.selector_labels(expr)
                assert set(selectors) == generator.metric_names(expr), f"{panel['title']}: bare metric name"
                for metric, labels in selectors.items():
                    assert {"job", "instance"} <= labels, f"{panel['title']}: {metric}"
                    spec_labels = specs[metric].labels if metric in specs else ()
                    if "model" in var_names and "model_name" in spec_labels:
                        assert "model_name" in labels, f"{panel['title']}: {metric} ignores $model"
                    if "gpu" in var_names and "gpu" in spec_labels:
                        assert "gpu" in labels, f"{panel['title']}: {metric} ignores $gpu"
                # Counters only inside rate(): a raw counter value means nothing on a graph.
                for counter in re.findall(r"[\w:]+_total\b", expr):
                    assert re.search(rf"\b(?:rate|increase|irate)\({re.escape(counter)}\{{", expr), counter


def test_panels_have_unique_ids_and_do_not_overlap(dashboards: dict[str, dict[str, Any]]) -> None:
    for name, model in dashboards.items():
        ids = [p["id"] for p in model["panels"]]
        assert len(ids) == len(set(ids)), name
        cells: set[tuple[int, int]] = set()
        for panel in model["panels"]:
            g = panel["gridPos"]
            assert g["x"] + g["w"] <= 24, panel["title"]
            mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
            assert not (mine & cells), f"{name}: {panel['title']} overlaps"
            cells |= mine


@pytest.mark.parametrize("file_name", sorted(MUST_QUERY))
def test_dashboard_shows_what_the_issue_asks_for(
    file_name: str, dashboards: dict[str, dict[str, Any]], generator: ModuleType
) -> None:
    queried = set().union(
        *(generator.metric_names(e) for _, e in generator.panel_queries(dashboards[file_name]))
    )
    assert MUST_QUERY[file_name] - queried == set()


def test_hit_rate_panels_show_both_tiers(dashboards: dict[str, dict[str, Any]]) -> None:
    exprs = [
        e
        for p in panels(dashboards["kvops-offload-overview.json"])
        for e in (t["expr"] for t in p["targets"])
    ]
    assert any('tier="local"' in e for e in exprs)
    assert any('tier="external"' in e for e in exprs)
