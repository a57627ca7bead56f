"""Histograms out of parsed samples: `<family>_bucket{le}`, `_sum`, `_count` -> Histogram."""

from __future__ import annotations

from kvops.snapshot import Histogram
from kvops.sources.exposition import Labels, ParseResult


def sample_names(family: str) -> tuple[str, str, str]:
    return (f"{family}_bucket", f"{family}_sum", f"{family}_count")


def _le(raw: str | None) -> float | None:
    try:
        return float(raw) if raw is not None else None  # "+Inf" parses to inf
    except ValueError:
        return None


def histograms(result: ParseResult, family: str) -> list[tuple[Labels, Histogram]]:
    """Every series of `family`, labels without `le`. A series needs its +Inf bucket and its sum
    to be kept: a page cut in the middle of one drops it, not the page.
    Bucket counts, sum and count pass through as exposed."""
    bucket_name, sum_name, count_name = sample_names(family)
    series: dict[tuple[tuple[str, str], ...], tuple[Labels, list[tuple[float, float]]]] = {}
    for labels, value in result.get(bucket_name):
        le = _le(labels.get("le"))
        if le is None or le != le:  # a bucket without a usable bound is not one
            continue
        rest = {k: v for k, v in labels.items() if k != "le"}
        key = tuple(sorted(rest.items()))
        series.setdefault(key, (rest, []))[1].append((le, value))
    sums = {tuple(sorted(labels.items())): value for labels, value in result.get(sum_name)}
    counts = {tuple(sorted(labels.items())): value for labels, value in result.get(count_name)}
    out: list[tuple[Labels, Histogram]] = []
    for key, (labels, buckets) in series.items():
        buckets.sort()
        total = sums.get(key)
        if buckets[-1][0] != float("inf") or total is None:
            continue
        out.append((labels, Histogram(tuple(buckets), total, counts.get(key, buckets[-1][1]))))
    return out
