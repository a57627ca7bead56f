"""Histograms out of parsed samples: `<family>_bucket{le}`, `_sum`, `_count` -> Histogram."""

from __future__ import annotations

from kvops.exposition.parser import Labels, ParseResult
from kvops.snapshot import Histogram

try:  # the C grouping of bucket samples, built by setup.py where a compiler was at hand
    from kvops.exposition._buckets import group as _c_group
    from kvops.exposition._buckets import series as _c_series
except ImportError:  # pragma: no cover - _group and _histograms below return the same
    _c_group = None  # type: ignore[assignment]
    _c_series = None  # type: ignore[assignment]


_NAMES: dict[str, tuple[str, str, str]] = {}  # family -> its sample names: readers ask every page


def sample_names(family: str) -> tuple[str, str, str]:
    names = _NAMES.get(family)
    if names is None:
        names = (f"{family}_bucket", f"{family}_sum", f"{family}_count")
        if len(_NAMES) < 4096:
            _NAMES[family] = names
    return names


_LE: dict[str, float | None] = {}  # bound text -> value: pages repeat a few dozen bounds


def _le(raw: str | None) -> float | None:
    if raw is None:
        return None
    found = _LE.get(raw, False)
    if found is not False:
        return found
    try:
        value: float | None = float(raw)  # "+Inf" parses to inf
    except ValueError:
        value = None
    if value is not None and value != value:  # NaN is no bound
        value = None
    if len(_LE) < 4096:
        _LE[raw] = value
    return value


_Key = tuple[tuple[str, str], ...]
# A bucket line's label items -> (its series' items without `le`, the bound): the same every
# scrape, and three quarters of the lines the exporter reads are buckets. Bounded: churning
# label values start it over rather than grow it.
_SPLIT: dict[_Key, tuple[_Key, float | None]] = {}
_SPLIT_MAX = 16384


def _split(labels: Labels) -> tuple[_Key, float | None]:
    raw = labels.get("le")
    le = _le(raw)
    if le is None or raw is None:
        return (), None
    items = list(labels.items())
    items.remove(("le", raw))  # in C: a third of filtering the items in a generator
    return tuple(items), le


_Series = dict[_Key, tuple[Labels, list[tuple[float, float]]]]


def _group(bucket_samples: list[tuple[Labels, float]]) -> _Series:
    """Bucket samples by series (label items without `le`), each with its (bound, count)s in
    page order. A series' labels come in the same order on every line of it (one writer, one
    label set): the (name, value) pairs in that order key it, without sorting per line."""
    series: _Series = {}
    split = _SPLIT
    for labels, value in bucket_samples:
        whole = tuple(labels.items())
        known = split.get(whole)
        if known is None:
            known = _split(labels)
            if len(split) >= _SPLIT_MAX:
                split.clear()
            split[whole] = known
        key, le = known
        if le is None:  # a bucket without a usable bound is not one
            continue
        found = series.get(key)
        if found is None:
            found = series[key] = (dict(key), [])
        found[1].append((le, value))
    return series


def histograms(result: ParseResult, family: str) -> list[tuple[Labels, Histogram]]:
    """Every series of `family`, labels without `le`. A series needs its +Inf bucket and its sum
    to be kept: a page cut in the middle of one drops it, not the page.
    Bucket counts, sum and count pass through as exposed. The labels dicts are read-only: the
    C reading hands out one kept dict per series, the same every scrape (_buckets.c)."""
    bucket_name, sum_name, count_name = sample_names(family)
    bucket_samples = result.get(bucket_name)
    if not bucket_samples:
        return []
    if _c_series is None:
        return _histograms(bucket_samples, result.get(sum_name), result.get(count_name))
    sum_samples = result.get(sum_name)
    out: list[tuple[Labels, Histogram]] = []
    for labels, buckets, total, count in _c_series(
        bucket_samples, sum_samples, result.get(count_name), _LE, _le
    ):
        if total is None:  # labels in another order on the _sum line: match as a set
            total = _sum_in_any_order(sum_samples, tuple(labels.items()))
            if total is None:
                continue
        out.append((labels, Histogram(buckets, total, count)))
    return out


def _sum_in_any_order(sum_samples: list[tuple[Labels, float]], key: _Key) -> float | None:
    sums = {tuple(labels.items()): value for labels, value in sum_samples}
    return next((v for k, v in sums.items() if sorted(k) == sorted(key)), None)


def _histograms(
    bucket_samples: list[tuple[Labels, float]],
    sum_samples: list[tuple[Labels, float]],
    count_samples: list[tuple[Labels, float]],
) -> list[tuple[Labels, Histogram]]:
    """histograms() in Python: the reference for the C reading, and where it is not built."""
    series = _group(bucket_samples) if _c_group is None else _c_group(bucket_samples, _LE, _le)
    sums = {tuple(labels.items()): value for labels, value in sum_samples}
    counts = {tuple(labels.items()): value for labels, value in count_samples}
    out: list[tuple[Labels, Histogram]] = []
    for key, (labels, buckets) in series.items():
        buckets.sort()
        total = sums.get(key)
        if total is None:  # labels in another order on the _sum line: match as a set
            total = _sum_in_any_order(sum_samples, key)
        if buckets[-1][0] != float("inf") or total is None:
            continue
        count = counts.get(key, buckets[-1][1])
        out.append((labels, Histogram(tuple(buckets), total, count)))
    return out


def merged(a: Histogram | None, b: Histogram) -> Histogram:
    """Two series of one histogram (extra labels kvops does not split by) added up; where
    their buckets differ, the first is kept rather than a made-up merge."""
    if a is None:
        return b
    if [le for le, _ in a.buckets] != [le for le, _ in b.buckets]:
        return a
    buckets = tuple((le, x + y) for (le, x), (_, y) in zip(a.buckets, b.buckets, strict=True))
    return Histogram(buckets, a.sum + b.sum, a.count + b.count)
