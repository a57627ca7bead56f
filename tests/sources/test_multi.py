"""Many targets fetched together in one thread: concurrency, deadlines, close, re-entry."""

from __future__ import annotations

import threading
import time

import pytest

from kvops.scrape import runner as runner_module
from kvops.scrape.runner import ScrapeRunner
from kvops.scrape.target import TargetScraper
from kvops.snapshot import GpuSample
from kvops.transport.http import FetchError, HttpClient
from kvops.transport.multi import MultiFetcher
from support.upstream import Upstream, body, hang

PAGE = b'vllm:num_requests_running{model_name="m",engine="0"} 3\n'


def fetch_all(fetcher: MultiFetcher, jobs, deadline: float) -> list[tuple[object, float]]:
    """The round's outcomes in job order, checking each job ends once."""
    ended: dict[int, tuple[object, float]] = {}

    def done(index: int, outcome: object, seconds: float) -> None:
        assert index not in ended
        ended[index] = (outcome, seconds)

    fetcher.fetch(jobs, deadline, done)
    assert sorted(ended) == list(range(len(jobs)))
    return [ended[i] for i in range(len(jobs))]


def slow(seconds: float, data: bytes = PAGE):
    def handle(h):
        time.sleep(seconds)
        body(data)(h)

    return handle


def redirect(location: str):
    def handle(h):
        h.send_response(302)
        h.send_header("Location", location)
        h.send_header("Content-Length", "0")
        h.end_headers()

    return handle


def test_targets_are_fetched_at_once_and_answered_in_order(upstream: Upstream):
    urls = [upstream.route(f"t{i}", slow(0.5, f"page {i}\n".encode())) + "/metrics" for i in range(4)]
    clients = [HttpClient() for _ in urls]
    fetcher = MultiFetcher()
    began = time.monotonic()
    results = fetch_all(fetcher, list(zip(clients, urls, strict=True)), time.monotonic() + 5)
    took = time.monotonic() - began
    assert results is not None
    assert [text for text, _ in results] == [f"page {i}\n" for i in range(4)]
    assert took < 1.5, took  # together: about one delay, not four
    assert all(0.4 < seconds <= took for _, seconds in results)


def test_each_failure_is_its_own_and_redirects_stay_in_the_origin(upstream: Upstream):
    good = upstream.route("good", body(PAGE)) + "/metrics"
    moved = upstream.route("moved", redirect("/good/metrics")) + "/metrics"
    away = upstream.route("away", redirect("http://192.0.2.1/metrics")) + "/metrics"
    missing = upstream.route("missing", body("no\n", 503)) + "/metrics"
    refused = "http://127.0.0.1:1/metrics"
    jobs = [(HttpClient(), url) for url in (good, moved, away, missing, refused)]
    results = fetch_all(MultiFetcher(), jobs, time.monotonic() + 5)
    assert results is not None
    outcomes = [r for r, _ in results]
    assert outcomes[:2] == [PAGE.decode(), PAGE.decode()]
    assert isinstance(outcomes[2], FetchError) and "another host not followed" in str(outcomes[2])
    assert isinstance(outcomes[3], FetchError) and str(outcomes[3]) == "HTTP 503 Service Unavailable"
    assert isinstance(outcomes[4], FetchError) and "Connection refused" in str(outcomes[4])


def test_a_hung_target_ends_at_the_deadline_and_costs_only_itself(upstream: Upstream):
    hung = upstream.route("hung", hang(10)) + "/metrics"
    good = upstream.route("good", body(PAGE)) + "/metrics"
    began = time.monotonic()
    results = fetch_all(MultiFetcher(), [(HttpClient(), hung), (HttpClient(), good)], began + 1.0)
    took = time.monotonic() - began
    assert results is not None
    assert 0.9 < took < 1.6, took
    assert isinstance(results[0][0], FetchError) and "timed out" in str(results[0][0])
    assert results[1][0] == PAGE.decode()


