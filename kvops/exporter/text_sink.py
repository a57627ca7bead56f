"""A Snapshot's exposition written straight from it: walk's Sink that writes text.

Building prometheus_client families and encoding them cost ~10 ms of a ~34 ms scrape with 16
vLLMs and 8 GPUs (a label dict and a Sample for each of ~2,300 series, then a tuple of their
labels and a dict lookup to find each line's kept text; measured in process, 2026-11-27).
A series' head (the text before its value) is the same from one scrape to the next: here it
is found by the spec's name and the label values as walk gives them, and the lines are
joined in C (kvops.exporter.line_text). The bytes are generate_latest's of the families
kvops.exporter.families builds from the same walk (tests/exporter/test_text_sink.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from kvops.exporter.line_text import head, header, histogram_heads, join
from kvops.exporter.walk import PodLabels, walk
from kvops.names import MetricSpec
from kvops.snapshot import Histogram, Snapshot

_HeadKey = tuple[str, tuple[str, ...], PodLabels]
# (spec name, label values, pod pairs) -> the line's head. Bounded: churning label values
# (pids, say) start it over rather than grow it.
_HEADS: dict[_HeadKey, str] = {}
_HEADS_MAX = 65536
# (spec name, label values, pod pairs, bounds) -> (each bucket's head, _count's, _sum's).
_SERIES: dict[tuple[str, tuple[str, ...], PodLabels, tuple[float, ...]], tuple[list[str], str, str]] = {}
_SERIES_MAX = 16384
_HEADERS: dict[str, str] = {}  # spec name -> its HELP and TYPE lines


def _items(spec: MetricSpec, labels: Sequence[str], pod: PodLabels) -> list[tuple[str, str]]:
    items = list(zip(spec.labels, labels, strict=False))
    named = set(spec.labels)
    return items + [(k, v) for k, v in pod if k not in named]


class TextSink:
    """The lines as two lists, each line's head and its value; `text()` joins them."""

    def __init__(self) -> None:
        self.heads: list[str] = []
        self.values: list[float] = []
        self._spec: MetricSpec | None = None
        # HELP and TYPE texts not yet written before a line, joined once when one is: a run of
        # empty families (most of the 115 engine families on a page without their connector)
        # grew one string with `+=`, 1.7 MB copied a write for 16 vLLMs.
        self._pending: list[str] = []
        self._deferred = ""  # an omit_if_empty family's, written with its first series

    def begin(self, spec: MetricSpec, *, omit_if_empty: bool = False) -> None:
        self._spec = spec
        text = _HEADERS.get(spec.name)
        if text is None:
            text = _HEADERS[spec.name] = header(spec.name, spec.help, spec.type)
        if omit_if_empty:
            self._deferred = text
        else:
            self._deferred = ""
            self._pending.append(text)

    def add(self, labels: Sequence[str], value: float | Histogram | None, pod: PodLabels = ()) -> None:
        spec = self._spec
        if value is None or spec is None:
            return
        if isinstance(value, Histogram):
            if value.buckets:
                self._add_histogram(spec, labels, value, pod)
            return
        key = (spec.name, tuple(labels), pod)
        text = _HEADS.get(key)
        if text is None:
            text = head(spec.name, _items(spec, labels, pod))
            if len(_HEADS) >= _HEADS_MAX:
                _HEADS.clear()
            _HEADS[key] = text
        if self._deferred or self._pending:
            text = self._take_pending() + text
        self.heads.append(text)
        self.values.append(value)

    def _take_pending(self) -> str:
        self._pending.append(self._deferred)
        text = "".join(self._pending)
        self._pending, self._deferred = [], ""
        return text

    def _add_histogram(
        self, spec: MetricSpec, labels: Sequence[str], value: Histogram, pod: PodLabels
    ) -> None:
        bounds, counts = zip(*value.buckets, strict=True)
        key = (spec.name, tuple(labels), pod, bounds)
        found = _SERIES.get(key)
        if found is None:
            found = histogram_heads(spec.name, _items(spec, labels, pod), value)
            if len(_SERIES) >= _SERIES_MAX:
                _SERIES.clear()
            _SERIES[key] = found
        buckets, count, total = found
        start = len(self.heads)
        self.heads += buckets
        self.values += counts
        if self._deferred or self._pending:
            self.heads[start] = self._take_pending() + self.heads[start]
        if count:
            self.heads += (count, total)
            self.values += (counts[-1], value.sum)

    def text(self) -> bytes:
        return join(self.heads, self.values, "".join(self._pending))


def write(snap: Snapshot) -> bytes:
    """The exposition of one snapshot (format 0.0.4)."""
    sink = TextSink()
    walk(snap, sink)
    return sink.text()
