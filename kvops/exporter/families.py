"""Snapshot -> prometheus_client metric families: the Sink of kvops.exporter.walk that
builds them (client_python's custom-collector pattern, fresh on each call).

`kvops exporter` writes its text straight from the snapshot (kvops.exporter.text_sink); these
families are the reference that text is compared with (generate_latest's bytes of them,
tests/exporter/test_text_sink.py), and what benchmarks/naive_exporter.py serves.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from kvops.exporter import walk
from kvops.exporter.histogram_family import HistogramSeriesFamily
from kvops.exporter.walk import PodLabels
from kvops.names import MetricSpec
from kvops.snapshot import (
    CollectorStatus,
    GpuSample,
    Histogram,
    HostSample,
    ProcessMemory,
    Snapshot,
    TargetSample,
)


def family(spec: MetricSpec) -> Metric:
    cls = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily, "histogram": HistogramSeriesFamily}
    return cls[spec.type](spec.family_name, spec.help, labels=list(spec.labels))


def add(metric: Metric, labels: Iterable[str], value: float | Histogram | None) -> None:
    if value is None:
        return
    if isinstance(value, Histogram):
        _add_histogram(metric, labels, value)
    else:
        metric.add_metric(list(labels), value)  # type: ignore[attr-defined]  # every family here has it


def _add_histogram(metric: Metric, labels: Iterable[str], value: Histogram) -> None:
    metric.add_series(list(labels), value)  # type: ignore[attr-defined]  # family() made it


class MetricSink:
    """walk's Sink that builds prometheus_client families, in `metrics`."""

    def __init__(self) -> None:
        self.metrics: list[Metric] = []
        self._omit_if_empty: list[Metric] = []

    def begin(self, spec: MetricSpec, *, omit_if_empty: bool = False) -> None:
        self.metrics.append(family(spec))
        if omit_if_empty:
            self._omit_if_empty.append(self.metrics[-1])

    def add(self, labels: Sequence[str], value: float | Histogram | None, pod: PodLabels = ()) -> None:
        metric = self.metrics[-1]
        if not pod:
            add(metric, labels, value)
            return
        series = metric.series if isinstance(metric, HistogramSeriesFamily) else None
        before = len(series) if series is not None else len(metric.samples)
        add(metric, labels, value)
        added = (
            [s[0] for s in series[before:]]
            if series is not None
            else [s.labels for s in metric.samples[before:]]
        )
        for sample_labels in added:
            sample_labels.update((k, v) for k, v in pod if k not in sample_labels)

    def add_fields(
        self, samples: list[Any], fields: walk.Fields, bases: list[tuple[str, ...]], pods: list[PodLabels]
    ) -> None:
        walk.add_fields_each(self, samples, fields, bases, pods)

    def add_keyed(
        self, spec: MetricSpec, samples: list[Any], bases: list[tuple[str, ...]], pods: list[PodLabels]
    ) -> None:
        walk.add_keyed_each(self, spec, samples, bases, pods)

    def result(self) -> list[Metric]:
        omit = {id(m) for m in self._omit_if_empty if not m.samples}
        return [m for m in self.metrics if id(m) not in omit]


def _families(walker: Any, *args: Any) -> list[Metric]:
    sink = MetricSink()
    walker(*args, sink)
    return sink.result()


def render(snap: Snapshot) -> list[Metric]:
    """All families for one snapshot."""
    return _families(walk.walk, snap)


def target_families(targets: list[TargetSample]) -> list[Metric]:
    return _families(walk.walk_targets, targets)


def gpu_families(gpus: list[GpuSample]) -> list[Metric]:
    return _families(walk.walk_gpus, gpus)


def host_families(host: HostSample) -> list[Metric]:
    return _families(walk.walk_host, host)


def process_families(procs: list[ProcessMemory]) -> list[Metric]:
    return _families(walk.walk_processes, procs)


def self_families(statuses: list[CollectorStatus]) -> list[Metric]:
    return _families(walk.walk_self, statuses)
