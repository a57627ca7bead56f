"""`kvops exporter` as shipped (a subprocess) under overlapping scrapes, floods and idle
connections (issue 17, items 3 and 4). Healthy targets must never be reported down."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest
import requests

from support.exporter_harness import parse_exposition
from support.upstream import Upstream, body

PAGE = b'vllm:num_requests_running{model_name="m",engine="0"} 3\n'

# Runs the CLI with an optional file-descriptor limit, as `ulimit -n` would.
_LAUNCH = """
import resource, sys
limit = int(sys.argv[1])
if limit:
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
from kvops.cli import main
sys.exit(main(sys.argv[2:]))
"""


class CountingTarget:
    """A healthy target that records how many of its fetches overlapped: from a request's
    arrival to the start of its answer. (Counted to the end of the answer, a handler thread
    descheduled after its write, under load with 50 scraper threads in this process, still
    counted when the exporter's next round, free to start once the answer came, arrived.)"""

    def __init__(self, delay: float = 0.02) -> None:
        self.delay = delay
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.fetches = 0

    def __call__(self, h: BaseHTTPRequestHandler) -> None:
        with self.lock:
            self.in_flight += 1
            self.fetches += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(self.delay)
        finally:
            with self.lock:
                self.in_flight -= 1
        body(PAGE)(h)


class ExporterProcess:
    def __init__(self, targets: list[str], nofile: int = 0) -> None:
        argv = [sys.executable, "-c", _LAUNCH, str(nofile), "exporter", "--listen", "127.0.0.1:0"]
        argv += ["--no-collector", "host", "--no-collector", "nvidia", "--no-collector", "amd"]
        for t in targets:
            argv += ["--target", t]
        self.proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
        self.log: list[str] = []
        found = threading.Event()
        self.url = ""

        def drain() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.log.append(line)
                match = re.search(r"serving (http://\S+/metrics)", line)
                if match:
                    self.url = match.group(1)
                    found.set()

        threading.Thread(target=drain, daemon=True).start()
        if not found.wait(30):
            self.stop()
            raise AssertionError("exporter did not start: " + "".join(self.log))

    def count(self, what: str) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/{what}"))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


@contextlib.contextmanager
def exporter(targets: list[str], nofile: int = 0) -> Iterator[ExporterProcess]:
    exp = ExporterProcess(targets, nofile)
    try:
        yield exp
    finally:
        exp.stop()


def down_samples(text: str) -> int:
    samples = parse_exposition(text)
    return sum(1 for (name, _), v in samples.items() if name == "kvops_target_up" and v == 0.0)


def scrape(url: str, timeout: float = 5.0) -> int:
    """The number of down targets in one scrape (the scrape itself must succeed)."""
    resp = requests.get(url, headers={"X-Prometheus-Scrape-Timeout-Seconds": str(timeout)}, timeout=timeout)
    assert resp.status_code == 200
    return down_samples(resp.text)


@pytest.fixture
def healthy(upstream: Upstream) -> tuple[list[str], list[CountingTarget]]:
    counters = [CountingTarget(), CountingTarget()]
    urls = [upstream.route(f"t{i}", c) for i, c in enumerate(counters)]
    return urls, counters


@pytest.mark.slow
@pytest.mark.parametrize("scrapers", [10, 50])
def test_overlapping_scrapes_of_healthy_targets_report_none_down(healthy, scrapers: int):
    urls, counters = healthy
    with exporter(urls) as exp:
        scrape(exp.url)
        for _ in range(3):
            barrier = threading.Barrier(scrapers)
            downs: list[int] = []

            def one(barrier: threading.Barrier, downs: list[int]) -> None:
                barrier.wait()
                downs.append(scrape(exp.url))

            threads = [threading.Thread(target=one, args=(barrier, downs)) for _ in range(scrapers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert len(downs) == scrapers and sum(downs) == 0, downs
            time.sleep(0.6)
    assert all(c.max_in_flight == 1 for c in counters), [c.max_in_flight for c in counters]


@pytest.mark.slow
def test_a_flood_of_four_clients_neither_hides_targets_nor_multiplies_fetches(healthy):
    """Four clients scraping as fast as they can for 20 s beside a 1/s scraper: the 1/s
    scraper never sees a target down; upstream sees one round at a time, at most one every
    0.5 s (the exporter's ROUND_REUSE_SECONDS)."""
    urls, counters = healthy
    duration = 20.0
    with exporter(urls) as exp:
        stop = threading.Event()
        flood_scrapes = [0]

        def flood() -> None:
            with requests.Session() as session:
                while not stop.is_set():
                    session.get(exp.url, timeout=10)
                    flood_scrapes[0] += 1

        clients = [threading.Thread(target=flood) for _ in range(4)]
        for c in clients:
            c.start()
        began = time.monotonic()
        downs = []
        while time.monotonic() - began < duration:
            tick = time.monotonic()
            downs.append(scrape(exp.url, timeout=1.0))
            time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
        stop.set()
        for c in clients:
            c.join()
        elapsed = time.monotonic() - began
    assert len(downs) >= 19 and sum(downs) == 0, downs
    assert flood_scrapes[0] > 100  # the flood really ran
    for c in counters:
        assert c.max_in_flight == 1
        assert c.fetches <= elapsed / 0.5 + 3, (c.fetches, elapsed)


@pytest.mark.slow
def test_a_thousand_idle_connections_under_a_1024_fd_limit(healthy):
    urls, _ = healthy
    with exporter(urls, nofile=1024) as exp:
        assert scrape(exp.url) == 0
        time.sleep(6.0)  # idle workers end (kvops.workers): the steady state
        fds0, threads0 = exp.count("fd"), exp.count("task")
        host, port = exp.url.split("//")[1].split("/")[0].rsplit(":", 1)
        idle = []
        for _ in range(1000):
            idle.append(socket.create_connection((host, int(port)), timeout=5))
        time.sleep(0.5)
        for _ in range(5):
            began = time.monotonic()
            assert scrape(exp.url, timeout=2.0) == 0
            assert time.monotonic() - began < 2.0
        assert exp.count("fd") <= 1024
        for sock in idle:
            sock.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (exp.count("fd") > fds0 or exp.count("task") > threads0):
            time.sleep(0.5)
        assert exp.count("fd") <= fds0, (exp.count("fd"), fds0)
        assert exp.count("task") <= threads0, (exp.count("task"), threads0)
        assert scrape(exp.url) == 0
        assert "Traceback" not in "".join(exp.log)
