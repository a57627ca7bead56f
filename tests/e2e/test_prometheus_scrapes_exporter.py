"""A real Prometheus scrapes a real `kvops exporter` process pointed at vLLM fixtures."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import requests

from support.paths import VLLM_FIXTURES
from support.prom import Prometheus, free_port
from support.upstream import Upstream, body

pytestmark = pytest.mark.slow


@pytest.fixture
def exporter_against_fixtures():
    upstream = Upstream()
    good = upstream.route("vllm", body((VLLM_FIXTURES / "0.33.0" / "offload-t2.prom").read_bytes()))
    bad = upstream.route("broken", body(b"oops", status=500))
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kvops.cli", "exporter", "--target", good, "--target", bad,
         "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    url = f"127.0.0.1:{port}"
    end = time.monotonic() + 20
    while time.monotonic() < end:
        try:
            if requests.get(f"http://{url}/metrics", timeout=5).status_code == 200:
                break
        except requests.RequestException:
            time.sleep(0.2)
    yield url, good, bad, proc
    proc.terminate()
    proc.wait(timeout=10)
    upstream.stop()


def test_prometheus_stores_the_normalised_series(exporter_against_fixtures):
    url, good, bad, proc = exporter_against_fixtures
    prom = Prometheus([url])
    try:
        up = prom.wait_for("kvops_target_up", min_series=2)
        by_target = {r["metric"]["target"]: float(r["value"][1]) for r in up}
        assert by_target == {good: 1.0, bad: 0.0}
        fed = json.loads((VLLM_FIXTURES / "0.33.0" / "truth.json").read_text())["offload"]["dumps"][1]
        fed = fed["engines"]["0"]
        expected = {
            'kvops_prefix_cache_hits_tokens_total{tier="local"}': fed["prefix_cache_hits"],
            'kvops_prefix_cache_hits_tokens_total{tier="external"}': fed["external_prefix_cache_hits"],
            'kvops_offload_transfer_bytes_total{direction="store"}': fed["store_bytes"],
            'kvops_offload_transfer_bytes_total{direction="load"}': fed["load_bytes"],
            "kvops_vllm_requests_waiting": fed["num_waiting_reqs"],
        }
        for expr, want in expected.items():
            (series,) = prom.query(expr)
            assert series["metric"]["target"] == good
            assert series["metric"]["model_name"] == "meta-llama/Llama-3.1-8B-Instruct"
            assert float(series["value"][1]) == pytest.approx(want, rel=1e-12), expr
        # the exporter itself is healthy from Prometheus's point of view
        (scrape,) = prom.query('up{job="kvops"}')
        assert scrape["value"][1] == "1"
        host = prom.query('kvops_collector_success{collector="host"}')
        assert [float(h["value"][1]) for h in host] == [1.0]
        assert float(prom.query('kvops_collector_success{collector="nvidia"}')[0]["value"][1]) == 0.0
    finally:
        prom.stop()
    assert proc.poll() is None, "the exporter must still be running"
