"""The simulator over real HTTP: what the rest of kvops scrapes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kvops.sim import server


def scrape(url: str) -> dict[str, float]:
    body = urllib.request.urlopen(url, timeout=5).read().decode()
    values: dict[str, float] = {}
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            key = s.name + "".join(f",{k}={v}" for k, v in sorted(s.labels.items()) if k != "model_name")
            values[key] = s.value
    return values


def test_fresh_simulator_stores_within_two_seconds_and_grows_consistently() -> None:
    sim = server.start(port=0, seed=1)
    try:
        assert sim.metrics_url == sim.url + "/metrics"
        time.sleep(1.5)
        first = scrape(sim.metrics_url)
        assert first["vllm:kv_offload_store_bytes_total,engine=0"] > 0
        time.sleep(1.0)
        second = scrape(sim.metrics_url)
    finally:
        sim.stop()
    for key, value in first.items():
        if key.endswith("_total") or "_total," in key:
            assert second[key] >= value, key
    s = second
    assert s["vllm:prefix_cache_hits_total,engine=0"] <= s["vllm:prefix_cache_queries_total,engine=0"]
    assert (
        s["vllm:external_prefix_cache_hits_total,engine=0"]
        <= s["vllm:external_prefix_cache_queries_total,engine=0"]
    )
    # Store bandwidth while transferring: a plausible PCIe Gen5 figure (tens of GB/s).
    bw = s["vllm:kv_offload_store_bytes_total,engine=0"] / s["vllm:kv_offload_store_time_total,engine=0"]
    assert 10e9 < bw < 63e9
    # The deprecated names carry the same numbers as the flat ones.
    assert (
        s["vllm:kv_offload_total_bytes_total,engine=0,transfer_type=GPU_to_CPU"]
        == s["vllm:kv_offload_store_bytes_total,engine=0"]
    )
    info = [k for k in s if k.startswith("kvops_sim_info,")]
    assert len(info) == 1 and "vllm_version=0.33.0" in info[0] and "seed=1" in info[0]


def test_every_family_says_simulated() -> None:
    with server.start(port=0) as sim:
        body = urllib.request.urlopen(sim.metrics_url, timeout=5).read().decode()
    helps = [line for line in body.splitlines() if line.startswith("# HELP ")]
    assert len([h for h in helps if h.startswith("# HELP vllm:")]) > 50
    assert all("simulated" in line or "simulator" in line for line in helps)
    assert "kvops_sim_info{" in body


def test_unknown_path_is_404() -> None:
    with server.start(port=0) as sim, pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(sim.url + "/nope", timeout=5)
    assert err.value.code == 404


def test_idle_simulator_is_cheap_and_catches_up_bounded() -> None:
    t = [0.0]
    sim = server.Sim(seed=0, clock=lambda: t[0])
    t[0] = 10_000.0  # nobody scraped for hours
    started = time.perf_counter()
    sim.metrics()
    assert time.perf_counter() - started < 5.0
    assert sim.engine.clock <= server.MAX_CATCHUP_S + 1.0


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--listen", "nope"], "--listen"),
        (["--listen", "127.0.0.1:99999"], "--listen"),
        (["--vllm-version", "0.9.0"], "--vllm-version"),
        (["--vllm-version", "zero"], "--vllm-version"),
        (["--workload", "nope"], "--workload"),
    ],
)
def test_bad_input_is_one_line_exit_2(flags: list[str], message: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kvops.cli", "sim", *flags], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]


@pytest.mark.slow
def test_command_serves_and_exits_0_on_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kvops.cli", "sim", "--listen", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stderr.readline()
        assert "http://127.0.0.1:" in line
        url = line.strip().split()[-1]
        assert "vllm:kv_cache_usage_perc" in urllib.request.urlopen(url, timeout=5).read().decode()
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_port_in_use_is_one_line_exit_2() -> None:
    with server.start(port=0) as busy:
        port = busy.url.rsplit(":", 1)[1]
        proc = subprocess.run(
            [sys.executable, "-m", "kvops.cli", "sim", "--listen", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "cannot listen" in proc.stderr


def test_help_text_is_the_same_on_every_scrape():
    """Issue 25 item 8: python_info's HELP gained one more "[kvops sim: ...]" note per scrape
    (the note was added to prometheus_client's cached metric object)."""
    with server.start(port=0) as sim:
        pages = [urllib.request.urlopen(sim.metrics_url, timeout=10).read().decode() for _ in range(8)]
    helps = [[line for line in page.splitlines() if line.startswith("# HELP python_")] for page in pages]
    assert helps[0], "python_info and the gc families are served"
    assert all(h == helps[0] for h in helps), helps[-1]
    assert all(line.count("[kvops sim:") == 1 for line in helps[0]), helps[0]


FILTER = "?name[]=vllm:num_requests_running&name[]=vllm:prefix_cache_hits_total"


def _page_names(url: str) -> set[str]:
    body = urllib.request.urlopen(url, timeout=5).read().decode()
    return {s.name for fam in text_string_to_metric_families(body) for s in fam.samples}


def test_a_filtered_request_gets_the_whole_page_as_from_a_real_vllm() -> None:
    """Real vLLM 0.10-0.33 ignore ?name[]= (docs/dev/real-vllm-harness.md; measured on 0.32.0, whose page
    is in tests/fixtures/vllm-real/0.32.0): the simulator does the same by default."""
    sim = server.start(port=0, seed=1)
    try:
        filtered = _page_names(sim.metrics_url + FILTER)
    finally:
        sim.stop()
    assert "vllm:time_to_first_token_seconds_bucket" in filtered
    assert len(filtered) > 50


def test_the_filter_is_answered_only_when_asked_for() -> None:
    sim = server.start(port=0, seed=1, honour_name_filter=True)
    try:
        filtered = _page_names(sim.metrics_url + FILTER)
    finally:
        sim.stop()
    assert filtered == {"vllm:num_requests_running", "vllm:prefix_cache_hits_total"}