def test_close_during_a_round_returns_at_once_and_ends_the_round(upstream: Upstream):
    hung = upstream.route("hung", hang(10)) + "/metrics"
    fetcher = MultiFetcher()
    client = HttpClient()
    done: list[object] = []
    thread = threading.Thread(
        target=lambda: done.append(fetch_all(fetcher, [(client, hung)], time.monotonic() + 8))
    )
    thread.start()
    time.sleep(0.3)
    began = time.monotonic()
    fetcher.close()
    client.close()  # deferred: the handle is on the multi handle until the round lets go
    assert time.monotonic() - began < 0.1
    thread.join(timeout=2)
    assert not thread.is_alive()
    [[(outcome, _)]] = done
    assert isinstance(outcome, FetchError)


def test_a_second_round_at_the_same_time_waits_for_the_first(upstream: Upstream):
    """The handle is not shared: a second caller (never the runner, which runs rounds in
    single flight) waits for the first round, then fetches."""
    url = upstream.route("slow", slow(0.6)) + "/metrics"
    fetcher = MultiFetcher()
    first = threading.Thread(target=fetch_all, args=(fetcher, [(HttpClient(), url)], time.monotonic() + 5))
    first.start()
    time.sleep(0.2)
    [(outcome, _)] = fetch_all(fetcher, [(HttpClient(), url)], time.monotonic() + 5)
    assert outcome == PAGE.decode()
    first.join()
    assert upstream.hits["/slow/metrics"] == 2


def test_overlapping_scrapes_of_a_runner_share_the_round_in_flight(upstream: Upstream):
    """Two Prometheus servers scraping one exporter at once: the second scrape joins the
    first one's round and serves its result; nothing is down, nothing fetched twice."""
    slow_url = upstream.route("slow", slow(0.8))
    fast_url = upstream.route("fast", body(PAGE))
    runner = ScrapeRunner([TargetScraper(slow_url), TargetScraper(fast_url)], [], timeout=5)
    try:
        first: list[object] = []
        thread = threading.Thread(target=lambda: first.append(runner.snapshot()))
        thread.start()
        time.sleep(0.3)
        second = runner.snapshot()
        thread.join()
        assert all(t.up for t in second.targets), [t.error for t in second.targets]
        assert all(t.up for t in first[0].targets)  # type: ignore[attr-defined]
        assert upstream.hits["/slow/metrics"] == 1 and upstream.hits["/fast/metrics"] == 1
        assert runner.rounds == 1
    finally:
        runner.close()


def test_a_scrape_that_cannot_wait_for_the_round_in_flight_times_out(upstream: Upstream):
    """A joining scrape keeps its own deadline: it says timed out, it does not start a fetch."""
    slow_url = upstream.route("slow", slow(1.0))
    runner = ScrapeRunner([TargetScraper(slow_url)], [], timeout=5)
    try:
        thread = threading.Thread(target=runner.snapshot)
        thread.start()
        time.sleep(0.2)
        began = time.monotonic()
        short = runner.snapshot(0.3)
        assert time.monotonic() - began < 0.6
        [target] = short.targets
        assert not target.up and target.error == "timed out after 0.3 s"
        thread.join()
        assert upstream.hits["/slow/metrics"] == 1
    finally:
        runner.close()


def test_rounds_within_min_interval_are_served_again(upstream: Upstream):
    """However many scrapers, upstream sees at most one round per min_interval."""
    url = upstream.route("fast", body(PAGE))
    runner = ScrapeRunner([TargetScraper(url)], [], timeout=5, min_interval=0.5)
    try:
        began = time.monotonic()
        while time.monotonic() - began < 1.2:
            assert runner.snapshot().targets[0].up
        # rounds at 0, 0.5 and 1.0 s; the one probe of a filtered page is not a round
        rounds = upstream.hits["/fast/metrics"] - upstream.filtered_hits.get("/fast/metrics", 0)
        assert rounds <= 3
        assert runner.rounds == rounds
    finally:
        runner.close()


