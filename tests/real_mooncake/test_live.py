"""kvops against a REAL Mooncake store: `mooncake_master` from PyPI's mooncake-transfer-engine
and the wheel's own client over TCP (docs/real-mooncake.md).

The truth is the client's own account of the traffic it drove (each put's return code, the
bytes each get returned), never the master's page. `kvops top --once --json` reads the live
master through a gate: its first page passes, the traffic runs, then its second page passes, so
the interval holds exactly that traffic. The exporter is read after the traffic, against the
whole account since the master started.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from support.exporter_harness import value
from support.real_mooncake import traffic
from support.real_mooncake.store import Account, Plan, RealMooncake

pytestmark = [pytest.mark.real_mooncake, pytest.mark.timeout(180)]
STORE = {"model_name": "", "engine": "0", "engine_kind": "mooncake"}


class GatedProxy:
    """Forwards GETs to the master; the first passes at once (and sets `first`), every later one
    waits for `release`: kvops's two samples bracket exactly the traffic run in between."""

    def __init__(self, upstream: str) -> None:
        self.first, self.release = threading.Event(), threading.Event()
        self.paths: list[str] = []
        self.pages: list[str] = []  # the pages kvops read, as the master wrote them
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if proxy.first.is_set():
                    proxy.release.wait(60)
                try:
                    with urllib.request.urlopen(upstream + self.path, timeout=30) as resp:
                        status, body = resp.status, resp.read()
                except urllib.error.HTTPError as exc:
                    status, body = exc.code, exc.read()
                proxy.paths.append(self.path)
                proxy.pages.append(body.decode(errors="replace"))
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                proxy.first.set()

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/metrics"

    def stop(self) -> None:
        self.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def proxy(mooncake: RealMooncake) -> Iterator[GatedProxy]:
    gate = GatedProxy(mooncake.metrics_url.removesuffix("/metrics"))
    yield gate
    gate.stop()


