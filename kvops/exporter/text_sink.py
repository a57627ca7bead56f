"""A Snapshot's exposition written straight from it: walk's Sink that writes text.

Building prometheus_client families and encoding them cost ~10 ms of a ~34 ms scrape with 16
vLLMs and 8 GPUs (a label dict and a Sample for each of ~2,300 series, then a tuple of their
labels and a dict lookup to find each line's kept text; measured in process, 2026-11-27).
A series' head (the text before its value) is the same from one scrape to the next: here it
is kept, and the lines are joined in C (kvops.exporter.line_text). The bytes are
generate_latest's of the families kvops.exporter.families builds from the same walk
(tests/exporter/test_text_sink.py).

Most families are read from an owner's samples in one call (walk.Sink.add_fields and
add_keyed: gather and keyed_all in C, kvops/exporter/_lines.c), their heads kept per owner, not
looked up by a key built and hashed for each series: with 16 simulated vLLMs, the write went
from 1,090 to 679 us with the caches emptied first (benchmarks/round_cold.py), 636 to 293 warm.
A histogram family's series keep their heads the same way, by their place among the owner's
samples and fields (_add_histograms).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kvops import binding
from kvops.exporter.line_text import (
    gather,
    head,
    header,
    histogram_heads,
    join,
    put_buckets,
    put_keyed,
    put_keyed_all,
)
from kvops.exporter.walk import Fields, PodLabels, add_keyed_each, series_labels, walk
from kvops.names import MetricSpec
from kvops.snapshot import Histogram, Snapshot

_HeadKey = tuple[str, tuple[str, ...], PodLabels]
# (spec name, label values, pod pairs) -> the line's head. Bounded: churning label values
# (pids, say) start it over rather than grow it.
_HEADS: dict[_HeadKey, str] = {}
_HEADS_MAX = 65536
# (spec name, label values, pod pairs) -> (the upper bounds, each bucket's head, _count's, _sum's):
# a histogram series' heads, written again while its bounds are the same (put_buckets).
_SeriesHeads = tuple[tuple[float, ...], list[str], str, str]
_SERIES: dict[_HeadKey, _SeriesHeads] = {}
_SERIES_MAX = 16384
_HEADERS: dict[str, str] = {}  # spec name -> its HELP and TYPE lines
# One owner's samples as walk_bound gives them (each one's labels and pod pairs) -> by spec name,
# the field names it reads and a head per sample and field (walk.Sink.add_fields): found with one
# lookup per owner a scrape, not one per series. An open split's entry is a plan per sample
# instead: its dict's keys in order and a head each (_Plan). Bounded by the heads they hold
# (~150 bytes each, so ~40 MB at most): targets that come and go make new keys, and 1,000 vLLMs
# hold ~170,000 heads.
_Plan = tuple[tuple[Any, ...], list[str]]
_Group = dict[str, Any]
_GROUPS: dict[tuple[tuple[tuple[str, ...], ...], tuple[PodLabels, ...]], _Group] = {}
_GROUP_HEADS_MAX = 262144
_group_heads = 0  # heads held in _GROUPS


def _count_group_heads(heads: int) -> None:
    """Counts heads a group gained; past the bound every group is dropped (a sink writing with
    one keeps it to the end of its write)."""
    global _group_heads
    _group_heads += heads
    if _group_heads > _GROUP_HEADS_MAX:
        _GROUPS.clear()
        _group_heads = 0


def _items(spec: MetricSpec, labels: Sequence[str], pod: PodLabels) -> list[tuple[str, str]]:
    items = list(zip(spec.labels, labels, strict=False))
    named = set(spec.labels)
    return items + [(k, v) for k, v in pod if k not in named]


class TextSink:
    """The lines as two lists, each line's head and its value; `text()` joins them. A family's
    HELP and TYPE lines are an entry of their own, with the value None."""

    def __init__(self) -> None:
        self.heads: list[str] = []
        self.values: list[Any] = []  # float or int; None after a family's HELP and TYPE text
        self._spec: MetricSpec | None = None
        self._deferred = ""  # an omit_if_empty family's HELP and TYPE, written with its first series
        self._bases: list[tuple[str, ...]] | None = None  # add_fields: the group's, held for `is`
        self._group: _Group = {}

    def begin(self, spec: MetricSpec, *, omit_if_empty: bool = False) -> None:
        self._spec = spec
        text = _HEADERS.get(spec.name)
        if text is None:
            text = _HEADERS[spec.name] = header(spec.name, spec.help, spec.type)
        if omit_if_empty:
            self._deferred = text
        else:
            self._deferred = ""
            self.heads.append(text)
            self.values.append(None)

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
        if self._deferred:
            self._write_deferred(len(self.heads))
        self.heads.append(text)
        self.values.append(value)

    def add_fields(
        self, samples: list[Any], fields: Fields, bases: list[tuple[str, ...]], pods: list[PodLabels]
    ) -> None:
        spec = self._spec
        if spec is None:
            return
        if spec.type == "histogram":  # a histogram's lines are its buckets'
            self._add_histograms(spec, samples, fields, bases, pods)
            return
        kept = self._group_of(bases, pods).get(spec.name)
        if kept is None:
            heads = [
                head(spec.name, _items(spec, series_labels(base, split), pod))
                for base, pod in zip(bases, pods, strict=True)
                for split, _ in fields
            ]
            kept = self._group[spec.name] = (tuple(field for _, field in fields), heads)
            _count_group_heads(len(heads))
        start = len(self.heads)
        if gather(samples, kept[0], kept[1], self.heads, self.values) and self._deferred:
            self._write_deferred(start)

    def add_keyed(
        self, spec: MetricSpec, samples: list[Any], bases: list[tuple[str, ...]], pods: list[PodLabels]
    ) -> None:
        if spec.type == "histogram" or spec.field is None:
            add_keyed_each(self, spec, samples, bases, pods)
            return
        group = self._group_of(bases, pods)
        plans = group.get(spec.name)  # a sample's: its dict's keys in order, a head each
        if plans is None or len(plans) != len(samples):
            plans = group[spec.name] = [None] * len(samples)
        field, start = spec.field, len(self.heads)
        at = put_keyed_all(samples, field, plans, 0, self.heads, self.values)
        while at >= 0:  # a sample whose plan is to be made (first seen, or its keys changed)
            by_key = getattr(samples[at], field)
            if isinstance(by_key, dict):
                plans[at] = plan = self._keyed_plan(spec, by_key, bases[at], pods[at])
                _count_group_heads(len(plan[1]))
                written = put_keyed(by_key, plan[0], plan[1], self.heads, self.values)
            else:
                written = False
            if not written:  # keys that do not find themselves (NaN): series by series
                add_keyed_each(self, spec, [samples[at]], [bases[at]], [pods[at]])
            at = put_keyed_all(samples, field, plans, at + 1, self.heads, self.values)
        if self._deferred and len(self.heads) > start:
            self._write_deferred(start)

    @staticmethod
    def _keyed_plan(spec: MetricSpec, by_key: dict[Any, Any], base: tuple[str, ...], pod: PodLabels) -> _Plan:
        order = binding.keyed_labels(spec, by_key)
        heads = [head(spec.name, _items(spec, series_labels(base, split), pod)) for _, split in order]
        return tuple(key for key, _ in order), heads

    def _group_of(self, bases: list[tuple[str, ...]], pods: list[PodLabels]) -> _Group:
        """The kept heads of the owner whose samples have these labels (walk_bound hands every
        family of an owner the same `bases` list: looked up once an owner)."""
        if bases is not self._bases:
            self._bases = bases
            key = (tuple(bases), tuple(pods))
            group = _GROUPS.get(key)
            if group is None:
                group = _GROUPS[key] = {}
            self._group = group
        return self._group

    def _write_deferred(self, at: int) -> None:
        self.heads.insert(at, self._deferred)
        self.values.insert(at, None)
        self._deferred = ""

    def _add_histograms(
        self, spec: MetricSpec, samples: list[Any], fields: Fields, bases: list[tuple[str, ...]],
        pods: list[PodLabels],
    ) -> None:  # fmt: skip
        """add_fields for a histogram family: each series' heads kept in the owner's group by its
        place (sample, field), as the scalar families' are, so that a series costs no label tuple,
        no key built and hashed, no lookup in _SERIES: ~80 series a scrape with 16 vLLMs.
        A series whose bounds changed (a restarted engine with other buckets) gets new heads."""
        group = self._group_of(bases, pods)
        places = len(samples) * len(fields)
        kept = group.get(spec.name)
        if kept is None or len(kept) != places:
            kept = group[spec.name] = [None] * places
        place = -1
        for sample, base, pod in zip(samples, bases, pods, strict=True):
            for split_value, field in fields:
                place += 1
                value = getattr(sample, field)
                if value is None:
                    continue
                if not isinstance(value, Histogram):  # not one: as add() would write it
                    self.add(series_labels(base, split_value), value, pod)
                elif value.buckets:
                    made = self._put_histogram(spec, kept[place], base, split_value, pod, value)
                    if made is not None:
                        kept[place] = made
                        _count_group_heads(len(made[1]) + 2)

    def _add_histogram(
        self, spec: MetricSpec, labels: Sequence[str], value: Histogram, pod: PodLabels
    ) -> None:
        base = tuple(labels)
        key = (spec.name, base, pod)
        made = self._put_histogram(spec, _SERIES.get(key), base, None, pod, value)
        if made is not None:
            if len(_SERIES) >= _SERIES_MAX:
                _SERIES.clear()
            _SERIES[key] = made

    def _put_histogram(
        self, spec: MetricSpec, series: _SeriesHeads | None, base: tuple[str, ...],
        split_value: str | tuple[str, str] | None, pod: PodLabels, value: Histogram,
    ) -> _SeriesHeads | None:  # fmt: skip
        """A histogram series' lines, from its kept bounds and heads `series` where they still
        fit; else (first seen, or its bounds changed: a restarted engine with other buckets)
        from new heads, returned for the caller to keep. None where the kept ones served."""
        if self._deferred:
            self._write_deferred(len(self.heads))
        heads, values = self.heads, self.values
        made = None
        if series is None or not put_buckets(value.buckets, series[0], series[1], heads, values):
            series = made = _series_heads(spec, series_labels(base, split_value), pod, value)
            heads += series[1]
            values += [c for _, c in value.buckets]
        if series[2]:
            heads += (series[2], series[3])
            values += (value.buckets[-1][1], value.sum)
        return made

    def text(self) -> bytes:
        return join(self.heads, self.values)


def _series_heads(spec: MetricSpec, labels: Sequence[str], pod: PodLabels, value: Histogram) -> _SeriesHeads:
    """A histogram series' upper bounds and heads: each bucket's, _count's and _sum's."""
    buckets, count, total = histogram_heads(spec.name, _items(spec, labels, pod), value)
    return tuple(le for le, _ in value.buckets), buckets, count, total


def write(snap: Snapshot) -> bytes:
    """The exposition of one snapshot (format 0.0.4)."""
    sink = TextSink()
    walk(snap, sink)
    return sink.text()