def test_international_and_spaced_urls_are_fetched_as_ascii(upstream: Upstream):
    """A host in IDNA, a path percent-encoded (as urllib3 did); the handle is never left claimed."""
    upstream.routes["/caf%C3%A9%20bar/metrics"] = body(PAGE)
    client = HttpClient()
    assert client.fetch_text(f"{upstream.base}/café bar/metrics", time.monotonic() + 5) == PAGE.decode()
    results = fetch_all(MultiFetcher(), [(HttpClient(), "http://xn--bcher-kva.invalid/m"), (HttpClient(), "http://bücher.invalid/m")],
                        time.monotonic() + 5)  # fmt: skip
    for outcome, _ in results:
        assert isinstance(outcome, FetchError) and "xn--bcher-kva.invalid" in str(outcome)
    with pytest.raises(FetchError, match="not a valid international domain name"):
        client.fetch_text("http://" + "a" * 70 + "é.com/m", time.monotonic() + 5)
    assert client.fetch_text(f"{upstream.base}/café bar/metrics", time.monotonic() + 5) == PAGE.decode()


class HungCollector:
    """A hardware source whose driver call blocks until released (a hung NVML call)."""

    name = "hung"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def collect(self) -> list[GpuSample]:
        self.calls += 1
        self.release.wait(10)
        return []

    def close(self) -> None:
        self.release.set()


def test_a_hung_hardware_call_is_joined_by_later_rounds_not_called_again(upstream: Upstream):
    url = upstream.route("fast", body(PAGE))
    hung = HungCollector()
    runner = ScrapeRunner([TargetScraper(url)], [hung], timeout=0.3)
    try:
        for _ in range(4):
            snap = runner.snapshot()
            assert snap.targets[0].up  # the target is not held back by the hung source
            [status] = [c for c in snap.collectors if c.name == "hung"]
            assert not status.success and status.error == "timed out after 0.3 s"
        assert hung.calls == 1 and runner.rounds == 4
        hung.release.set()
        time.sleep(0.1)
        snap = runner.snapshot()
        [status] = [c for c in snap.collectors if c.name == "hung"]
        assert status.success and hung.calls == 2  # the hung call ended: the next round calls again
    finally:
        runner.close()


