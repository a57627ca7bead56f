"""Snapshot -> prometheus_client metric families, for the vLLM/LMCache and self-observation parts.

Families are built fresh on each scrape (client_python's custom-collector pattern), so a
target or engine that disappears leaves no series behind. A None value is no sample.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from kvops import __version__, names
from kvops.names import MetricSpec
from kvops.snapshot import CollectorStatus, EngineSample, TargetSample


def family(spec: MetricSpec) -> GaugeMetricFamily | CounterMetricFamily:
    cls = CounterMetricFamily if spec.type == "counter" else GaugeMetricFamily
    return cls(spec.family_name, spec.help, labels=list(spec.labels))


def add(metric: Metric, labels: Iterable[str], value: float | None) -> None:
    if value is not None:
        metric.add_metric(list(labels), value)


def target_families(targets: list[TargetSample]) -> list[Metric]:
    up = family(names.TARGET_UP)
    duration = family(names.TARGET_SCRAPE_DURATION)
    usage = family(names.KV_CACHE_USAGE)
    queries = family(names.PREFIX_QUERIES)
    hits = family(names.PREFIX_HITS)
    tbytes = family(names.TRANSFER_BYTES)
    tseconds = family(names.TRANSFER_SECONDS)
    preempt = family(names.PREEMPTIONS)
    running = family(names.REQUESTS_RUNNING)
    waiting = family(names.REQUESTS_WAITING)
    tier = family(names.CPU_TIER_BYTES)
    lmcache: dict[str, Metric] = {}
    specs = names.by_name()

    for t in targets:
        add(up, [t.target], 1.0 if t.up else 0.0)
        add(duration, [t.target], t.scrape_seconds)
        for e in t.engines:
            base = _engine_labels(e)
            add(usage, base, e.kv_cache_usage)
            add(queries, [*base, "local"], e.local_queries)
            add(queries, [*base, "external"], e.external_queries)
            add(hits, [*base, "local"], e.local_hits)
            add(hits, [*base, "external"], e.external_hits)
            add(tbytes, [*base, "store"], e.store_bytes)
            add(tbytes, [*base, "load"], e.load_bytes)
            add(tseconds, [*base, "store"], e.store_seconds)
            add(tseconds, [*base, "load"], e.load_seconds)
            add(preempt, base, e.preemptions)
            add(running, base, e.requests_running)
            add(waiting, base, e.requests_waiting)
            add(tier, base, e.cpu_tier_bytes)
        for s in t.lmcache:
            for name, value in s.values.items():
                metric = lmcache.get(name)
                if metric is None:
                    metric = lmcache[name] = family(specs[name])
                add(metric, [s.target, s.model_name, s.worker_id], value)
    return [up, duration, usage, queries, hits, tbytes, tseconds, preempt, running, waiting, tier,
            *lmcache.values()]  # fmt: skip


def _engine_labels(e: EngineSample) -> list[str]:
    return [e.target, e.model_name, e.engine]


def self_families(statuses: list[CollectorStatus]) -> list[Metric]:
    success = family(names.COLLECTOR_SUCCESS)
    duration = family(names.COLLECTOR_DURATION)
    for s in statuses:
        add(success, [s.name], 1.0 if s.success else 0.0)
        add(duration, [s.name], s.duration_seconds)
    build = family(names.BUILD_INFO)
    add(build, [__version__], 1.0)
    return [success, duration, build]
