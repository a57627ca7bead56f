"""Text exposition (format 0.0.4) of metric families, byte-equal to prometheus_client's.

prometheus_client's generate_latest validates and escapes every label name of every
sample: with 16 targets and 8 GPUs it took ~20 ms of a ~57 ms scrape (cProfile, see
benchmarks/exporter_scrape.py). kvops's own names are fixed and valid (kvops/names.py), so
only label values need escaping; tests/exporter/test_encode.py pins byte equality.

A series' name and labels are the same from one scrape to the next (its value is what
changes): the text before the value is kept, keyed by the name and the labels in the order
they were given, so a scrape sorts and escapes only the label sets it has not seen.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client.core import Metric
from prometheus_client.utils import floatToGoString

from kvops.exporter.histogram_family import HistogramSeriesFamily, has_count_and_sum, le_text
from kvops.snapshot import Histogram

# (sample name, label items in insertion order) -> 'name{sorted, escaped labels} '. Bounded:
# churning label values (pids, say) start it over rather than grow it.
_PREFIXES: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
_PREFIXES_MAX = 65536
_NEG_INF = float("-inf")


def _escape_value(value: str) -> str:
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


def _head(name: str, items: Iterable[tuple[str, str]]) -> str:
    """'name{sorted, escaped labels} ': a line's text before its value."""
    labels = ",".join(f'{k}="{_escape_value(v)}"' for k, v in sorted(items))
    return f"{name}{{{labels}}} "


def _prefix(name: str, items: tuple[tuple[str, str], ...]) -> str:
    text = _head(name, items)
    if len(_PREFIXES) >= _PREFIXES_MAX:
        _PREFIXES.clear()
    _PREFIXES[(name, items)] = text
    return text


def _value_text(value: float) -> str:
    # floatToGoString differs from repr() only for infinities, NaN and positive numbers of 7+
    # integer digits (Go's exponent form): a finite float below 1e6 is its repr.
    if type(value) is float and _NEG_INF < value < 1e6:
        return repr(value)
    return floatToGoString(value)


def encode(metrics: Iterable[Metric]) -> bytes:
    out: list[str] = []
    append = out.append
    prefixes, value_text = _PREFIXES, _value_text
    for metric in metrics:
        name = metric.name + "_total" if metric.type == "counter" else metric.name
        doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        append(f"# HELP {name} {doc}\n# TYPE {name} {metric.type}\n")
        # Passed-through histograms: their series are written from kept text (_append_series).
        series = metric if isinstance(metric, HistogramSeriesFamily) and metric.series else None
        for sample in metric.samples if series is None else series.plain_samples:
            if sample.labels:
                items = tuple(sample.labels.items())
                prefix = prefixes.get((sample.name, items)) or _prefix(sample.name, items)
                append(f"{prefix}{value_text(sample.value)}\n")
            else:
                append(f"{sample.name} {value_text(sample.value)}\n")
        if series is not None:
            _append_series(series, out)
    return "".join(out).encode("utf-8")


# (family, label items, bounds) -> (each bucket's text before its value, _count's, _sum's): a
# passed-through histogram series' lines differ between scrapes only in their values. Bounded
# like _PREFIXES.
_SeriesKey = tuple[str, tuple[tuple[str, str], ...], tuple[float, ...]]
_SERIES_TEXT: dict[_SeriesKey, tuple[list[str], str, str]] = {}
_SERIES_TEXT_MAX = 16384


def _series_text(name: str, labels: dict[str, str], value: Histogram) -> tuple[list[str], str, str]:
    buckets = [_head(name + "_bucket", [*labels.items(), ("le", le_text(le))]) for le, _ in value.buckets]
    if not has_count_and_sum(value):
        return buckets, "", ""
    return buckets, _head(name + "_count", labels.items()), _head(name + "_sum", labels.items())


def _append_series(metric: HistogramSeriesFamily, out: list[str]) -> None:
    """The family's kept series, in the order its `samples` gives them (generate_latest's)."""
    name, value_text = metric.name, _value_text
    for labels, value in metric.series:
        key = (name, tuple(labels.items()), tuple(le for le, _ in value.buckets))
        text = _SERIES_TEXT.get(key)
        if text is None:
            text = _series_text(name, labels, value)
            if len(_SERIES_TEXT) >= _SERIES_TEXT_MAX:
                _SERIES_TEXT.clear()
            _SERIES_TEXT[key] = text
        buckets, count, total = text
        out.extend(f"{head}{value_text(n)}\n" for head, (_, n) in zip(buckets, value.buckets, strict=True))
        if count:
            out.append(f"{count}{value_text(value.buckets[-1][1])}\n")
            out.append(f"{total}{value_text(value.sum)}\n")


# Level 1: measured on 385 KB of simulated vLLM pages, 10× smaller in 1.7 ms of CPU; level 6
# (gzip's default) saves 18 % more bytes for 3.6× the CPU, on a page that crosses a rack.
GZIP_LEVEL = 1


@dataclass
class Exposition:
    """One encoded exposition; the gzip form is made on first demand and kept."""

    plain: bytes
    _gzipped: bytes | None = field(default=None, repr=False)

    def gzipped(self) -> bytes:
        # Two requests racing here both compress the same bytes; either result is right.
        if self._gzipped is None:
            self._gzipped = gzip.compress(self.plain, compresslevel=GZIP_LEVEL)
        return self._gzipped
