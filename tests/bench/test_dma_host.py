"""The measuring harness with real torch copies on the CPU; only the GPU's event timer is replaced.

Needs torch (the CPU build: pip install torch==2.13.0).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kvops.bench import dma
from kvops.bench.plan import build_plan
from kvops.bench.results import CaseFailure, CaseResult

from .helpers import host_clock_timer

KIB = 2**10


def test_every_case_copies_its_bytes_to_the_right_place() -> None:
    plan = build_plan(sizes=[16 * KIB, 64 * KIB], memories=["pageable"], blocks=4, repeats=3, warmup=1)
    results, failures = dma.measure(plan, "cpu", timer=host_clock_timer)
    assert failures == []
    assert [r.case for r in results] == plan.cases
    for r in results:
        assert r.verified, r.case
        assert len(r.seconds) == 3
        assert r.summary.median == pytest.approx(sorted(r.case.bytes_moved / s for s in r.seconds)[1])


def _skip_last_block(streams_copies: Sequence, repeats: int, warmup: int) -> list[float]:
    """A transfer that forgets its last block: the copy check must notice."""
    return host_clock_timer([copies[:-1] for copies in streams_copies], repeats, warmup)


def test_a_missing_block_fails_the_copy_check() -> None:
    plan = build_plan(sizes=[16 * KIB], directions=["h2d", "d2h", "bidir"], memories=["pageable"], blocks=4)
    results, _ = dma.measure(plan, "cpu", timer=_skip_last_block)
    batched = [r for r in results if r.case.blocks == 4]
    single = [r for r in results if r.case.blocks == 1]
    assert batched and not any(r.verified for r in batched)
    assert single and not any(r.verified for r in single)  # the only block is the last


def test_blocks_are_copied_in_place_not_shuffled() -> None:
    def reversed_blocks(streams_copies: Sequence, repeats: int, warmup: int) -> list[float]:
        swapped = [
            [(dst, src) for (dst, _), (_, src) in zip(c, reversed(c), strict=True)] for c in streams_copies
        ]
        return host_clock_timer(swapped, repeats, warmup)

    plan = build_plan(sizes=[16 * KIB], directions=["h2d"], memories=["pageable"], blocks=4)
    results, _ = dma.measure(plan, "cpu", timer=reversed_blocks)
    assert [r.verified for r in results] == [True, False]  # one block cannot be misplaced; four can


def test_a_failing_case_is_recorded_and_the_rest_still_run() -> None:
    calls: list[int] = []

    def fails_on_second(streams_copies: Sequence, repeats: int, warmup: int) -> list[float]:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("CUDA out of memory. Tried to allocate 1.00 GiB\nmore detail")
        return host_clock_timer(streams_copies, repeats, warmup)

    plan = build_plan(sizes=[16 * KIB], directions=["h2d", "d2h", "bidir"], memories=["pageable"], blocks=1)
    seen: list[CaseResult | CaseFailure] = []
    results, failures = dma.measure(plan, "cpu", timer=fails_on_second, progress=lambda i, o: seen.append(o))
    assert [r.case.direction for r in results] == ["h2d", "bidir"]
    assert failures == [
        CaseFailure(plan.cases[1], "RuntimeError: CUDA out of memory. Tried to allocate 1.00 GiB")
    ]
    assert len(seen) == 3


def test_bidirectional_case_runs_one_copy_list_per_direction() -> None:
    seen: list[int] = []

    def count_streams(streams_copies: Sequence, repeats: int, warmup: int) -> list[float]:
        seen.append(len(streams_copies))
        return host_clock_timer(streams_copies, repeats, warmup)

    plan = build_plan(sizes=[16 * KIB], memories=["pageable"], blocks=1)
    dma.measure(plan, "cpu", timer=count_streams)
    assert seen == [1, 1, 2]  # h2d, d2h, bidir


def test_the_timing_core_names_its_cuda_calls_and_why() -> None:
    doc = dma.time_transfer.__doc__ or ""
    for call in (
        "Stream",
        "synchronize",
        "Event(enable_timing=True)",
        "non_blocking=True",
        "pinned",
        "wait_event",
    ):
        assert call in doc, call
