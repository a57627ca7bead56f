"""Scrapes that share a scrape round share its encoded exposition (kvops/exporter/round_exposition.py)."""

from __future__ import annotations

import gzip
import time

import pytest
import requests

from kvops.exporter.round_exposition import RoundExpositions
from kvops.exporter.server import ExporterServer
from kvops.scrape.runner import ScrapeRunner
from kvops.scrape.target import TargetScraper
from support.paths import FIXTURES
from support.upstream import Upstream, body

PAGE = (FIXTURES / "vllm" / "0.33.0" / "offload-t1.prom").read_text()


def whole_pages(upstream: Upstream) -> int:
    """Rounds' fetches of the page, without the page-filter probe's `?name[]=` requests."""
    return upstream.hits["/a/metrics"] - upstream.filtered_hits.get("/a/metrics", 0)


@pytest.fixture
def exporter(request):
    # A round is shared for min_interval seconds from its start: long for the test of sharing
    # (a loaded machine must not start a second round), short for the test of the next round.
    upstream = Upstream()
    url = upstream.route("a", body(PAGE))
    runner = ScrapeRunner([TargetScraper(url)], [], timeout=5, min_interval=request.param)
    expositions = RoundExpositions(runner.snapshot)
    server = ExporterServer(("127.0.0.1", 0), expositions, None)
    server.serve_in_thread()
    yield upstream, expositions, server.url + "/metrics"
    server.shutdown()
    server.server_close()
    runner.close()
    upstream.stop()


@pytest.mark.parametrize("exporter", [60.0], indirect=True)
def test_scrapes_in_one_round_get_the_bytes_encoded_once(exporter):
    upstream, expositions, url = exporter
    plain = requests.get(url, headers={"Accept-Encoding": "identity"}, timeout=10)
    zipped = requests.get(url, headers={"Accept-Encoding": "gzip"}, timeout=10, stream=True)
    raw = zipped.raw.read()
    assert plain.status_code == zipped.status_code == 200
    assert zipped.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(raw) == plain.content  # the same round, the same bytes
    assert b'kvops_target_up{target="' in plain.content
    assert whole_pages(upstream) == 1
    assert expositions.encoded == 1


@pytest.mark.parametrize("exporter", [0.5], indirect=True)
def test_the_next_round_is_encoded_afresh(exporter):
    upstream, expositions, url = exporter
    first = requests.get(url, timeout=10).text
    time.sleep(0.6)  # past min_interval (0.5 s): a new round, with the page served again
    upstream.routes["/a/metrics"] = body(PAGE.replace('engine="0",model_name=', 'engine="1",model_name='))
    second = requests.get(url, timeout=10).text
    assert whole_pages(upstream) == 2
    assert expositions.encoded == 2
    assert first != second


def test_after_first_runs_once_after_the_first_exposition_only():
    from kvops.snapshot import Snapshot, TargetSample

    calls: list[int] = []
    failing = [True]

    def snapshot(_timeout):
        if failing[0]:
            failing[0] = False
            raise RuntimeError("first round broke")
        return Snapshot(time=0, targets=[TargetSample("http://h:1", False, error="refused")])

    expositions = RoundExpositions(snapshot, after_first=lambda: calls.append(expositions.encoded))
    with pytest.raises(RuntimeError):
        expositions(1.0)
    assert calls == []
    for _ in range(3):
        assert b"kvops_target_up" in expositions(1.0).plain
    assert calls == [1]


def test_the_exporter_settles_the_garbage_collector_after_its_first_exposition():
    """`kvops exporter` freezes its start-up objects out of the collector (kvops.gcsettle) once
    it has served its first exposition, not before."""
    import subprocess
    import sys

    script = """
import gc, os, threading, urllib.request
from kvops.exporter import server
urls = []
serve = server.ExporterServer.serve_in_thread
def serving(self):
    serve(self)
    urls.append(self.url)
server.ExporterServer.serve_in_thread = serving
def scrape():
    while not urls:
        threading.Event().wait(0.05)
    before = gc.get_freeze_count()
    urllib.request.urlopen(urls[0] + "/metrics", timeout=30).read()
    print(before, gc.get_freeze_count() > 0, flush=True)
    os._exit(0)
threading.Thread(target=scrape, daemon=True).start()
from kvops.cli import main
main(["exporter", "--listen", "127.0.0.1:0", "--no-collector", "nvidia", "--no-collector", "amd"])
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.stdout.split() == ["0", "True"], (proc.stdout, proc.stderr[-2000:])