class StuckParse(TargetScraper):
    """A target whose large page's parse does not stop at the deadline until released (a parse
    between two looks at the clock on a machine that stalls): counts parses at once."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.release = threading.Event()
        self.calls = self.running = self.most = 0

    def finish(self, outcome, seconds, deadline):  # type: ignore[no-untyped-def]
        self.calls += 1
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            self.release.wait(10)
            return super().finish(outcome, seconds, time.monotonic() + 5)
        finally:
            self.running -= 1


def test_a_large_page_parse_that_outlives_its_round_holds_its_target_back(upstream: Upstream):
    """A page over PARSE_INLINE_CHARS is parsed in a worker; past the deadline the round shows
    the target down and goes on. Later rounds must not fetch and parse that target again
    while the first parse runs: two parses would write one TargetScraper's state at once."""
    from kvops.scrape.runner import PARSE_INLINE_CHARS
    from kvops.scrape.target import PARSE_OUT_OF_TIME, PARSE_STILL_RUNNING

    big = b"# padding\n" * (PARSE_INLINE_CHARS // 10 + 1) + PAGE
    stuck = StuckParse(upstream.route("big", body(big)))
    other = TargetScraper(upstream.route("small", body(PAGE)))
    runner = ScrapeRunner([stuck, other], [], timeout=0.3)
    try:
        first = runner.snapshot()
        assert [t.error for t in first.targets] == [PARSE_OUT_OF_TIME, None]
        for _ in range(2):
            snap = runner.snapshot()
            assert [t.error for t in snap.targets] == [PARSE_STILL_RUNNING, None]
        assert stuck.calls == 1 and stuck.most == 1
        stuck.release.set()
        time.sleep(0.2)  # the first parse ends
        snap = runner.snapshot()
        assert snap.targets[0].up and stuck.calls == 2 and stuck.most == 1
    finally:
        stuck.release.set()
        runner.close()


def test_meanwhile_runs_once_with_the_requests_out_and_no_answer_read(upstream: Upstream):
    """The round's own short work (host memory, process trees) runs while the targets write
    their pages: after the requests are sent, before any answer is handed back."""
    urls = [upstream.route(f"m{i}", slow(0.3, f"page {i}\n".encode())) + "/metrics" for i in range(3)]
    clients = [HttpClient() for _ in urls]
    fetcher = MultiFetcher()
    fetch_all(fetcher, list(zip(clients, urls, strict=True)), time.monotonic() + 5)  # connections up
    ended: list[int] = []
    seen: list[tuple[int, int]] = []  # (answers handed back, requests the server had) at each call

    def meanwhile() -> None:
        time.sleep(0.1)  # the server's handlers have the requests by now, if they were sent
        seen.append((len(ended), sum(upstream.hits.values())))

    before = sum(upstream.hits.values())
    fetcher.fetch(list(zip(clients, urls, strict=True)), time.monotonic() + 5,
                  lambda i, outcome, s: ended.append(i), meanwhile)  # fmt: skip
    assert sorted(ended) == [0, 1, 2]
    assert seen == [(0, before + 3)]  # once; every request out, no answer yet


def test_meanwhile_runs_once_without_jobs_and_when_the_fetch_fails():
    calls: list[str] = []
    fetcher = MultiFetcher()
    fetcher.fetch([], time.monotonic() + 1, lambda *a: None, lambda: calls.append("empty"))
    with pytest.raises(ZeroDivisionError):
        fetcher.fetch([(HttpClient(), "http://127.0.0.1:9/")], time.monotonic() + 1,
                      lambda *a: 1 / 0, lambda: calls.append("failed"))  # fmt: skip
    assert calls == ["empty", "failed"]


class ThreadNoting:
    """A collector (or, with `inline`, one that reads only procfs) noting the thread it ran on."""

    def __init__(self, name: str, inline: bool) -> None:
        self.name = name
        if inline:
            self.inline = True
        self.threads: list[int] = []

    def collect(self) -> list[GpuSample]:
        self.threads.append(threading.get_ident())
        return []

    def close(self) -> None:
        pass


class TrackerNoting:
    def __init__(self) -> None:
        self.threads: list[int] = []

    def collect(self, targets, gpus):  # type: ignore[no-untyped-def]
        self.threads.append(threading.get_ident())
        return []

    def attach_gpus(self, processes, gpus):  # type: ignore[no-untyped-def]
        pass

    def close(self) -> None:
        pass


@pytest.mark.parametrize("targets", [2, 3])
def test_procfs_sources_run_on_the_rounds_thread_driver_calls_on_workers(
    upstream: Upstream, targets: int, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(runner_module, "INLINE_PROCESS_TARGETS", 2)  # 65 loopback targets: slow
    reads, driver, tracker = (
        ThreadNoting("host", inline=True),
        ThreadNoting("gpu", inline=False),
        TrackerNoting(),
    )
    scrapers = [TargetScraper(upstream.route(f"t{i}", body(PAGE))) for i in range(targets)]
    runner = ScrapeRunner(scrapers, [reads, driver], timeout=5, process_tracker=tracker)  # type: ignore[list-item]
    try:
        snap = runner.snapshot()
    finally:
        runner.close()
    me = threading.get_ident()
    assert all(t.up for t in snap.targets)
    assert reads.threads == [me] and driver.threads != [me] and len(driver.threads) == 1
    # process trees: on this thread for a few targets; past INLINE_PROCESS_TARGETS on a worker
    assert (tracker.threads == [me]) == (targets <= 2) and len(tracker.threads) == 1
    statuses = {c.name: c.success for c in snap.collectors}
    assert statuses["host"] and statuses["gpu"]
