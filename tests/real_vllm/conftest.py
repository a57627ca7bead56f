"""Fixtures for the tests against a real vLLM 0.32.0 (marker real_vllm; docs/dev/real-vllm-harness.md).

The venv is installed before the first test runs (pytest_collection_finish: no per-test timeout
applies there); CI runs the installer as its own step first. One server per mode for the whole
session, stopped with its process group when the session ends, also after a failure or Ctrl-C.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.real_vllm import install
from support.real_vllm.server import RealVllm, group_alive

Truth = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(item.get_closest_marker("real_vllm") for item in session.items) and not install.is_ready():
        install.install()  # says what it downloads; minutes the first time


@pytest.fixture(scope="session")
def real_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], RealVllm]]:
    """mode -> a running server in that mode, started on first use and kept for the session."""
    logs = tmp_path_factory.mktemp("vllm-logs")
    running: dict[str, RealVllm] = {}

    def get(mode: str) -> RealVllm:
        if mode not in running:
            server = RealVllm(mode, logs)
            server.wait_ready()
            running[mode] = server
        return running[mode]

    try:
        yield get
    finally:
        for server in running.values():
            server.stop()
        left = [s.pgid for s in running.values() if group_alive(s.pgid)]
        assert not left, f"vLLM process groups still alive after stop: {left}"


def page(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return resp.read().decode()


def parse(text: str) -> Truth:
    """The page's samples read with prometheus_client's parser (never kvops's)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def counters(truth: Truth) -> Truth:
    """What a scrape cannot change on an idle server: vllm:* samples but the clock-like ones."""
    return {k: v for k, v in truth.items() if k[0].startswith("vllm:") and not k[0].endswith("_created")}


def idle_page(server: RealVllm, seconds: float = 60.0) -> str:
    """A page once the server is idle: nothing running or waiting and two pages a second apart
    with the same counters (the engine's last stats have reached the API server)."""
    end = time.monotonic() + seconds
    last = counters(parse(page(server.metrics_url)))
    while time.monotonic() < end:
        time.sleep(1.0)
        text = page(server.metrics_url)
        now = counters(parse(text))
        busy = sum(
            v
            for (name, _), v in now.items()
            if name in ("vllm:num_requests_running", "vllm:num_requests_waiting")
        )
        if now == last and not busy:
            return text
        last = now
    raise AssertionError("the server did not become idle")


def one(truth: Truth, name: str, **labels: str) -> float | None:
    found = [v for (n, ls), v in truth.items() if n == name and all(item in ls for item in labels.items())]
    assert len(found) <= 1, f"{name}{labels} matches {len(found)} series"
    return found[0] if found else None


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path
