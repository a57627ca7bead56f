"""Targets that restart, change vLLM version, add and drop engines, send 100 MB, or hang for
many scrapes: every scrape answers 200 in its bound, the failing part is marked, the rest is
intact, nothing goes negative, nothing leaks. (Refused, hung, trickling, garbage, 500,
invalid UTF-8 and 50 MB targets are covered in tests/exporter/test_faults.py.)"""

from __future__ import annotations

import itertools
import logging
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler

import psutil
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from kvops import rates
from kvops.sim.server import Sim
from kvops.top.live_source import LiveSource
from support.exporter_harness import Samples, parse_exposition, value
from support.paths import VLLM_FIXTURES
from support.prom import free_port
from support.upstream import body, hang, huge, trickle

GOOD = (VLLM_FIXTURES / "0.33.0" / "offload-t2.prom").read_bytes()
TIMEOUT = 1.0
BOUND = TIMEOUT + 1.0
# For the restart test, whose target is a `kvops sim` process: its render took 0.25-0.65 s of
# wall clock at load average 40 on 2 cores (measured), so a 1 s deadline timed a healthy
# target out. The deadline is not that test's subject (the faults below bound it to TIMEOUT).
SIM_PROCESS_TIMEOUT = 10.0


class Clock:
    """A settable clock for the simulator, so its counters are known to have grown."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class Swappable:
    """A route whose exposition is that of the simulator plugged in last (none: HTTP 503).

    The page is rendered when the simulator is plugged in, not per request: rendered per request
    it was this test process's work inside kvops's 1 s fetch deadline, and under load (average
    ~36 on 2 cores) a simulator's first render took longer, so a healthy target was timed out
    ("no response within 1.0 s") and these tests about content saw no engines. A real server
    renders on cores of its own; here it answers at once."""

    def __init__(self) -> None:
        self.page: bytes | None = None

    def plug(self, sim: Sim) -> None:
        self.page = sim.metrics()

    def __call__(self, h: BaseHTTPRequestHandler) -> None:
        page = self.page
        if page is None:
            body(b"starting\n", status=503)(h)
        else:
            body(page)(h)


def sim_at(version: str, seconds: float, **options: object) -> Sim:
    clock = Clock()
    sim = Sim(version, clock=clock, **options)  # type: ignore[arg-type]
    clock.t = seconds
    return sim


def raw_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """The target's own samples, read by prometheus_client (the independent reading)."""
    return [(s.name, s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples]


def series_of(s: Samples, target: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {k: v for k, v in s.items() if dict(k[1]).get("target") == target}


def engines_of(s: Samples, target: str) -> set[tuple[str, str]]:
    return {
        (dict(k[1])["model_name"], dict(k[1])["engine"])
        for k in series_of(s, target)
        if "engine" in dict(k[1])
    }


def assert_no_negative(s: Samples) -> None:
    negative = {k: v for k, v in s.items() if v < 0}
    assert not negative, negative


def assert_interval_sane(doc: dict) -> None:
    """No figure of a `kvops top` interval is negative; hit rates stay within [0, 1]."""
    for row in doc["targets"]:
        for key, v in row.items():
            if isinstance(v, float | int) and not isinstance(v, bool):
                assert v >= 0, (key, v, row["target"])
        for key in ("local_hit_rate", "external_hit_rate"):
            if row.get(key) is not None:
                assert row[key] <= 1.0, (key, row[key])


def timed_scrape(exp, bound: float = BOUND) -> Samples:
    start_t = time.monotonic()
    resp = exp.scrape()
    elapsed = time.monotonic() - start_t
    assert resp.status_code == 200
    assert elapsed < bound, f"scrape took {elapsed:.2f} s"
    s = parse_exposition(resp.text)
    assert_no_negative(s)
    return s


SIM_LEAD_S = 3.0  # the first simulator's running time before it is read: ~270k queries, 0.04 s: 4.5k


class SimProcess:
    """`kvops sim` as its own process: stopping it really closes every connection."""

    def __init__(self, port: int, dp: int = 2) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kvops.cli", "sim", "--listen", f"127.0.0.1:{port}",
             "--data-parallel-size", str(dp), "--rate", "20"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"kvops sim did not start: {self.proc.communicate()[1]!r}") from None
                time.sleep(0.05)

    def wait_for_queries(self, seconds: float = 30.0) -> None:
        """Until its prefix cache has counted queries (its counters have grown), read from its
        own page: a fixed sleep for it was too short under load."""
        deadline = time.monotonic() + seconds
        while True:
            page = requests.get(self.url + "/metrics", timeout=seconds).text
            counts = [
                f.samples
                for f in text_string_to_metric_families(page)
                if f.name == "vllm:prefix_cache_queries"
            ]
            if any(s.value > 0 for samples in counts for s in samples):
                return
            assert time.monotonic() < deadline, "kvops sim counted no prefix-cache query"
            time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.mark.slow  # two simulator processes
def test_target_restart_counters_back_to_zero(upstream, make_exporter):
    """A simulated vLLM process stops (refused), then a new one starts on the same port."""
    good = upstream.route("good", body(GOOD))
    port = free_port()
    before = SimProcess(port)
    target = before.url
    exp = make_exporter([good, target], timeout=SIM_PROCESS_TIMEOUT)
    top = LiveSource([target, good], timeout=SIM_PROCESS_TIMEOUT, hardware=False)
    bound = SIM_PROCESS_TIMEOUT + 1.0
    after = None
    try:
        before.wait_for_queries()
        # A simulator's counters are a function of its own running time, so the first one must
        # run well ahead of the second's first scrape, or both serve the same figure and the
        # reset cannot show (CI once read 4524 from each: both at their first step).
        time.sleep(SIM_LEAD_S)
        first = timed_scrape(exp, bound)
        top_first = top.next()
        old_queries = value(first, "kvops_prefix_cache_queries_tokens_total", target=target, engine="0",
                            tier="local")  # fmt: skip
        assert old_queries and old_queries > 0
        before.stop()

        down = timed_scrape(exp, bound)
        assert value(down, "kvops_target_up", target=target) == 0.0
        assert engines_of(down, target) == set()  # the down target leaves no engine series
        assert value(down, "kvops_target_up", target=good) == 1.0
        assert value(down, "kvops_vllm_requests_running", target=good) == 97.0
        top_down = top.next()

        after = SimProcess(port)
        restarted = timed_scrape(exp, bound)
        top_restarted = top.next()
    finally:
        top.close()
        before.stop()
        if after is not None:
            after.stop()
    assert value(restarted, "kvops_target_up", target=target) == 1.0
    new_queries = value(restarted, "kvops_prefix_cache_queries_tokens_total", target=target, engine="0",
                        tier="local")  # fmt: skip
    assert new_queries is not None and new_queries < old_queries  # the counter went back, as served
    assert engines_of(restarted, target) == {("meta-llama/Llama-3.1-8B-Instruct", "0"),
                                             ("meta-llama/Llama-3.1-8B-Instruct", "1")}  # fmt: skip
    # kvops top over the same restart: the down interval marks it, the restart counts from 0
    down_doc = rates.interval(top_first, top_down).to_json()
    assert [r["up"] for r in down_doc["targets"] if r["target"] == top.scrapers[0].target] == [False]
    assert_interval_sane(rates.interval(top_first, top_restarted).to_json())
    doc = rates.interval(top_down, top_restarted).to_json()
    assert_interval_sane(doc)
    rows = [r for r in doc["targets"] if r["target"] == top.scrapers[0].target]
    assert len(rows) == 2 and all(r["up"] for r in rows)


def test_counter_reset_between_two_top_samples_never_goes_negative(upstream):
    """The process restarts between two samples and is up in both: counters drop, top shows
    what was counted since the restart (as Prometheus's rate() does), not a negative rate."""
    route = Swappable()
    route.plug(sim_at("0.33.0", 120.0))
    url = upstream.route("v", route)
    top = LiveSource([url], timeout=TIMEOUT, hardware=False)
    try:
        first = top.next()
        route.plug(sim_at("0.33.0", 3.0))
        second = top.next()
    finally:
        top.close()
    (e1,), (e2,) = first.targets[0].engines, second.targets[0].engines
    assert e2.store_bytes is not None and e1.store_bytes is not None and e2.store_bytes < e1.store_bytes
    doc = rates.interval(first, second).to_json()
    assert_interval_sane(doc)
    (row,) = doc["targets"]
    assert row["store_bytes"] == e2.store_bytes  # counted from zero since the restart
    assert row["local_queries"] == e2.local_queries


# The flat transfer names (0.24+), the transfer_type names (0.16-0.23), none (before 0.16).
VERSIONS = ["0.11.2", "0.20.0", "0.33.0", "0.10.0", "0.24.0"]


def test_vllm_version_changes_between_scrapes(upstream, make_exporter):
    """The same URL serves another vLLM release on every scrape (an upgrade, a rollback):
    each scrape reports what that release exposes, counted once, and nothing stale."""
    route = Swappable()
    url = upstream.route("v", route)
    good = upstream.route("good", body(GOOD))
    exp = make_exporter([url, good], timeout=TIMEOUT)
    top = LiveSource([url], timeout=TIMEOUT, hardware=False)
    snaps = []
    try:
        for version in VERSIONS:
            route.plug(sim_at(version, 30.0))
            assert route.page is not None
            text = route.page.decode()  # what the exporter reads next
            s = timed_scrape(exp)
            route.plug(sim_at(version, 30.0))
            snaps.append(top.next())
            raw = raw_samples(text)
            assert value(s, "kvops_target_up", target=url) == 1.0, version
            assert value(s, "kvops_target_up", target=good) == 1.0
            usage = [v for n, _, v in raw if n in ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")]
            assert value(s, "kvops_vllm_kv_cache_usage_ratio", target=url, engine="0") == usage[0], version
            store = value(s, "kvops_offload_transfer_bytes_total", target=url, direction="store")
            flat = [v for n, _, v in raw if n == "vllm:kv_offload_store_bytes_total"]
            typed = [v for n, lb, v in raw if n == "vllm:kv_offload_total_bytes_total"
                     and lb.get("transfer_type") == "GPU_to_CPU"]  # fmt: skip
            if flat:
                assert store == flat[0], version  # 0.24+: the flat series, not flat + deprecated
            elif typed:
                assert store == typed[0], version
            else:
                assert store is None, version  # no offload metrics in this release: absent, not 0
    finally:
        top.close()
    for a, b in itertools.pairwise(snaps):
        assert_interval_sane(rates.interval(a, b).to_json())


def test_engines_added_and_dropped(upstream, make_exporter):
    """Data-parallel engines come and go (and the model changes): the exporter's series follow
    the exposition exactly; a dropped engine or model leaves no series behind."""
    route = Swappable()
    url = upstream.route("v", route)
    exp = make_exporter([url], timeout=TIMEOUT)
    top = LiveSource([url], timeout=TIMEOUT, hardware=False)
    model = "meta-llama/Llama-3.1-8B-Instruct"
    steps = [(1, model), (4, model), (2, model), (3, "Qwen/Qwen3-8B"), (1, model)]
    prev = None
    try:
        for dp, name in steps:
            route.plug(sim_at("0.33.0", 20.0, data_parallel_size=dp, model_name=name))
            s = timed_scrape(exp)
            assert engines_of(s, url) == {(name, str(i)) for i in range(dp)}, (dp, name)
            route.plug(sim_at("0.33.0", 20.0, data_parallel_size=dp, model_name=name))
            snap = top.next()
            if prev is not None:
                doc = rates.interval(prev, snap).to_json()
                assert_interval_sane(doc)
                assert {(r["model_name"], r["engine"]) for r in doc["targets"]} == {
                    (name, str(i)) for i in range(dp)
                }
            prev = snap
    finally:
        top.close()


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "streamed"])
def test_100_MB_body_is_refused_within_bounds(upstream, make_exporter, declared: bool):
    """A 100 MB body: the target is down, the scrape is quick, memory stays near the limit."""
    good = upstream.route("good", body(GOOD))
    big = upstream.route("big", huge(100 * 1024 * 1024, declare_length=declared))
    limit = 16 * 1024 * 1024
    exp = make_exporter([good, big], timeout=5.0, max_body=limit)
    me = psutil.Process()
    rss_before = me.memory_info().rss
    for _ in range(3):
        start_t = time.monotonic()
        resp = exp.scrape()
        assert resp.status_code == 200
        assert time.monotonic() - start_t < 5.0
        s = parse_exposition(resp.text)
        assert value(s, "kvops_target_up", target=big) == 0.0
        assert value(s, "kvops_target_up", target=good) == 1.0
        assert value(s, "kvops_vllm_requests_running", target=good) == 97.0
    # at most one body up to the limit is held at a time, never the 100 MB
    assert me.memory_info().rss - rss_before < 3 * limit


