"""Helpers to run an in-process exporter over loopback targets and read what it serves."""

from __future__ import annotations

import requests
from prometheus_client.parser import text_string_to_metric_families

from kvops.exporter.families import render
from kvops.exporter.server import ExporterServer
from kvops.exporter.webconfig import WebConfig
from kvops.scrape.runner import ScrapeRunner
from kvops.scrape.target import TargetScraper
from kvops.transport.http import FetchOptions

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse_exposition(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    want = tuple(sorted(labels.items()))
    found = [v for (n, ls), v in samples.items() if n == name and all(item in ls for item in want)]
    assert len(found) <= 1, f"{name}{labels} matches {len(found)} series"
    return found[0] if found else None


class Exporter:
    def __init__(self, targets: list[str], timeout: float, web: WebConfig | None, max_body: int) -> None:
        options = FetchOptions(max_body_bytes=max_body)
        self.runner = ScrapeRunner([TargetScraper(t, options) for t in targets], [], timeout=timeout)
        self.server = ExporterServer(("127.0.0.1", 0), lambda t: render(self.runner.snapshot(t)), web)
        self.server.serve_in_thread()
        self.url = self.server.url + "/metrics"

    def scrape(self, **kwargs) -> requests.Response:
        return requests.get(self.url, timeout=30, **kwargs)

    def samples(self, **kwargs) -> Samples:
        resp = self.scrape(**kwargs)
        assert resp.status_code == 200, resp.text
        return parse_exposition(resp.text)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.runner.close()
