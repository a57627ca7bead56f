"""Discovered targets come and go with the discovery; a failing discovery keeps the last known."""

from __future__ import annotations

from kvops.exporter.families import render
from kvops.scrape.runner import ScrapeRunner
from kvops.scrape.target import TargetScraper
from support.exporter_harness import parse_exposition
from support.paths import VLLM_FIXTURES
from support.upstream import body


class ListDiscovery:
    """Stands in for the Kubernetes API at the edge: answers what the test puts in `urls`."""

    name = "kubernetes"

    def __init__(self) -> None:
        self.urls: list[str] = []
        self.fail: str | None = None

    def targets(self) -> list[str]:
        if self.fail:
            raise RuntimeError(self.fail)
        return list(self.urls)


def _text(runner: ScrapeRunner) -> str:
    from prometheus_client.exposition import generate_latest

    class _R:
        def collect(self):
            return render(runner.snapshot())

    return generate_latest(_R()).decode()  # type: ignore[arg-type]


def _up(text: str) -> dict[str, float]:
    return {dict(k[1])["target"]: v for k, v in parse_exposition(text).items() if k[0] == "kvops_target_up"}


def test_discovered_targets_follow_the_discovery(upstream):
    data = (VLLM_FIXTURES / "0.33.0" / "offload-t1.prom").read_bytes()
    a, b, static = (upstream.route(n, body(data)) for n in ("a", "b", "static"))
    disc = ListDiscovery()
    runner = ScrapeRunner([TargetScraper(static)], [], timeout=2, discovery=disc)
    try:
        disc.urls = [a, b, static]  # the static one is not scraped twice
        assert _up(_text(runner)) == {static: 1.0, a: 1.0, b: 1.0}
        disc.urls = [b]
        text = _text(runner)
        assert _up(text) == {static: 1.0, b: 1.0}
        assert a not in text  # a target that disappears leaves no series
        disc.fail = "Unauthorized"
        text = _text(runner)
        assert _up(text) == {static: 1.0, b: 1.0}  # last known kept
        assert 'kvops_collector_success{collector="kubernetes"} 0.0' in text
        disc.fail = None
        disc.urls = ["not a url at all://"]
        assert _up(_text(runner)) == {static: 1.0}
    finally:
        runner.close()
