"""One-shot reads (`kvops top --once`, `kvops doctor --target`) fetch each page once per frame
and never send the filtered-page probe (kvops/scrape/page_filter.py): a loopback server
counts every GET, and the probe is the one with a `name[]` query.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler

import pytest

from kvops.cli import main
from kvops.doctor import live
from kvops.top.live_source import LiveSource
from support.paths import VLLM_FIXTURES
from support.upstream import Upstream, body

T1, T2 = VLLM_FIXTURES / "0.33.0" / "offload-t1.prom", VLLM_FIXTURES / "0.33.0" / "offload-t2.prom"
PATH = "/vllm/metrics"


@contextmanager
def vllm() -> Iterator[tuple[Upstream, str]]:
    """A vLLM 0.33 page, t1 for the first GET and t2 after it (so the interval has rates)."""
    upstream, lock, served = Upstream(), threading.Lock(), [0]

    def handle(h: BaseHTTPRequestHandler) -> None:
        with lock:
            served[0] += 1
            first = served[0] == 1
        body((T1 if first else T2).read_bytes())(h)

    try:
        yield upstream, upstream.route("vllm", handle)
    finally:
        upstream.stop()


def settled(upstream: Upstream, seconds: float = 1.0) -> tuple[int, int]:
    """(GETs, probes) once a probe, which runs on its own thread, has had time to arrive."""
    end = time.monotonic() + seconds
    while time.monotonic() < end and not upstream.filtered_hits:
        time.sleep(0.02)
    return upstream.hits.get(PATH, 0), upstream.filtered_hits.get(PATH, 0)


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_top_once_fetches_each_frame_once_and_never_probes(capsys, as_json):
    with vllm() as (upstream, url):
        argv = ["top", "--once", "--interval", "0.2", url, *(["--json"] if as_json else [])]
        assert main(argv) == 0
        assert settled(upstream) == (2, 0)  # two frames, one GET each, no probe
    assert "meta-llama/Llama-3.1-8B-Instruct" in capsys.readouterr().out


def test_doctor_target_fetches_each_page_once_and_never_probes(capsys, monkeypatch):
    monkeypatch.setattr(live, "INTERVAL_SECONDS", 0.2)  # the CLI's 10 s between its two reads
    with vllm() as (upstream, url):
        assert main(["doctor", "--target", url, "--json"]) == 0
        assert settled(upstream) == (2, 0)
    engines = json.loads(capsys.readouterr().out)["engines"]
    assert engines and engines[0]["external_hit_rate"] is not None  # the interval was read


def test_the_live_view_still_probes_after_two_whole_pages():
    """The same source kept running (the live view): the probe is asked for, once."""
    with vllm() as (upstream, url):
        source = LiveSource([url], timeout=2.0, hardware=False)
        try:
            source.next()
            source.next()
            assert settled(upstream, 5.0) == (3, 1)  # two pages, then the probe
        finally:
            source.close()
