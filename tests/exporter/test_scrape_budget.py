"""Several hung and trickling targets at once: the scrape still answers within Prometheus's budget.

Targets fetched one after another, each with its own full deadline, would take the sum of their
deadlines (3 hung targets and a 1.5 s scrape timeout: 3 s+), and Prometheus would drop the
whole exporter. They must share one deadline, taken from the scrape's timeout header.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kvops.engines.registry import WANTED
from kvops.exposition.parser import parse
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


def _explosion(series: int) -> bytes:
    """One family kvops reads with `series` label sets: under --max-samples-per-target (50,000)
    and --max-body-bytes (16 MiB), so only the deadline can stop it."""
    lines = ["# TYPE vllm:num_requests_running gauge"]
    lines += [
        f'vllm:num_requests_running{{model_name="org/m-{i:07d}",engine="{i % 8}"}} 1' for i in range(series)
    ]
    return ("\n".join(lines) + "\n").encode()


def _rss_mb(field: str) -> float:
    status = Path("/proc/self/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith(field + ":"))) / 1024


def test_a_page_whose_parse_does_not_fit_is_abandoned_and_the_others_answered(upstream, make_exporter):
    """Issue 25 item 2: 45,000 label sets beside a good target made a 2 s scrape answer after
    2.8-5.6 s (parse, engines, families and encoding of all of them), memory 38 -> 300 MB."""
    exploded = upstream.route("exploded", body(_explosion(45_000)))
    good = upstream.route("good", body(GOOD))
    exp = make_exporter([exploded, good], timeout=5.0)
    baseline = _rss_mb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here on
    for _ in range(3):
        start = time.monotonic()
        resp = exp.scrape(headers={"X-Prometheus-Scrape-Timeout-Seconds": "2"})
        elapsed = time.monotonic() - start
        assert resp.status_code == 200
        assert elapsed < 2.0, f"{elapsed:.2f} s: Prometheus gives up at 2 s, and loses every target"
        s = parse_exposition(resp.text)
        assert value(s, "kvops_target_up", target=good) == 1.0
        assert value(s, "kvops_vllm_requests_running", target=good) == 97.0
        assert value(s, "kvops_target_up", target=exploded) == 0.0
    grown = _rss_mb("VmHWM") - baseline
    assert grown < 100, f"peak memory grew {grown:.0f} MB"
    cut, kept = exp.runner.snapshot(1.5).targets  # the reason, as the log and kvops top say it
    assert not cut.up and cut.error == "parse exceeded the scrape deadline"
    assert kept.up


@pytest.mark.parametrize("indent", ["", " "])  # " ": the line-by-line reader
def test_a_parse_stops_at_its_deadline_on_both_readers(indent: str):
    page = indent + _explosion(45_000).decode()
    late = parse(page, WANTED, deadline=time.monotonic(), max_samples=50_000)
    assert late.out_of_time and len(late.get("vllm:num_requests_running")) < 45_000
    # work_after: the caller's work after the parse counts against the deadline too.
    start = time.monotonic()
    whole = parse(page, WANTED, deadline=start + 60, max_samples=50_000)
    took = time.monotonic() - start
    assert not whole.out_of_time and len(whole.get("vllm:num_requests_running")) == 45_000
    assert parse(page, WANTED, deadline=time.monotonic() + 3 * took, work_after=50.0).out_of_time
