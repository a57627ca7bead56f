"""`kvops top --prometheus` on real stores holding a fleet's history that nobody scrapes.

The same history goes into VictoriaMetrics and into Prometheus; `--once --json` must give the
same rows from both, equal to the fleet's truth, at once (no scrape to wait for), and
`--group-by` must equal the sums of the per-engine figures.
"""

from __future__ import annotations

import json
import shutil
import time

import pytest

from kvops.cli import main
from kvops.rates import SCHEMA_VERSION
from kvops.top.fleet import hits

from .stores import fleet, history_lines, loaded_stores

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("prometheus") is None, reason="prometheus not installed (.ci/run installs it)"
    ),
    pytest.mark.skipif(
        shutil.which("victoria-metrics") is None,
        reason="victoria-metrics not installed (.ci/run installs it)",
    ),
]

N = 40
STEP = 15.0
SAMPLES = 12


@pytest.fixture(scope="module")
def stores():
    engines = fleet(N)
    lines = history_lines(engines, SAMPLES, STEP, end=time.time() - 20)
    with loaded_stores(lines) as started:
        yield engines, started


def once(capsys, url: str, *extra: str) -> dict:
    start = time.monotonic()
    assert main(["top", "--once", "--json", "--prometheus", url, *extra]) == 0
    assert time.monotonic() - start < 10  # from stored history: no scrape to wait for
    return json.loads(capsys.readouterr().out)


def test_both_stores_give_every_engine_its_true_figures(stores, capsys):
    engines, started = stores
    truth = {(f"http://{e.instance}", e.model): e for e in engines}
    docs = {}
    for store in started:
        for _ in range(50):  # VictoriaMetrics makes imported samples searchable within a second
            doc = once(capsys, store.url)
            if len(doc["targets"]) == N:
                break
            time.sleep(0.2)
        docs[store.name] = doc
        assert doc["schema_version"] == SCHEMA_VERSION == 3
        assert len(doc["targets"]) == N  # every engine, no cut
        assert doc["interval_seconds"] == pytest.approx(2 * STEP)  # the window spans two scrapes
        for row in doc["targets"]:
            e = truth[(row["target"], row["model_name"])]
            assert row["up"] and row["engine"] == "0"
            assert row["local_hit_rate"] == pytest.approx(e.hits / e.queries)
            assert row["external_hit_rate"] == pytest.approx(e.ext_hits / e.ext_queries)
            assert row["store_bytes"] == pytest.approx(2 * e.store_bytes)
            assert row["store_bandwidth_bytes_per_second"] == pytest.approx(e.store_bytes / e.store_seconds)
            assert row["store_offered_bytes_per_second"] == pytest.approx(e.store_bytes / STEP)
            if e.load_bytes:
                assert row["load_bandwidth_bytes_per_second"] == pytest.approx(e.load_bytes / e.load_seconds)
            assert row["preemptions"] == pytest.approx(2 * e.preemptions)
            assert (row["requests_running"], row["requests_waiting"]) == (e.running, e.waiting)
    vm, prom = docs["victoria-metrics"], docs["prometheus"]
    assert [r["target"] for r in vm["targets"]] == [r["target"] for r in prom["targets"]]
    for a, b in zip(vm["targets"], prom["targets"], strict=True):
        assert a.keys() == b.keys()
        for k in a:
            assert a[k] == pytest.approx(b[k]) if isinstance(a[k], float) else a[k] == b[k], k


def test_group_by_model_equals_the_sums_of_the_engines(stores, capsys):
    _, started = stores
    for store in started:
        doc = once(capsys, store.url, "--group-by", "model")
        groups = {g["group"]: g for g in doc["groups"]}
        assert sum(g["engines"] for g in groups.values()) == N
        for model, g in groups.items():
            rows = [r for r in doc["targets"] if r["model_name"] == model]
            assert g["engines"] == len(rows)
            for tier in ("local", "external"):
                total_hits = sum(hits(r, tier) for r in rows)
                total_queries = sum(r[f"{tier}_queries"] for r in rows)
                assert g[f"{tier}_hit_rate"] == pytest.approx(total_hits / total_queries)
            assert g["store_bytes"] == pytest.approx(sum(r["store_bytes"] for r in rows))
            assert g["store_offered_bytes_per_second"] == pytest.approx(
                sum(r["store_offered_bytes_per_second"] for r in rows)
            )
            assert g["requests_waiting"] == sum(r["requests_waiting"] for r in rows)


def test_sort_filter_and_top_in_the_text_frame(stores, capsys):
    _, started = stores
    vm = started[0]
    assert main(["top", "--once", "--prometheus", vm.url, "--sort", "local-hit", "--top", "5",
                 "--filter", "Qwen"]) == 0  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out[1:] if line.startswith("http://")]
    assert len(rows) == 5 and all("Qwen/Qwen3-32B" in r for r in rows)
    rates = [float(r.split()[5]) for r in rows]  # after "50.0 %" of KV: LOCAL HIT "12.0 %"
    assert rates == sorted(rates)  # worst first
    qwen = sum(1 for i in range(N) if i % 3 == 1)
    assert f"… and {qwen - 5} more engine(s)" in "\n".join(out)


def test_the_live_view_fetches_the_rows_it_shows_and_the_fleet_as_sums(stores):
    """A page of 5 engines: their figures whole, the fleet's sums from the store, and far
    fewer bytes than every engine's series."""
    from kvops.frames.prometheus import PrometheusSource
    from kvops.top.board import Board

    engines, started = stores
    for store in started:
        full = PrometheusSource(store.url, timeout=10.0)
        paged = PrometheusSource(store.url, timeout=10.0)
        try:
            everything = full.next()
            paged.set_page(5)
            pair = paged.next()
            assert everything is not None and pair is not None
            shown = [t.target for t in pair[1].targets]
            assert shown == [f"http://{e.instance}" for e in sorted(engines, key=lambda e: e.instance)[:5]]
            assert paged.last_fleet is not None and paged.last_fleet[1] == N
            board = Board()
            board.update(pair[1], before=pair[0], fleet=paged.last_fleet)
            whole = Board()
            whole.update(everything[1], before=everything[0])
            assert len(board.rows) == 5 and board.fleet_engines == N
            for name in ("local_hits", "local_queries", "external_hits", "store_bytes", "load_bytes"):
                got = board.fleet.deltas[name].values()[-1]
                want = whole.fleet.deltas[name].values()[-1]
                assert got == pytest.approx(want, rel=1e-6), name
            assert paged.bytes_fetched < full.bytes_fetched / 2
            paged.set_page(5, "Qwen")  # the filter picks the page from the engine list
            pair = paged.next()
            assert pair is not None and all(e.model_name == "Qwen/Qwen3-32B" for e in pair[1].engines())
        finally:
            full.close()
            paged.close()
