"""What would a bigger CPU buffer buy? The same seeded workload, replayed per buffer size.

Each size gets a fresh engine with the same seed, so the arrivals and prompts are the same
and only the CPU tier differs. The run is in simulated time, as fast as the CPU allows.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from kvops.errors import UsageError
from kvops.sim import limits
from kvops.sim.server import build_engine

BAR_WIDTH = 40


@dataclass
class WhatIfResult:
    size_gib: float
    external_hit_rate: float | None  # external hits / external queries (tokens)
    local_hit_rate: float | None
    prefill_tokens_saved: int  # prompt tokens loaded from the CPU tier instead of computed
    bytes_stored: int
    bytes_loaded: int
    bytes_moved: int
    preemptions: int
    recomputed_tokens: int  # tokens prefilled again after preemptions
    requests_finished: int
    wall_seconds: float


def parse_sizes(text: str) -> list[float]:
    try:
        sizes = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"--sizes {text!r}: expected GiB values separated by commas, e.g. 0,16,64") from None
    if not sizes:
        raise UsageError(f"--sizes {text!r}: expected one or more sizes >= 0 in GiB")
    for size in sizes:
        limits.offload_size("--sizes", size)
    return sizes


def run(sizes: list[float], duration: float, seed: int = 0, **options: Any) -> list[WhatIfResult]:
    limits.in_range("--duration", duration, 0.0, limits.MAX_DURATION_S)
    results = []
    for size in sizes:
        started = time.perf_counter()
        engine = build_engine(seed=seed, **{**options, "kv_offloading_size_gib": size})
        engine.advance_to(duration)
        c = engine.counters
        results.append(
            WhatIfResult(
                size_gib=size,
                external_hit_rate=c.external_hits / c.external_queries if c.external_queries else None,
                local_hit_rate=c.prefix_hits / c.prefix_queries if c.prefix_queries else None,
                prefill_tokens_saved=c.external_hits,
                bytes_stored=c.store_bytes,
                bytes_loaded=c.load_bytes,
                bytes_moved=c.store_bytes + c.load_bytes,
                preemptions=c.preemptions,
                recomputed_tokens=c.recomputed_tokens,
                requests_finished=c.requests_finished,
                wall_seconds=time.perf_counter() - started,
            )
        )
    return results


def to_json(results: list[WhatIfResult], meta: dict[str, Any]) -> dict[str, Any]:
    return {**meta, "results": [asdict(r) for r in results]}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def format_table(results: list[WhatIfResult]) -> str:
    head = (
        f"{'CPU buffer':>10}  {'ext hit':>8}  {'local hit':>9}  {'prefill saved':>14}  "
        f"{'stored':>9}  {'loaded':>9}  {'preempt':>7}  {'recomputed':>10}"
    )
    lines = [head]
    for r in results:
        lines.append(
            f"{r.size_gib:>6g} GiB  {_pct(r.external_hit_rate):>8}  {_pct(r.local_hit_rate):>9}  "
            f"{r.prefill_tokens_saved:>10,} tok  {r.bytes_stored / 1e9:>6.1f} GB  "
            f"{r.bytes_loaded / 1e9:>6.1f} GB  {r.preemptions:>7}  {r.recomputed_tokens:>10,}"
        )
    return "\n".join(lines)


def format_plot(results: list[WhatIfResult]) -> str:
    """Horizontal bars of the external hit rate, one per size (eighth-block resolution)."""
    lines = ["external hit rate by CPU buffer size"]
    for r in results:
        rate = r.external_hit_rate or 0.0
        eighths = round(rate * BAR_WIDTH * 8)
        bar = "█" * (eighths // 8) + ("", "▏", "▎", "▍", "▌", "▋", "▊", "▉")[eighths % 8]
        lines.append(f"{r.size_gib:>6g} GiB │{bar:<{BAR_WIDTH}} {_pct(r.external_hit_rate)}")
    return "\n".join(lines)
