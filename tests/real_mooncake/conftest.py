"""Fixtures for the tests against a real Mooncake store (marker real_mooncake; docs/real-mooncake.md).

The wheel's venv is installed before the first test runs (pytest_collection_finish: no per-test
timeout applies there); CI runs the installer as its own step first. Each test gets a fresh
master (counters from 0, about a second to start), stopped with its clients when the test ends,
also after a failure. The client's CUDA libraries are stand-ins built for the test: a TEST
DEVICE ONLY (support/real_mooncake/cuda_standin.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.real_mooncake import install
from support.real_mooncake.store import RealMooncake


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(item.get_closest_marker("real_mooncake") for item in session.items) and not install.is_ready():
        install.install()  # one 98 MB wheel the first time


def pytest_report_header(config: pytest.Config) -> str:
    return (
        "real_mooncake: the Mooncake client loads stand-in libcuda.so.1/libcudart.so.12 built at test "
        "time (every call answers 'no device'): a test device only, never on a user's machine"
    )


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def mooncake(tmp_path: Path) -> Iterator[RealMooncake]:
    """A running mooncake_master on 127.0.0.1 (random free ports), no client yet."""
    store = RealMooncake(tmp_path)
    groups = [store.proc.pid]
    try:
        yield store
    finally:
        groups += [c.proc.pid for c in store.clients]
        store.stop()
        left = [g for g in groups if _group_alive(g)]
        assert not left, f"Mooncake process groups still alive after stop: {left}"