def client_sockets(ports: set[int]) -> int:
    """kvops's own sockets to the targets (the upstream's server-side ones are the test's)."""
    return sum(1 for c in psutil.Process().net_connections(kind="tcp") if c.raddr and c.raddr.port in ports)


@pytest.mark.slow  # ~6 s of scrapes against hung targets
def test_many_scrapes_of_faulty_targets_leak_no_threads_or_sockets(upstream, make_exporter):
    """Hung, trickling, refusing and flapping targets, scraped 25 times: the exporter's
    threads and open files come back to where they were."""
    flap_state = {"n": 0}

    def flapping(h: BaseHTTPRequestHandler) -> None:
        flap_state["n"] += 1
        if flap_state["n"] % 2:
            body(GOOD)(h)
        else:
            h.close_connection = True  # the connection drops with no response

    targets = [
        upstream.route("good", body(GOOD)),
        upstream.route("hang", hang(30)),
        upstream.route("trickle", trickle(GOOD.decode(), byte_delay=0.05, total_seconds=30)),
        upstream.route("flap", flapping),
        "http://127.0.0.1:9",  # discard port: nothing listens
    ]
    exp = make_exporter(targets, timeout=0.2)
    ports = {upstream.server_address[1], 9}
    for _ in range(3):
        exp.scrape()
    time.sleep(0.3)
    sockets0 = client_sockets(ports)
    for _ in range(25):
        s = timed_scrape(exp)
        assert value(s, "kvops_target_up", target=targets[0]) == 1.0
        assert value(s, "kvops_target_up", target=targets[1]) == 0.0
    time.sleep(0.5)  # the last fetches reach their deadline
    # at most one kept-alive connection per target; the hung and trickling ones were closed
    assert client_sockets(ports) <= max(sockets0, len(targets)), (sockets0, client_sockets(ports))
    kvops_threads = [t for t in threading.enumerate() if t.name.startswith("kvops-scrape")]
    busy = [t for t in kvops_threads if t.is_alive()]
    assert len(busy) <= 2 * len(targets), [t.name for t in busy]
    assert not any(t.client._busy for t in exp.runner.targets)  # no fetch still running


