"""Snapshot -> prometheus_client metric families, for the engine/LMCache and self-observation parts.

Families are built fresh on each scrape (client_python's custom-collector pattern), so a
target or engine that disappears leaves no series behind. A None value is no sample. Which
field feeds which family is the spec's binding (kvops/names.py), read by kvops.binding.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from kvops import __version__, binding, names
from kvops.exporter.histogram_family import HistogramSeriesFamily
from kvops.names import MetricSpec, Owner
from kvops.snapshot import CollectorStatus, Histogram, TargetSample


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


def bound_families(owner: Owner, samples: Sequence[Any]) -> list[Metric]:
    """One family per spec bound to `owner`, with every present value of every sample."""
    out: list[Metric] = []
    bases = [binding.owner_label_values(owner, sample) for sample in samples]
    for spec in names.bound(owner):
        metric = family(spec)
        field = binding.plain_field(spec)
        if field is not None:
            for sample, base in zip(samples, bases, strict=True):
                value = getattr(sample, field)
                if value is not None:
                    add(metric, base, value)
        else:
            for sample, base in zip(samples, bases, strict=True):
                for split_value, value in binding.values(spec, sample):
                    add(metric, base if split_value is None else [*base, split_value], value)
        out.append(metric)
    return out


def target_families(targets: list[TargetSample]) -> list[Metric]:
    up = family(names.TARGET_UP)
    duration = family(names.TARGET_SCRAPE_DURATION)
    for t in targets:
        add(up, [t.target], 1.0 if t.up else 0.0)
        add(duration, [t.target], t.scrape_seconds)
    engines = [e for t in targets for e in t.engines]
    lmcache = [s for t in targets for s in t.lmcache]
    # LMCache families only where an LMCache was seen: no empty HELP/TYPE for every vLLM.
    cache = [m for m in bound_families("lmcache", lmcache) if m.samples]
    out = [up, duration, *bound_families("engine", engines), *cache]
    _add_pod_labels(out, {t.target: t.identity for t in targets if t.identity})
    return out


def _add_pod_labels(metrics: list[Metric], identity: dict[str, dict[str, str]]) -> None:
    """A discovered pod's namespace, pod and container on every series of its target (as
    dcgm-exporter and AMD's device-metrics-exporter label a pod's series)."""
    if not identity:
        return
    for metric in metrics:
        series = metric.series if isinstance(metric, HistogramSeriesFamily) else []
        label_sets = [s.labels for s in metric.samples] if not series else [labels for labels, _ in series]
        for sample_labels in label_sets:
            labels = identity.get(sample_labels.get("target", ""))
            if labels:
                sample_labels.update((k, v) for k, v in labels.items() if v and k not in sample_labels)


def self_families(statuses: list[CollectorStatus]) -> list[Metric]:
    success = family(names.COLLECTOR_SUCCESS)
    duration = family(names.COLLECTOR_DURATION)
    for s in statuses:
        add(success, [s.name], 1.0 if s.success else 0.0)
        add(duration, [s.name], s.duration_seconds)
    build = family(names.BUILD_INFO)
    add(build, [__version__], 1.0)
    return [success, duration, build]
