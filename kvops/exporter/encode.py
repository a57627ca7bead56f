"""Text exposition (format 0.0.4) of prometheus_client metric families, byte-equal to its own.

prometheus_client's generate_latest validates and escapes every label name of every
sample: with 16 targets and 8 GPUs it took ~20 ms of a ~57 ms scrape (cProfile, see
benchmarks/exporter_scrape.py). kvops's own names are fixed and valid (kvops/names.py), so
only label values need escaping; tests/exporter/test_encode.py pins byte equality.
`kvops exporter` writes its own series without families (kvops.exporter.text_sink); this
encodes families other code hands the server.

A series' name and labels are the same from one scrape to the next (its value is what
changes): the text before the value is kept, keyed by the name and the labels in the order
they were given, so a scrape sorts and escapes only the label sets it has not seen.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client.core import Metric

from kvops.exporter.compress import gzip_bytes
from kvops.exporter.histogram_family import HistogramSeriesFamily
from kvops.exporter.line_text import head as _head
from kvops.exporter.line_text import header, histogram_heads, join

# (sample name, label items in insertion order) -> 'name{sorted, escaped labels} '. Bounded:
# churning label values (pids, say) start it over rather than grow it.
_PREFIXES: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
_PREFIXES_MAX = 65536


def _prefix(name: str, items: tuple[tuple[str, str], ...]) -> str:
    text = _head(name, items)
    if len(_PREFIXES) >= _PREFIXES_MAX:
        _PREFIXES.clear()
    _PREFIXES[(name, items)] = text
    return text


def encode(metrics: Iterable[Metric]) -> bytes:
    heads: list[str] = []
    values: list[float] = []
    pending = ""  # HELP and TYPE text, written before the next line
    for metric in metrics:
        name = metric.name + "_total" if metric.type == "counter" else metric.name
        pending += header(name, metric.documentation, metric.type)
        start = len(heads)
        # Passed-through histograms: their series are written from kept text (_add_series).
        series = metric if isinstance(metric, HistogramSeriesFamily) and metric.series else None
        for sample in metric.samples if series is None else series.plain_samples:
            items = tuple(sample.labels.items())
            heads.append(_PREFIXES.get((sample.name, items)) or _prefix(sample.name, items))
            values.append(sample.value)
        if series is not None:
            _add_series(series, heads, values)
        if pending and len(heads) > start:
            heads[start] = pending + heads[start]
            pending = ""
    return join(heads, values, pending)


# (family, label items, bounds) -> (each bucket's text before its value, _count's, _sum's): a
# passed-through histogram series' lines differ between scrapes only in their values. Bounded
# like _PREFIXES.
_SeriesKey = tuple[str, tuple[tuple[str, str], ...], tuple[float, ...]]
_SERIES_TEXT: dict[_SeriesKey, tuple[list[str], str, str]] = {}
_SERIES_TEXT_MAX = 16384


def _add_series(metric: HistogramSeriesFamily, heads: list[str], values: list[float]) -> None:
    """The family's kept series, in the order its `samples` gives them (generate_latest's)."""
    name = metric.name
    for labels, value in metric.series:
        bounds, counts = zip(*value.buckets, strict=True)
        key = (name, tuple(labels.items()), bounds)
        text = _SERIES_TEXT.get(key)
        if text is None:
            text = histogram_heads(name, list(labels.items()), value)
            if len(_SERIES_TEXT) >= _SERIES_TEXT_MAX:
                _SERIES_TEXT.clear()
            _SERIES_TEXT[key] = text
        buckets, count, total = text
        heads += buckets
        values += counts
        if count:
            heads += (count, total)
            values += (counts[-1], value.sum)


@dataclass
class Exposition:
    """One encoded exposition; the gzip form is made on first demand and kept."""

    plain: bytes
    _gzipped: bytes | None = field(default=None, repr=False)

    def gzipped(self) -> bytes:
        # Two requests racing here both compress the same bytes; either result is right.
        if self._gzipped is None:
            self._gzipped = gzip_bytes(self.plain)
        return self._gzipped
