"""Fixtures for kvops bench tests."""

from __future__ import annotations

import pytest

from kvops.bench.plan import Case
from kvops.bench.results import BenchRun, LinkMax

from .helpers import DEVICE, result


@pytest.fixture
def sample_run() -> BenchRun:
    """A run with figures chosen so the arithmetic is checkable by hand: 2 MiB in 100 µs = 20.97 GB/s."""
    mib2 = 2 * 2**20
    return BenchRun(
        device=DEVICE,
        link=LinkMax(63.0e9, "nvidia collector, GPU 0 by uuid"),
        repeats=3,
        warmup=1,
        finished_at=1_790_000_000.0,
        results=[
            result(Case("h2d", "pinned", mib2), [100e-6, 100e-6, 100e-6]),
            result(Case("bidir", "pinned", mib2), [100e-6, 80e-6, 125e-6]),
            result(Case("h2d", "pageable", mib2, 64), [64 * 400e-6] * 3, verified=False),
        ],
    )
