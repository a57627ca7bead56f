"""Fixtures: a loopback upstream and in-process exporters over it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from kvops.exporter.webconfig import WebConfig
from support.exporter_harness import Exporter
from support.upstream import Upstream


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    yield server
    server.stop()


@pytest.fixture
def make_exporter() -> Iterator[Callable[..., Exporter]]:
    made: list[Exporter] = []

    def make(targets: list[str], timeout: float = 5.0, web: WebConfig | None = None,
             max_body: int = 16 * 1024 * 1024) -> Exporter:  # fmt: skip
        exp = Exporter(targets, timeout, web, max_body)
        made.append(exp)
        return exp

    yield make
    for exp in made:
        exp.stop()
