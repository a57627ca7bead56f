"""Summary of one case's repeats: bandwidth per repeat, then median and spread.

Bandwidth is computed per repeat (bytes / that repeat's seconds) and summarised, rather
than bytes / median seconds: the two differ for an even count, and the spread is wanted
in the unit people read (bytes per second).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Summary:
    """Bytes per second over the repeats of one case."""

    median: float
    min: float
    max: float
    p25: float  # lower quartile
    p75: float  # upper quartile
    repeats: int

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median: 0.05 means the middle half lies within 5 %."""
        return (self.p75 - self.p25) / self.median if self.median else 0.0

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def summarise(bytes_moved: int, seconds: Sequence[float]) -> Summary:
    """Summarise repeats that each moved `bytes_moved` in the given seconds."""
    if not seconds:
        raise ValueError("no repeats to summarise")
    if any(s <= 0 for s in seconds):
        raise ValueError(f"a repeat took no time ({min(seconds)} s): the timer cannot resolve it")
    rates = sorted(bytes_moved / s for s in seconds)
    if len(rates) == 1:
        q1 = q3 = rates[0]
    else:
        # 'inclusive' keeps the quartiles within [min, max] for small counts.
        q1, _, q3 = statistics.quantiles(rates, n=4, method="inclusive")
    return Summary(
        median=statistics.median(rates), min=rates[0], max=rates[-1], p25=q1, p75=q3, repeats=len(rates)
    )