def test_kvops_top_once_with_faulty_targets(upstream, capsys):
    """`kvops top --once --json` over a good target and four bad ones: one frame, in time,
    each bad one marked down with its reason, the good one's figures intact."""
    import json

    from kvops.cli import main

    good = upstream.route("good", body(GOOD))
    bad = {
        upstream.route("hang", hang(30)): "timed out",
        upstream.route("garbage", body(b"<html>no</html>\n")): "no vllm: or lmcache: sample",
        upstream.route("utf8", body(b'vllm:num_requests_running{model_name="\xff"} 1\n')): "UTF-8",
        upstream.route("huge", huge(100 * 1024 * 1024, declare_length=True)): "over the limit",
    }
    kvops_log = logging.getLogger("kvops")
    level = kvops_log.level
    start_t = time.monotonic()
    try:
        code = main(["top", "--once", "--json", "--interval", "1", good, *bad])
    finally:
        kvops_log.setLevel(level)  # top quiets kvops's logs for its screen; not for later tests
    elapsed = time.monotonic() - start_t
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert elapsed < 6.0, f"{elapsed:.1f} s for two samples one second apart"
    rows = {r["target"]: r for r in doc["targets"]}
    for url, reason in bad.items():
        assert rows[url]["up"] is False and reason in rows[url]["error"], rows[url]
    assert rows[good]["up"] is True and rows[good]["requests_running"] == 97.0
    assert_interval_sane(doc)
