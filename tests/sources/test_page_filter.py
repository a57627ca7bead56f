"""A target is read from its filtered page (`/metrics?name[]=...`) only once it has been seen
to serve it whole; every other server stays on whole pages and is never shown down for it.

The servers are prometheus_client's own (start_http_server over a CollectorRegistry), as vLLM,
SGLang and LMCache serve /metrics, plus the loopback upstream for servers that ignore or refuse
the query.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from kvops.scrape import page_filter
from kvops.scrape.runner import ScrapeRunner
from kvops.scrape.target import TargetScraper
from tests.support.upstream import Upstream, body

LABELS = ["model_name", "engine"]


def vllm_like(registry: CollectorRegistry) -> None:
    """A few of vLLM's families as its metrics code declares them, and a latency histogram
    kvops does not read (the bulk of a real page)."""
    running = Gauge("vllm:num_requests_running", "running", LABELS, registry=registry)
    queries = Counter("vllm:prefix_cache_queries", "queries", LABELS, registry=registry)
    hits = Counter("vllm:prefix_cache_hits", "hits", LABELS, registry=registry)
    Counter("vllm:kv_offload_store_bytes", "no child yet", LABELS, registry=registry)
    itl = Histogram("vllm:inter_token_latency_seconds", "itl", LABELS, registry=registry,
                     buckets=[0.001 * 2**i for i in range(20)])  # fmt: skip
    for engine in ("0", "1"):
        running.labels("m", engine).set(3)
        queries.labels("m", engine).inc(1000)
        hits.labels("m", engine).inc(250)
        for i in range(50):
            itl.labels("m", engine).observe(0.01 * i)


class NamelessCollector:
    """A collector with no describe(), as prometheus_client's MultiProcessCollector (vLLM with
    --api-server-count > 1): a restricted registry leaves it out."""

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        running = GaugeMetricFamily("vllm:num_requests_running", "running", labels=LABELS)
        running.add_metric(["m", "0"], 3)
        queries = CounterMetricFamily("vllm:prefix_cache_queries", "queries", labels=LABELS)
        queries.add_metric(["m", "0"], 1000)
        yield running
        yield queries


def serve(registry: CollectorRegistry) -> tuple[str, object]:
    server, _thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    return f"http://127.0.0.1:{server.server_port}", server


def two_whole_pages_then_probe(scraper: TargetScraper) -> None:
    """Two scrapes of the whole page (each up), then wait for the probe they start."""
    for _ in range(2):
        assert scraper.scrape(time.monotonic() + 5).up
    wait_for_decision(scraper)


def wait_for_decision(scraper: TargetScraper, seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while scraper._filter.decided_at is None:
        assert time.monotonic() < end, "the probe never decided"
        time.sleep(0.02)


def engines(sample: object) -> list[tuple[str, str, object, object, object]]:
    return [(e.model_name, e.engine, e.requests_running, e.local_queries, e.local_hits)
            for e in sample.engines]  # type: ignore[attr-defined]  # fmt: skip


def test_a_prometheus_client_target_is_read_from_its_filtered_page() -> None:
    registry = CollectorRegistry()
    vllm_like(registry)
    url, server = serve(registry)
    scraper = TargetScraper(url)
    try:
        whole = [scraper.scrape(time.monotonic() + 5) for _ in range(2)]
        wait_for_decision(scraper)
        filtered_url = scraper.fetch_url()
        assert "name[]=vllm:num_requests_running" in filtered_url
        # The family with no child yet is asked for: its first sample will come through.
        assert "name[]=vllm:kv_offload_store_bytes_total" in filtered_url
        sample = scraper.scrape(time.monotonic() + 5)
        assert sample.up and engines(sample) == engines(whole[-1])
        assert engines(sample) == [("m", "0", 3.0, 1000.0, 250.0), ("m", "1", 3.0, 1000.0, 250.0)]
        with urllib.request.urlopen(filtered_url) as reply:
            small = reply.read()
        with urllib.request.urlopen(url + "/metrics") as reply:
            full = reply.read()
        assert b"inter_token_latency" not in small and b"inter_token_latency" in full
        assert len(small) < len(full) / 5
    finally:
        scraper.close()
        server.shutdown()  # type: ignore[attr-defined]


def test_a_registry_whose_filter_drops_samples_stays_on_whole_pages() -> None:
    registry = CollectorRegistry()  # as vLLM's multiprocess registry: no names known
    registry.register(NamelessCollector())  # type: ignore[arg-type]
    url, server = serve(registry)
    scraper = TargetScraper(url)
    try:
        two_whole_pages_then_probe(scraper)
        assert scraper.fetch_url() == url + "/metrics"
        sample = scraper.scrape(time.monotonic() + 5)
        assert sample.up and engines(sample) == [("m", "0", 3.0, 1000.0, None)]
    finally:
        scraper.close()
        server.shutdown()  # type: ignore[attr-defined]


PAGE = 'vllm:num_requests_running{model_name="m",engine="0"} 2\n' * 1


def refuse_filters(h: object) -> None:
    status = 400 if "name[]=" in h.path else 200  # type: ignore[attr-defined]
    body(PAGE if status == 200 else "bad request\n", status)(h)  # type: ignore[arg-type]


@pytest.mark.parametrize("behaviour", [refuse_filters, body(PAGE)], ids=["refuses", "ignores"])
def test_a_server_that_refuses_or_ignores_the_filter_is_never_down_for_it(behaviour: object) -> None:
    upstream = Upstream()
    scraper = TargetScraper(upstream.route("t", behaviour))  # type: ignore[arg-type]
    try:
        two_whole_pages_then_probe(scraper)
        assert upstream.filtered_hits.get("/t/metrics") == 1  # the probe, once
        for _ in range(3):
            assert "name[]" not in scraper.fetch_url()
            assert scraper.scrape(time.monotonic() + 5).up
        assert upstream.filtered_hits.get("/t/metrics") == 1
    finally:
        scraper.close()
        upstream.stop()


def test_one_scrape_never_probes() -> None:
    """`kvops top --once` and `doctor --target` read one whole page and ask nothing more."""
    upstream = Upstream()
    scraper = TargetScraper(upstream.route("t", body(PAGE)))
    try:
        assert scraper.scrape(time.monotonic() + 5).up
        time.sleep(0.3)
        assert upstream.hits["/t/metrics"] == 1 and not upstream.filtered_hits
    finally:
        scraper.close()
        upstream.stop()


def test_an_empty_filtered_page_and_the_reprobe_bring_whole_pages_back() -> None:
    registry = CollectorRegistry()
    vllm_like(registry)
    url, server = serve(registry)
    now = [1000.0]
    scraper = TargetScraper(url)
    scraper._filter.clock = lambda: now[0]
    try:
        two_whole_pages_then_probe(scraper)
        assert "name[]" in scraper.fetch_url()
        # Past REPROBE_SECONDS: whole pages again, then a new probe.
        now[0] += page_filter.REPROBE_SECONDS + 1
        assert scraper.fetch_url() == url + "/metrics"
        two_whole_pages_then_probe(scraper)
        assert "name[]" in scraper.fetch_url()
        # A filtered page with nothing kvops reads (a restarted server that filters badly):
        # the next round reads the whole page.
        for collector in list(registry._collector_to_names):
            registry.unregister(collector)
        registry.register(NamelessCollector())  # type: ignore[arg-type]
        # The whole page is fetched in the same round (issue 25 item 4): no down sample.
        sample = scraper.scrape(time.monotonic() + 5)
        assert sample.up and engines(sample) == [("m", "0", 3.0, 1000.0, None)]
        assert scraper.fetch_url() == url + "/metrics"
    finally:
        scraper.close()
        server.shutdown()  # type: ignore[attr-defined]


def test_a_query_too_long_for_a_proxy_is_not_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(page_filter, "MAX_QUERY_BYTES", 10)
    registry = CollectorRegistry()
    vllm_like(registry)
    url, server = serve(registry)
    scraper = TargetScraper(url)
    try:
        two_whole_pages_then_probe(scraper)
        assert scraper.fetch_url() == url + "/metrics"
    finally:
        scraper.close()
        server.shutdown()  # type: ignore[attr-defined]


def test_the_query_keeps_the_targets_own_query() -> None:
    assert page_filter.filtered_url("http://h/metrics?x=1", ["a:b", "c"]) == (
        "http://h/metrics?x=1&name[]=a:b&name[]=c"
    )


class OverlapCountingTarget:
    """A loopback target that counts kvops's requests in flight at once, from a request's
    arrival to the start of its answer (the next request of a round that waits for this one
    cannot arrive before that). Its filtered page (the probe) is held until `release` is set
    or `hold` seconds pass, and `probe_arrived` says when it came."""

    def __init__(self, hold: float = 3.0) -> None:
        self.hold = hold
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.probe_arrived = threading.Event()
        self.release = threading.Event()

    def __call__(self, h: object) -> None:
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            if "name[]=" in h.path:  # type: ignore[attr-defined]
                self.probe_arrived.set()
                self.release.wait(self.hold)
        finally:
            with self.lock:
                self.in_flight -= 1
        body(PAGE)(h)  # type: ignore[arg-type]


def test_many_targets_are_probed_in_one_round_each_after_its_whole_page() -> None:
    """An exporter with many targets: every one is probed by the round after its second whole
    page, on the round's own fetches (no thread is left behind), and no target ever has two
    kvops requests in flight."""
    upstream = Upstream()
    counters = [OverlapCountingTarget(hold=0.05) for _ in range(12)]
    scrapers = [TargetScraper(upstream.route(f"t{i}", c)) for i, c in enumerate(counters)]
    runner = ScrapeRunner(scrapers, [], timeout=5.0)
    try:
        for _ in range(2):
            assert all(t.up for t in runner.snapshot().targets)
        # The second round probed every target before it ended: nothing is left to wait for.
        assert all(s._filter.decided_at is not None for s in scrapers)
        assert sum(upstream.filtered_hits.values()) == 12
        assert [c.peak for c in counters] == [1] * 12
        assert not [t.name for t in threading.enumerate() if t.name.startswith("kvops-page-filter")]
    finally:
        runner.close()
        upstream.stop()


def _two_engines(h: object) -> None:
    """Its whole page has engines 0 and 1; its filtered page keeps every name but only engine 0
    (a proxy or server that filters by something else than names)."""
    lines = [f'vllm:num_requests_running{{model_name="m",engine="{e}"}} {e + 2}\n' for e in (0, 1)]
    lines += [f'vllm:prefix_cache_queries_total{{model_name="m",engine="{e}"}} 10\n' for e in (0, 1)]
    filtered = "name[]=" in h.path  # type: ignore[attr-defined]
    body("".join(line for line in lines if not filtered or 'engine="0"' in line))(h)  # type: ignore[arg-type]


def test_a_filtered_page_that_leaves_out_an_engine_is_not_used() -> None:
    """Issue 25 item 3: the probe compared sample names only, so engine 1 disappeared while
    the target stayed up. It compares (name, label set)."""
    upstream = Upstream()
    scraper = TargetScraper(upstream.route("t", _two_engines))
    try:
        two_whole_pages_then_probe(scraper)
        assert upstream.filtered_hits.get("/t/metrics") == 1
        assert "name[]" not in scraper.fetch_url()
        sample = scraper.scrape(time.monotonic() + 5)
        assert sample.up and [e.engine for e in sample.engines] == ["0", "1"]
    finally:
        scraper.close()
        upstream.stop()


def test_an_empty_filtered_page_costs_no_down_sample_in_a_scrape_round() -> None:
    """Issue 25 item 4, through the exporter's round (many targets on one multi handle): a
    server restarted with --api-server-count 2 answers the filter with an empty page; the
    whole page is fetched within the same round."""
    registry = CollectorRegistry()
    vllm_like(registry)
    url, server = serve(registry)
    other = Upstream()
    scraper = TargetScraper(url)
    runner = ScrapeRunner([scraper, TargetScraper(other.route("o", body(PAGE)))], [], timeout=5.0)
    try:
        for _ in range(2):
            assert all(t.up for t in runner.snapshot().targets)
        wait_for_decision(scraper)
        assert "name[]" in scraper.fetch_url()
        assert all(t.up for t in runner.snapshot().targets)  # a round on the filtered page
        for collector in list(registry._collector_to_names):
            registry.unregister(collector)
        registry.register(NamelessCollector())  # type: ignore[arg-type]
        mine, theirs = runner.snapshot().targets
        assert mine.up and engines(mine) == [("m", "0", 3.0, 1000.0, None)], mine.error
        assert theirs.up
        assert scraper.fetch_url() == url + "/metrics"
    finally:
        runner.close()
        other.stop()
        server.shutdown()  # type: ignore[attr-defined]


def test_a_round_never_fetches_a_target_while_its_probe_is_in_flight() -> None:
    """The probe of a filtered page ran on a thread of its own after a round, so a round begun
    while it was in flight fetched the same target beside it: two kvops requests at once
    (test_exporter_load's max_in_flight 2 under load). The probe is held open by the target
    here and a new round asked for meanwhile: it must not reach the target until the probe
    has been answered."""
    upstream = Upstream()
    target = OverlapCountingTarget()
    runner = ScrapeRunner([TargetScraper(upstream.route("t", target))], [], timeout=5.0)
    second: list[object] = []
    try:
        assert runner.snapshot().targets[0].up  # the first whole page
        round_two = threading.Thread(target=lambda: second.append(runner.snapshot()))
        round_two.start()  # the second whole page: the probe follows it
        assert target.probe_arrived.wait(10), "no probe after two whole pages"
        third = runner.snapshot()  # asked for while the probe is held open
        target.release.set()
        round_two.join(10)
        assert third.targets[0].up and second and second[0].targets[0].up  # type: ignore[attr-defined]
        assert target.peak == 1, f"{target.peak} kvops requests at once"
        assert upstream.filtered_hits.get("/t/metrics") == 1
    finally:
        target.release.set()
        runner.close()
        upstream.stop()