def top_once_around(proxy: GatedProxy, run: object) -> tuple[dict, Account]:
    """`kvops top --once --json` against the live master, `run()` between its two samples."""
    top = subprocess.Popen(
        [sys.executable, "-m", "kvops.cli", "top", "--once", "--json", "--interval", "1", proxy.url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proxy.first.wait(60), "kvops top never read the master"
        account = run()  # type: ignore[operator]
        proxy.release.set()
        out, err = top.communicate(timeout=60)
    finally:
        if top.poll() is None:
            top.kill()
            top.wait()
    assert top.returncode == 0, err
    assert isinstance(account, Account)
    return json.loads(out), account


def sample(page: str, name: str) -> float:
    """An unlabelled sample of the master's own page (read here without kvops)."""
    return next(float(line.split()[1]) for line in page.splitlines() if line.startswith(name + " "))


def store_row(doc: dict, url: str) -> dict:
    (row,) = doc["targets"]
    assert row["target"] == url and row["up"] is True and row["engine_kind"] == "mooncake"
    assert list(row["tiers"]) == ["storage"]  # the store's own row: no engine tier beside it
    return dict(row)


def test_top_shows_the_live_store_exactly_as_the_client_drove_it(
    mooncake: RealMooncake, proxy: GatedProxy
) -> None:
    first_plan, second_plan = traffic.healthy()
    client = mooncake.client(traffic.HEALTHY_SEGMENT)
    first = client.run(first_plan)
    assert first.puts_failed == 0 and first.hits == 10
    doc, second = top_once_around(proxy, lambda: client.run(second_plan))
    tier = store_row(doc, proxy.url)["tiers"]["storage"]
    store = tier["store"]
    # over the interval: the second phase, as the client saw it
    assert second.gets == 30 and second.hits == 24 and second.puts_failed == 0  # the traffic meant
    assert store["lookups"] == second.gets
    assert store["hits"] == second.hits == store["hits_by_medium"]["memory"]
    assert tier["hit_rate"] == second.hits / second.gets
    assert tier["load_bytes"] == second.bytes_served == store["hit_bytes_by_medium"]["memory"]
    assert store["puts"] == len(second.puts_ok)
    assert store["put_failures"] == 0 and store["get_failures"] == second.gets - second.hits
    assert store["puts_abandoned"] == 0
    # at its end: everything stored is still there (no eviction with room to spare)
    stored = first.puts_ok + second.puts_ok
    assert tier["used_bytes"] == sum(int(str(s["size"])) for s in stored)
    assert tier["capacity_bytes"] == traffic.HEALTHY_SEGMENT
    assert tier["usage_ratio"] == tier["used_bytes"] / traffic.HEALTHY_SEGMENT
    assert store["keys"] == len(stored) and store["active_clients"] == 1
    assert store["evictions"] == 0 and store["evicted_keys"] == 0
    (segment,) = store["segments"].values()
    assert segment == {"allocated_bytes": tier["used_bytes"], "capacity_bytes": traffic.HEALTHY_SEGMENT}


def test_top_shows_a_full_store_refusing_puts_and_evicting(mooncake: RealMooncake, proxy: GatedProxy) -> None:
    first_plan, second_plan = traffic.full()
    client = mooncake.client(traffic.FULL_SEGMENT)
    first = client.run(first_plan)
    doc, second = top_once_around(proxy, lambda: client.run(second_plan))
    tier = store_row(doc, proxy.url)["tiers"]["storage"]
    store = tier["store"]
    assert second.puts_failed > 0  # the segment is smaller than what was put
    assert store["puts"] == len(second.puts_ok)
    assert store["put_failures"] == store["put_no_space_failures"] == second.puts_failed
    assert store["puts_abandoned"] == 0  # refused at the start: nothing was written, nothing revoked
    assert store["lookups"] == second.gets and store["hits"] == second.hits
    assert tier["load_bytes"] == second.bytes_served
    # The master evicts on a thread of its own, whenever its pass finds an object whose lease ran
    # out: whether that happens between kvops's two samples is the master's timing, not kvops's.
    # What kvops must show is what the master counted on the two pages kvops read.
    start, end = proxy.pages[0], proxy.pages[-1]
    for figure, family in (("evictions", "master_successful_evictions_total"),
                           ("evicted_keys", "master_evicted_key_count"),
                           ("evicted_bytes", "master_evicted_size_bytes")):  # fmt: skip
        assert store[figure] == sample(end, family) - sample(start, family), figure
    # what is left is what was stored less what the master evicted, as its own page says
    stored = first.puts_ok + second.puts_ok
    assert (
        store["keys"]
        == len(stored) - sample(end, "master_evicted_key_count")
        == sample(end, "master_key_count")
    )
    assert tier["used_bytes"] == sum(int(str(s["size"])) for s in stored) - sample(
        end, "master_evicted_size_bytes"
    )
    assert tier["capacity_bytes"] == traffic.FULL_SEGMENT


def test_the_exporter_carries_every_figure_of_the_live_store(mooncake: RealMooncake, make_exporter) -> None:
    first_plan, second_plan = traffic.healthy()
    client = mooncake.client(traffic.HEALTHY_SEGMENT)
    first, second = client.run(first_plan), client.run(second_plan)
    kvops = make_exporter([mooncake.metrics_url], timeout=10.0).samples()
    me = {"target": mooncake.metrics_url, **STORE}

    def k(name: str, **labels: str) -> float | None:
        return value(kvops, name, **me, **labels)

    assert value(kvops, "kvops_target_up", target=mooncake.metrics_url) == 1.0
    stored = first.puts_ok + second.puts_ok
    gets, hits = first.gets + second.gets, first.hits + second.hits
    assert k("kvops_kv_store_lookups_total") == gets
    assert k("kvops_kv_store_lookup_hits_total") == hits == k("kvops_kv_store_hits_total", medium="memory")
    assert k("kvops_kv_store_hits_total", medium="file") == 0
    served = first.bytes_served + second.bytes_served
    assert k("kvops_kv_store_hit_bytes_total", medium="memory") == served
    assert k("kvops_kv_store_puts_total") == k("kvops_kv_store_put_starts_total") == len(stored)
    assert k("kvops_kv_store_put_failures_total") == 0 == k("kvops_kv_store_put_no_space_failures_total")
    assert k("kvops_kv_store_get_failures_total") == gets - hits
    used = sum(int(str(s["size"])) for s in stored)
    assert k("kvops_kv_store_allocated_bytes", medium="memory") == used
    assert k("kvops_kv_store_capacity_bytes", medium="memory") == traffic.HEALTHY_SEGMENT
    assert k("kvops_kv_store_capacity_bytes", medium="file") == 0
    segments = [(ls, v) for (n, ls), v in kvops.items() if n == "kvops_kv_store_segment_allocated_bytes"]
    assert [v for _, v in segments] == [used]
    assert k("kvops_kv_store_keys") == len(stored) == k("kvops_kv_store_cached_values", medium="memory")
    assert k("kvops_kv_store_active_clients") == 1
    assert k("kvops_kv_store_evictions_total") == 0 and k("kvops_kv_store_evicted_keys_total") == 0


def test_a_put_of_a_key_already_held_is_a_failed_start_the_client_never_sees(
    mooncake: RealMooncake, make_exporter
) -> None:
    """Why put_failures is not the alert's figure (docs/tiers.md): the client is told the second
    put succeeded, the master counts its PutStart as failed; nothing was lost or abandoned."""
    client = mooncake.client(traffic.FULL_SEGMENT)
    account = client.run(Plan().put("k", 4096).put("k", 4096).get("k"))
    assert account.results == [0, 0, 4096]
    kvops = make_exporter([mooncake.metrics_url], timeout=10.0).samples()
    me = {"target": mooncake.metrics_url, **STORE}
    assert value(kvops, "kvops_kv_store_put_starts_total", **me) == 2
    assert value(kvops, "kvops_kv_store_puts_total", **me) == 1
    assert value(kvops, "kvops_kv_store_put_failures_total", **me) == 1
    assert value(kvops, "kvops_kv_store_put_no_space_failures_total", **me) == 0
    assert value(kvops, "kvops_kv_store_puts_abandoned_total", **me) == 0
    assert value(kvops, "kvops_kv_store_keys", **me) == 1
