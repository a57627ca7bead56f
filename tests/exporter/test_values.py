"""Fixtures served over HTTP, scraped by the exporter: the kvops_* values equal vLLM's truth."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvops import names
from support.exporter_harness import parse_exposition, value
from support.paths import VLLM_FIXTURES

CASES = [(v, i) for v in ("0.33.0", "0.20.0", "0.11.2") for i in (0, 1)]


@pytest.mark.parametrize(("version", "dump_index"), CASES)
def test_exporter_serves_truth_counters(upstream, make_exporter, version: str, dump_index: int):
    doc = json.loads((VLLM_FIXTURES / version / "truth.json").read_text())["offload"]
    dump = doc["dumps"][dump_index]
    url = upstream.route("vllm", lambda h, p=VLLM_FIXTURES / version / dump["file"]: _serve_file(h, p))
    exp = make_exporter([url])
    s = exp.samples()
    fed = dump["engines"]["0"]
    labels = {"target": url, "engine": "0", "model_name": doc["config"]["served_model_name"]}
    assert value(s, "kvops_target_up", target=url) == 1.0
    assert value(s, "kvops_collector_success", collector="vllm") == 1.0
    pairs = [
        ("kvops_prefix_cache_queries_tokens_total", {"tier": "local"}, "prefix_cache_queries"),
        ("kvops_prefix_cache_hits_tokens_total", {"tier": "local"}, "prefix_cache_hits"),
        ("kvops_prefix_cache_queries_tokens_total", {"tier": "external"}, "external_prefix_cache_queries"),
        ("kvops_prefix_cache_hits_tokens_total", {"tier": "external"}, "external_prefix_cache_hits"),
        ("kvops_vllm_preemptions_total", {}, "preemptions"),
        ("kvops_vllm_requests_running", {}, "num_running_reqs"),
        ("kvops_vllm_kv_cache_usage_ratio", {}, "kv_cache_usage"),
    ]
    if version != "0.11.2":
        pairs.append(("kvops_offload_transfer_bytes_total", {"direction": "store"}, "store_bytes"))
        pairs.append(("kvops_offload_transfer_seconds_total", {"direction": "store"}, "store_time"))
        if fed["load_jobs"] or version == "0.33.0":
            pairs.append(("kvops_offload_transfer_bytes_total", {"direction": "load"}, "load_bytes"))
    for name, extra, key in pairs:
        got = value(s, name, **labels, **extra)
        assert got == pytest.approx(fed[key], rel=1e-12), (name, extra)
    if version == "0.11.2":
        # no offload transfer metric in 0.11: absent, not zero
        assert value(s, "kvops_offload_transfer_bytes_total", **labels, direction="store") is None
    assert value(s, "kvops_offload_cpu_tier_bytes", **labels) == 137438953472


def _serve_file(h, path: Path) -> None:
    from support.upstream import body

    body(path.read_bytes())(h)


def test_every_fixture_file_goes_through_the_exporter(upstream, make_exporter):
    files = sorted(VLLM_FIXTURES.glob("*/*.prom")) + sorted(VLLM_FIXTURES.glob("pasted/*.txt"))
    urls = [upstream.route(f"f{i}", lambda h, p=p: _serve_file(h, p)) for i, p in enumerate(files)]
    exp = make_exporter(urls)
    s = exp.samples()
    for url in urls:
        assert value(s, "kvops_target_up", target=url) == 1.0, url
    exposed = {n for n, _ in s}
    known = {name for spec in names.all_specs() for name in spec.sample_names}
    # every family served is in names.py (counters appear with _total; _created is client_python's)
    assert {n for n in exposed if not n.endswith("_created")} <= known


def test_series_of_a_target_that_goes_down_disappear(upstream, make_exporter):
    path = VLLM_FIXTURES / "0.33.0" / "offload-t2.prom"
    url = upstream.route("v", lambda h: _serve_file(h, path))
    exp = make_exporter([url])
    assert value(exp.samples(), "kvops_vllm_requests_running", target=url) == 97
    upstream.routes.clear()  # now 404
    s = exp.samples()
    assert value(s, "kvops_target_up", target=url) == 0.0
    assert value(s, "kvops_vllm_requests_running", target=url) is None
    assert parse_exposition(exp.scrape().text)  # still a valid exposition
