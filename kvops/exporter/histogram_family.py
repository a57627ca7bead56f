"""A histogram family that keeps its passed-through series whole until they are encoded.

Issue 28 passes vLLM's TTFT, queue and offload histograms through: three quarters of the
exporter's engine lines are now buckets. Built as prometheus_client Samples, every bucket
cost a label dict, a Sample and, in the encoder, a tuple of its labels to find its text; a
series' bucket bounds and labels are the same from one scrape to the next, so here each
series is kept as (labels, Histogram), and kvops.exporter.encode makes its lines' text before
the value once per (name, labels, bounds). `samples` still gives prometheus_client's Samples,
in its order, for generate_latest and anything else that reads a family
(tests/exporter/test_encode.py pins the two encodings byte-equal).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import HistogramMetricFamily
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from kvops.snapshot import Histogram

_LE_TEXT: dict[float, str] = {}  # bucket bound -> its exposition text (a few dozen bounds)


def le_text(bound: float) -> str:
    text = _LE_TEXT.get(bound)
    if text is None:
        text = floatToGoString(bound)
        if len(_LE_TEXT) < 4096:
            _LE_TEXT[bound] = text
    return text


class HistogramSeriesFamily(HistogramMetricFamily):
    """HistogramMetricFamily plus `series`: (labels, Histogram) kept whole (add_series)."""

    def __init__(self, name: str, documentation: str, labels: list[str]) -> None:
        self.series: list[tuple[dict[str, str], Histogram]] = []
        self.plain_samples: list[Sample] = []
        super().__init__(name, documentation, labels=labels)

    @property  # type: ignore[override]  # a list attribute in Metric
    def samples(self) -> list[Sample]:
        if not self.series:
            return self.plain_samples  # add_metric appends to it
        return [
            *self.plain_samples,
            *(s for labels, value in self.series for s in _samples(self.name, labels, value)),
        ]

    @samples.setter
    def samples(self, value: list[Sample]) -> None:
        self.plain_samples = value

    def add_series(self, labels: list[str], value: Histogram) -> None:
        if value.buckets:
            self.series.append((dict(zip(self._labelnames, labels, strict=False)), value))


def has_count_and_sum(value: Histogram) -> bool:
    # prometheus_client's add_metric: no _count and _sum where a bucket bound is negative;
    # _count is the +Inf bucket's.
    return value.buckets[0][0] >= 0 and value.sum is not None


def _samples(name: str, labels: dict[str, str], value: Histogram) -> Iterator[Sample]:
    bucket = name + "_bucket"
    for le, count in value.buckets:
        yield Sample(bucket, {**labels, "le": le_text(le)}, count)
    if has_count_and_sum(value):
        yield Sample(name + "_count", dict(labels), value.buckets[-1][1])
        yield Sample(name + "_sum", dict(labels), value.sum)
