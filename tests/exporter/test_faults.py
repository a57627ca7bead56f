"""A down, slow or garbage target never fails the scrape nor delays it past its bound."""

from __future__ import annotations

import socket
import time

import pytest

from support.exporter_harness import parse_exposition, value
from support.paths import VLLM_FIXTURES
from support.upstream import body, hang, huge, trickle

GOOD = (VLLM_FIXTURES / "0.33.0" / "offload-t2.prom").read_bytes()
TIMEOUT = 1.0
BOUND = TIMEOUT + 1.0  # the scrape answers within the upstream timeout plus rendering


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # nothing listens there now: connection refused


FAULTS = {
    "refused": None,
    "hangs": hang(30),
    "trickles": trickle(GOOD.decode(), byte_delay=0.05, total_seconds=30),
    "garbage": body(b"<html>this is not an exposition</html>\n"),
    "http_500": body(b"vllm:num_requests_running 1\n", status=500),
    "invalid_utf8": body(b'vllm:num_requests_running{model_name="\xff\xfe"} 1\n'),
    "50MB_declared": huge(50 * 1024 * 1024, declare_length=True),
    "50MB_streamed": huge(50 * 1024 * 1024, declare_length=False),
    "empty": body(b""),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_faulty_target_is_down_and_the_good_one_intact(upstream, make_exporter, fault: str):
    good = upstream.route("good", body(GOOD))
    bad = closed_port_url() if FAULTS[fault] is None else upstream.route("bad", FAULTS[fault])
    exp = make_exporter([good, bad], timeout=TIMEOUT)
    for _ in range(2):  # twice: a fault must not poison the next scrape either
        start = time.monotonic()
        resp = exp.scrape()
        elapsed = time.monotonic() - start
        assert resp.status_code == 200
        assert elapsed < BOUND, f"scrape took {elapsed:.2f} s"
        s = parse_exposition(resp.text)
        assert value(s, "kvops_target_up", target=bad) == 0.0
        assert value(s, "kvops_target_up", target=good) == 1.0
        assert value(s, "kvops_vllm_requests_running", target=good) == 97.0
        assert value(s, "kvops_collector_success", collector="vllm") == 0.0
        assert not [k for k in s if dict(k[1]).get("target") == bad and k[0] != "kvops_target_up"
                    and k[0] != "kvops_target_scrape_duration_seconds"]  # fmt: skip


def test_prometheus_scrape_timeout_header_caps_the_upstream_timeout(upstream, make_exporter):
    slow = upstream.route("slow", hang(30))
    exp = make_exporter([slow], timeout=5.0)
    start = time.monotonic()
    resp = exp.scrape(headers={"X-Prometheus-Scrape-Timeout-Seconds": "1.5"})
    elapsed = time.monotonic() - start
    assert resp.status_code == 200
    assert elapsed < 1.5, f"{elapsed:.2f} s: the answer must come before Prometheus gives up"


@pytest.mark.parametrize("fault", ["hangs", "trickles"])
def test_a_slow_fetch_ends_with_its_deadline_instead_of_piling_up(upstream, make_exporter, fault):
    slow = upstream.route("slow", FAULTS[fault])
    exp = make_exporter([slow], timeout=0.3)
    (scraper,) = exp.runner.targets
    for _ in range(3):
        assert exp.scrape().status_code == 200
        time.sleep(0.3)
        # the fetch thread gave up at the deadline: nothing of kvops's is still reading
        assert not scraper.client._busy
    assert upstream.hits == {"/slow/metrics": 3}


def test_body_limit_is_configurable(upstream, make_exporter):
    url = upstream.route("v", body(GOOD))
    exp = make_exporter([url], max_body=len(GOOD) - 1)
    assert value(exp.samples(), "kvops_target_up", target=url) == 0.0
    exp2 = make_exporter([url], max_body=len(GOOD))
    assert value(exp2.samples(), "kvops_target_up", target=url) == 1.0


def test_redirect_to_another_host_is_not_followed(upstream, make_exporter):
    def redirect(h):
        h.send_response(302)
        h.send_header("Location", "http://127.0.0.2:1/metrics")
        h.send_header("Content-Length", "0")
        h.end_headers()

    url = upstream.route("r", redirect)
    exp = make_exporter([url])
    assert value(exp.samples(), "kvops_target_up", target=url) == 0.0


def test_redirect_within_the_same_origin_is_followed(upstream, make_exporter):
    upstream.route("real", body(GOOD))

    def redirect(h):
        h.send_response(301)
        h.send_header("Location", "/real/metrics")
        h.send_header("Content-Length", "0")
        h.end_headers()

    url = upstream.route("moved", redirect)
    exp = make_exporter([url])
    assert value(exp.samples(), "kvops_target_up", target=url) == 1.0
