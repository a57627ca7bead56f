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


def _round(start: float, *targets: str):
    from kvops.snapshot import Snapshot, TargetSample

    return Snapshot(time=start, targets=[TargetSample(t, True) for t in targets])


def test_a_rounds_samples_are_dropped_once_its_exposition_is_written():
    """Freed while warm, not held to the next round; the round's later scrapes get its bytes."""
    import copy

    first = _round(1.0, "http://a:1", "http://b:1")
    served = [first]
    expositions = RoundExpositions(lambda _t: copy.copy(served[-1]))
    plain = expositions(1.0).plain
    assert b'target="http://b:1"' in plain
    assert first.targets == []  # dropped in place: the list, the round's name, stays
    assert expositions(1.0).plain == plain and expositions.encoded == 1


def test_a_late_scrape_of_an_earlier_round_never_gets_an_empty_page():
    """Round 1 written (its samples dropped), round 2 written; a scrape of round 1 that comes
    only now gets round 2's bytes, not a page without targets. A round-1 scrape whose samples
    are still there is written for itself and leaves round 2's bytes in place."""
    import copy

    one, two = _round(1.0, "http://a:1"), _round(2.0, "http://a:1", "http://b:1")
    late_one = copy.copy(one)  # a scrape handed round 1 before it was written
    asked = [copy.copy(one), copy.copy(two), late_one]
    expositions = RoundExpositions(lambda _t: asked.pop(0))
    expositions(1.0)
    newest = expositions(1.0).plain
    assert expositions(1.0).plain == newest and b'target="http://b:1"' in newest

    old = _round(1.5, "http://c:1")  # an older round not yet written: its own bytes
    asked[:] = [old, copy.copy(two)]
    assert b'target="http://c:1"' in expositions(1.0).plain
    assert old.targets  # not dropped: the newest round's bytes stay the ones kept
    assert expositions(1.0).plain == newest
