"""Helpers for kvops bench tests: a host-clock stand-in for the GPU's event timer, a device, results.

The stand-in replaces only what needs a GPU (streams and events); the copies it times are
real torch copies between real tensors, so buffer setup, block slicing and the copy check
run as they do on a GPU.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from kvops.bench.plan import Case
from kvops.bench.results import CaseResult, DeviceInfo
from kvops.bench.stats import summarise


def host_clock_timer(streams_copies: Sequence, repeats: int, warmup: int) -> list[float]:
    """time_transfer's contract, timed by perf_counter on the CPU (no streams, no events)."""
    seconds: list[float] = []
    for i in range(warmup + repeats):
        t0 = time.perf_counter()
        for copies in streams_copies:
            for dst, src in copies:
                dst.copy_(src)
        elapsed = time.perf_counter() - t0
        if i >= warmup:
            seconds.append(max(elapsed, 1e-9))
    return seconds


DEVICE = DeviceInfo(
    index=0,
    torch_device="cuda:0",
    name="NVIDIA H100 80GB HBM3",
    backend="cuda",
    runtime="12.4",
    torch="2.5.1+cu124",
    uuid="58f4ef56-7bd3-d0c7-ce7b-a7ed3e2f4fe5",
    pci_bus_id="00000000:3b:00",
)


def result(case: Case, seconds: list[float], verified: bool = True) -> CaseResult:
    return CaseResult(case, summarise(case.bytes_moved, seconds), tuple(seconds), verified)
