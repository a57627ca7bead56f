"""Live kvops (top, doctor --target, the filtered-page probe) against a real vLLM 0.32.0 with
vLLM's offloading code running (kvops_host_offload: NOT STOCK vLLM; docs/dev/real-vllm-harness.md).

The truth is what kvops actually read: a recording proxy sits between kvops and the server, and
the pages it recorded are parsed with prometheus_client's parser.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from kvops.scrape.target import TargetScraper
from real_vllm.conftest import Truth, one, page, parse
from support.real_vllm import traffic
from support.real_vllm.proxy import Exchange, RecordingProxy
from support.real_vllm.server import MODEL_NAME, RealVllm

pytestmark = [pytest.mark.real_vllm, pytest.mark.timeout(1200)]
ME = {"model_name": MODEL_NAME, "engine": "0"}
TRAFFIC_CAP_S = 600
FILTER = "?name[]=vllm:num_requests_running&name[]=vllm:prefix_cache_hits_total"


@pytest.fixture
def busy(real_vllm: Callable[[str], RealVllm]) -> Iterator[RealVllm]:
    """The offloading server with traffic running for the whole test (until its teardown; at most
    TRAFFIC_CAP_S): 6 new prefixes a round keep it storing, the other 6 load back from the tier,
    repeats hit locally. Neither a fixed length nor a request count: a slow machine's test once
    outlived its traffic and judged an idle interval, a fast machine once used the count up."""
    server = real_vllm("offload")
    results: list[traffic.TrafficResult] = []
    stop = threading.Event()

    def run() -> None:
        results.append(
            traffic.drive(
                server.url, MODEL_NAME, rounds=None, seconds=TRAFFIC_CAP_S, seed=7, fresh=6, stop=stop
            )
        )

    thread = threading.Thread(target=run)
    thread.start()
    end = time.monotonic() + 60
    try:
        # steady state: the tier has loaded something back (the flat load series exists from then on)
        while one(parse(page(server.metrics_url)), "vllm:kv_offload_load_bytes_total", **ME) is None:
            assert time.monotonic() < end and thread.is_alive(), "no load from the offload tier"
            time.sleep(0.5)
        yield server
        assert thread.is_alive(), f"the traffic ended before the test did (raise TRAFFIC_CAP_S?): {results}"
    finally:
        stop.set()
        thread.join()
    assert results and results[0].failed == 0, results


def delta(a: Truth, b: Truth) -> Callable[..., float]:
    def d(name: str, **labels: str) -> float:
        return one(b, name, **ME, **labels) - one(a, name, **ME, **labels)  # type: ignore[operator]

    return d


def whole_pages(proxy: RecordingProxy) -> list[Exchange]:
    """The pages kvops read: its whole pages. After its second page kvops may also probe the
    filtered page (kvops/scrape/page_filter.py), after the whole page of a round; a real vLLM answers that
    with the whole page too, and the probe's answer is never read as a sample."""
    pages = [e for e in proxy.pages() if "name[]" not in e.path]
    assert len(proxy.pages()) - len(pages) <= 1
    return pages


def kvops_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kvops.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def test_live_top_interval_equals_the_deltas_of_the_pages_it_read(busy: RealVllm) -> None:
    proxy = RecordingProxy(busy.url)
    try:
        done = kvops_cli("top", proxy.url, "--once", "--json", "--interval", "2")
    finally:
        proxy.stop()
    assert done.returncode == 0, done.stderr
    pages = whole_pages(proxy)
    assert len(pages) == 2 and all(p.status == 200 for p in pages)
    a, b = (parse(p.body.decode()) for p in pages)
    d = delta(a, b)
    # the interval judged has stores, loads and local hits
    assert d("vllm:kv_offload_store_bytes_total") > 0 and d("vllm:kv_offload_load_bytes_total") > 0
    assert d("vllm:prefix_cache_hits_total") > 0
    (row,) = json.loads(done.stdout)["targets"]
    assert row["store_bytes"] == d("vllm:kv_offload_store_bytes_total")
    assert row["load_bytes"] == d("vllm:kv_offload_load_bytes_total")
    assert row["store_seconds"] == pytest.approx(d("vllm:kv_offload_store_time_total"), rel=1e-9)
    assert row["load_seconds"] == pytest.approx(d("vllm:kv_offload_load_time_total"), rel=1e-9)
    assert row["local_queries"] == d("vllm:prefix_cache_queries_total")
    assert row["external_queries"] == d("vllm:external_prefix_cache_queries_total")
    local = d("vllm:prefix_cache_hits_total") / d("vllm:prefix_cache_queries_total")
    external = d("vllm:external_prefix_cache_hits_total") / d("vllm:external_prefix_cache_queries_total")
    assert row["local_hit_rate"] == pytest.approx(local, rel=1e-12)
    assert row["external_hit_rate"] == pytest.approx(external, rel=1e-12)
    for source, tokens in row["prompt_tokens_by_source"].items():
        assert tokens == d("vllm:prompt_tokens_by_source_total", source=source)
    assert row["tiers"]["host"]["store_bytes"] == row["store_bytes"]


def test_doctor_target_says_a_healthy_offloading_server_is_healthy_with_its_figures(busy: RealVllm) -> None:
    proxy = RecordingProxy(busy.url)
    try:
        done = kvops_cli("doctor", "--target", proxy.url, "--json")
    finally:
        proxy.stop()
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    a, b = (parse(p.body.decode()) for p in whole_pages(proxy))
    d = delta(a, b)
    external = d("vllm:external_prefix_cache_hits_total") / d("vllm:external_prefix_cache_queries_total")
    assert external >= 0.5 and d("vllm:num_preemptions_total") == 0  # below every alert's threshold
    assert doc["findings"] == []
    (engine,) = doc["engines"]
    assert engine["external_hit_rate"] == pytest.approx(external, rel=1e-12)
    proxy = RecordingProxy(busy.url)
    try:
        text = kvops_cli("doctor", "--target", proxy.url)
    finally:
        proxy.stop()
    assert text.returncode == 0, text.stderr
    a, b = (parse(p.body.decode()) for p in whole_pages(proxy))
    d = delta(a, b)
    rate = d("vllm:external_prefix_cache_hits_total") / d("vllm:external_prefix_cache_queries_total")
    assert "healthy" in text.stdout and f"offload tier hit rate {rate:.1%}" in text.stdout, text.stdout
    assert "no live offload signal" not in text.stdout


def test_the_real_server_ignores_the_filter_and_the_probe_stays_on_whole_pages(real_vllm) -> None:
    server = real_vllm("offload")
    whole, filtered = page(server.metrics_url), page(server.metrics_url + FILTER)
    names = lambda text: {n for n, _ in parse(text)}  # noqa: E731
    assert names(filtered) == names(whole) and len(names(whole)) > 100  # the whole page, both times
    proxy = RecordingProxy(server.url)
    scraper = TargetScraper(proxy.url)
    try:
        for _ in range(2):
            assert scraper.scrape(time.monotonic() + 30).up
        end = time.monotonic() + 30
        while scraper._filter.decided_at is None:
            assert time.monotonic() < end, "the probe never decided"
            time.sleep(0.05)
        for _ in range(3):
            assert "name[]" not in scraper.fetch_url()
            assert scraper.scrape(time.monotonic() + 30).up
    finally:
        scraper.close()
        proxy.stop()
    probes = [e for e in proxy.pages() if "name[]" in e.path]
    assert len(probes) == 1 and probes[0].status == 200  # asked once, answered whole, never again
    assert len(proxy.pages()) == 6
