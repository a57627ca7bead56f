"""Several hung and trickling targets at once: the scrape still answers within Prometheus's budget.

Targets fetched one after another, each with its own full deadline, would take the sum of their
deadlines (3 hung targets and a 1.5 s scrape timeout: 3 s+), and Prometheus would drop the
whole exporter. They must share one deadline, taken from the scrape's timeout header.
"""

from __future__ import annotations

import time

import pytest

from support.exporter_harness import parse_exposition, value
from support.paths import VLLM_FIXTURES
from support.upstream import body, hang, trickle

GOOD = (VLLM_FIXTURES / "0.33.0" / "offload-t2.prom").read_bytes()
HEADER = 1.5  # X-Prometheus-Scrape-Timeout-Seconds


@pytest.mark.parametrize(("hung", "trickling"), [(3, 0), (0, 3), (3, 2)])
def test_slow_targets_share_the_header_budget(upstream, make_exporter, hung: int, trickling: int):
    good = upstream.route("good", body(GOOD))
    slow = [upstream.route(f"hang{i}", hang(30)) for i in range(hung)]
    slow += [
        upstream.route(f"trickle{i}", trickle(GOOD.decode(), byte_delay=0.05, total_seconds=30))
        for i in range(trickling)
    ]
    exp = make_exporter([*slow, good], timeout=5.0)  # the header, not --timeout, is the bound
    for _ in range(2):
        start = time.monotonic()
        resp = exp.scrape(headers={"X-Prometheus-Scrape-Timeout-Seconds": str(HEADER)})
        elapsed = time.monotonic() - start
        assert resp.status_code == 200
        assert elapsed < HEADER, f"{elapsed:.2f} s with {hung} hung and {trickling} trickling targets"
        s = parse_exposition(resp.text)
        assert value(s, "kvops_target_up", target=good) == 1.0
        assert value(s, "kvops_vllm_requests_running", target=good) == 97.0
        for url in slow:
            assert value(s, "kvops_target_up", target=url) == 0.0
