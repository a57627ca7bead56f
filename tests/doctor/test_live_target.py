"""`kvops doctor --target URL`: two reads of a live /metrics page, the alerts' signals as
findings with their playbooks, for vLLM and for other engines; a dead URL is one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvops.cli import main
from kvops.doctor import live
from kvops.rates import EngineInterval
from support.upstream import Upstream, body

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def two_pages(first: str, second: str) -> Any:
    """Serve `first` on the first request and `second` afterwards (a counter moving on)."""
    pages = [body(first), body(second)]
    calls = {"n": 0}

    def handle(h: Any) -> None:
        pages[min(calls["n"], 1)](h)
        calls["n"] += 1

    return handle


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live, "INTERVAL_SECONDS", 0.2)


def test_vllm_033_interval_gives_the_hit_rate_and_preemption_findings(upstream: Upstream, fast: None, capsys):
    t1 = (FIXTURES / "vllm" / "0.33.0" / "offload-t1.prom").read_text()
    t2 = (FIXTURES / "vllm" / "0.33.0" / "offload-t2.prom").read_text()
    url = upstream.route("v", two_pages(t1, t2))
    assert main(["doctor", "--target", url, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    ids = sorted(f["id"] for f in doc["findings"])
    # external hits 45824 of 251904 looked up (18%), one preemption; loads happened: not write-only
    assert ids == ["KvopsOffloadHitRateLow", "KvopsPreemptionsSustained"]
    for f in doc["findings"]:
        assert Path(f["playbook"]).is_file() and f["engine_kind"] == "vllm"
    (engine,) = doc["engines"]
    assert engine["tiers"]["host"]["tokens_saved"] == 45824
    again = upstream.route("v2", two_pages(t1, t2))
    assert main(["doctor", "--target", again, "--strict"]) == 1  # warnings count under --strict
    assert "playbook:" in capsys.readouterr().out


def test_sglang_dropped_tokens_are_an_allocation_failure_finding(upstream: Upstream, fast: None, capsys):
    t1 = (FIXTURES / "sglang" / "hicache-t1.prom").read_text()
    t2 = (FIXTURES / "sglang" / "hicache-t2.prom").read_text()
    url = upstream.route("s", two_pages(t1, t2))
    assert main(["doctor", "--target", url, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    [finding] = doc["findings"]
    assert finding["id"] == "KvopsOffloadAllocationFailuresSustained"
    assert finding["engine_kind"] == "sglang" and "dropped" in finding["evidence"]


def test_write_only_and_slow_lookups_from_an_interval():
    row = EngineInterval(target="t", model_name="m", engine="0", store_bytes=4e9, write_only_tier=True)
    row.lookup_delay_p99_seconds = {"sync": 0.02, "async": 3.0}
    assert [a for a, _ in live.findings_for(row)] == [
        "KvopsOffloadWriteOnlyTier",
        "KvopsOffloadLookupDelayHigh",
    ]
    row.lookup_delay_p99_seconds = {"sync": 0.01}  # the threshold itself does not count
    assert [a for a, _ in live.findings_for(row)] == ["KvopsOffloadWriteOnlyTier"]


def test_unreachable_target_is_one_line_and_exit_2(upstream: Upstream, fast: None, capsys):
    url = upstream.route("gone", body("not metrics at all\n"))
    assert main(["doctor", "--target", url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read" in err and "Traceback" not in err


def test_an_unreachable_target_is_one_line_and_exit_2() -> None:
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    out = subprocess.run(
        [sys.executable, "-m", "kvops.cli", "doctor", "--target", f"http://127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("kvops doctor: error: cannot read")


def test_a_healthy_real_offloading_server_is_said_healthy_with_the_figures_judged(
    upstream: Upstream, fast: None, capsys
) -> None:
    """Pages of a real vLLM 0.32.0 with vLLM's offloading code (tests/fixtures/vllm-real/0.32.0):
    the offload tier serves most of what it is asked for, nothing crosses an alert's threshold."""
    from prometheus_client.parser import text_string_to_metric_families

    real = FIXTURES / "vllm-real" / "0.32.0"
    t1, t2 = (real / "offload-idle.prom").read_text(), (real / "offload-after.prom").read_text()

    def own(text: str, name: str) -> float:
        (v,) = [s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name]
        return v

    hits = own(t2, "vllm:external_prefix_cache_hits_total") - own(t1, "vllm:external_prefix_cache_hits_total")
    asked = own(t2, "vllm:external_prefix_cache_queries_total") - own(
        t1, "vllm:external_prefix_cache_queries_total"
    )
    stored = own(t2, "vllm:kv_offload_store_bytes_total")  # no store before the traffic
    assert main(["doctor", "--target", upstream.route("r", two_pages(t1, t2))]) == 0
    out = capsys.readouterr().out
    assert "no live offload signal" not in out
    assert "healthy, no alert threshold crossed" in out
    assert f"offload tier hit rate {hits / asked:.1%}" in out and f"stored {stored / 1e6:.3g} MB" in out
    assert main(["doctor", "--target", upstream.route("r2", two_pages(t1, t2)), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["findings"] == [] and doc["engines"][0]["external_hit_rate"] == hits / asked
