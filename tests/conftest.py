"""Test fixtures used across folders: the vLLM expositions, upstream servers, exporters, PKI."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kvops.exporter.webconfig import WebConfig
from support.exporter_harness import Exporter
from support.paths import RESEARCH, VLLM_FIXTURES
from support.pki import make_pki
from support.upstream import Upstream


@pytest.fixture(scope="session")
def vllm_fixtures() -> Path:
    """tests/fixtures/vllm: expositions written by vLLM's own metrics code (README inside)."""
    return VLLM_FIXTURES


@pytest.fixture(scope="session")
def research_dir() -> Path:
    """docs/research: the sourced facts (failure catalog, metric names by release)."""
    return RESEARCH


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    """A loopback target server; tests route behaviours to /<name>/metrics."""
    server = Upstream()
    yield server
    server.stop()


@pytest.fixture
def make_exporter() -> Iterator[Callable[..., Exporter]]:
    """Start in-process exporters over given targets; all are stopped after the test."""
    made: list[Exporter] = []

    def make(targets: list[str], timeout: float = 5.0, web: WebConfig | None = None,
             max_body: int = 16 * 1024 * 1024) -> Exporter:  # fmt: skip
        exp = Exporter(targets, timeout, web, max_body)
        made.append(exp)
        return exp

    yield make
    for exp in made:
        exp.stop()


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ca.crt, other-ca.crt, and server/client certificates for 127.0.0.1 (support/pki.py)."""
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(autouse=True)
def _restore_kvops_log_level() -> Iterator[None]:
    """`kvops top` quiets the kvops loggers for the whole process (a TUI owns the terminal);
    in-process top tests must not silence the log assertions of the tests after them."""

    def kvops_loggers() -> dict[str, int]:
        names = ["kvops", *(n for n in logging.root.manager.loggerDict if n.startswith("kvops."))]
        return {n: logging.getLogger(n).level for n in names}

    levels = kvops_loggers()
    yield
    for name in kvops_loggers():
        logging.getLogger(name).setLevel(levels.get(name, logging.NOTSET))
