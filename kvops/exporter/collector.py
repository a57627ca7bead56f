"""One scrape: every source concurrently, each behind its own error boundary and deadline.

Targets are fetched together in the scraping thread (kvops.sources.multi) and parsed as each
arrives; hardware collectors run in worker threads meanwhile (a driver call may hang).

Like node_exporter, each source reports kvops_collector_success / _duration_seconds, so a
broken or slow source costs only its own series. Sources are pulled on demand, when
Prometheus scrapes: there is no background timer and no stale cache.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any, Protocol

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from kvops.errors import UsageError, one_line
from kvops.exporter.config import DEFAULT_TIMEOUT
from kvops.exporter.families import self_families, target_families
from kvops.snapshot import CollectorStatus, GpuSample, HostSample, Snapshot, TargetSample
from kvops.sources.http import FetchError, FetchOptions, normalise_target
from kvops.sources.multi import MultiFetcher
from kvops.sources.target import TargetScraper

log = logging.getLogger(__name__)


class _GuardedSource:
    """A hardware/host collector with at most one call in flight (a hung driver call must not
    pile up threads) and its failures logged once per distinct message."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.name: str = source.name
        self._lock = threading.Lock()
        self._last_error: str | None = None

    def run(self) -> Any:
        if not self._lock.acquire(blocking=False):
            raise RuntimeError("previous collection still in flight")
        try:
            return self.source.collect()
        finally:
            self._lock.release()

    def note(self, error: str | None) -> None:
        if error != self._last_error:
            if error is None:
                log.info("collector %s recovered", self.name)
            else:
                log.warning("collector %s: %s", self.name, error)
            self._last_error = error


def default_hardware_sources() -> list[Any]:
    """The collectors that turn on by themselves: each reports success 0 where its library
    does not work. Modules missing from this build are skipped."""
    sources: list[Any] = []
    for module_name, class_name in (
        ("kvops.collectors.host", "HostCollector"),
        ("kvops.collectors.nvidia", "NvidiaCollector"),
        ("kvops.collectors.amd", "AmdCollector"),
    ):
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        sources.append(getattr(module, class_name)())
    return sources


class TargetDiscovery(Protocol):
    """Finds targets at run time (e.g. vLLM pods on this node). `targets()` is called on every
    scrape, so it answers from its own cache; it may raise, which costs only discovered targets."""

    name: str

    def targets(self) -> list[str]: ...


# Threads are created on demand up to this many: one per target and source in flight.
MAX_WORKERS = 256


class ScrapeRunner:
    def __init__(
        self,
        targets: list[TargetScraper],
        sources: list[Any],
        timeout: float = DEFAULT_TIMEOUT,
        discovery: TargetDiscovery | None = None,
        discovered_options: FetchOptions | None = None,
        process_tracker: Any = None,
    ):
        self.static_targets = targets
        self.sources = [_GuardedSource(s) for s in sources]
        self.timeout = timeout
        self.discovery = discovery
        self._discovered_options = discovered_options
        self._discovered: dict[str, TargetScraper] = {}
        self._discovery_error: str | None = None
        self._lmcache_targets: set[str] = set()
        # Memory of local targets' process trees (kvops.collectors.procs.ProcessTracker).
        self.process_tracker = process_tracker
        self._process_guard = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="kvops-scrape")
        self._multi = MultiFetcher()

    @property
    def targets(self) -> list[TargetScraper]:
        return [*self.static_targets, *self._discovered.values()]

    def _refresh_discovered(self) -> CollectorStatus | None:
        if self.discovery is None:
            return None
        start = time.monotonic()
        try:
            urls = self.discovery.targets()
        except Exception as exc:  # keep the last known targets: a flaky API must not drop them
            error = one_line(exc)
            if error != self._discovery_error:
                log.warning("target discovery %s: %s", self.discovery.name, error)
            self._discovery_error = error
            return CollectorStatus(self.discovery.name, False, time.monotonic() - start, error)
        self._discovery_error = None
        static = {t.target for t in self.static_targets}
        wanted: dict[str, str] = {}
        for url in urls:
            try:
                normalised = normalise_target(url)
            except UsageError as exc:
                log.warning("target discovery %s: skipping %s", self.discovery.name, exc)
                continue
            if normalised not in static:
                wanted[normalised] = url
        for gone in set(self._discovered) - set(wanted):
            self._discovered.pop(gone).close()  # its series disappear with it
        for normalised, url in wanted.items():
            if normalised not in self._discovered:
                self._discovered[normalised] = TargetScraper(url, self._discovered_options)
        return CollectorStatus(self.discovery.name, True, time.monotonic() - start)

    def snapshot(self, timeout: float | None = None) -> Snapshot:
        budget = self.timeout if timeout is None else min(timeout, self.timeout)
        start = time.monotonic()
        deadline = start + budget
        discovery_status = self._refresh_discovered()
        targets = self.targets
        source_futures = [self._pool.submit(_timed, s.run) for s in self.sources]
        process_future = self._submit_processes([t.target for t in targets])
        snap = Snapshot(time=start)
        snap.targets = self._scrape_targets(targets, deadline, budget)
        pending = [*source_futures, *([process_future] if process_future else [])]
        wait_futures(pending, timeout=max(0.0, deadline - time.monotonic()))
        self._target_statuses(snap, time.monotonic() - start)
        if discovery_status is not None:
            snap.collectors.append(discovery_status)

        for source, future in zip(self.sources, source_futures, strict=True):
            status = self._collect_source(source, future, budget, snap)
            snap.collectors.append(status)
        if process_future is not None and process_future.done() and process_future.exception() is None:
            snap.processes = process_future.result()
            from kvops.collectors.procs import attach_gpus

            for pm in snap.processes:
                attach_gpus(pm, snap.gpus)
        return snap

    def _scrape_targets(
        self, targets: list[TargetScraper], deadline: float, budget: float
    ) -> list[TargetSample]:
        """All targets fetched at once in this thread (kvops.sources.multi), then each parsed.
        While another scrape holds the multi handle (two Prometheus servers at once), this
        one fetches in threads instead."""
        claimed = [t for t in targets if t.claim()]
        samples: dict[int, TargetSample] = {}

        def done(index: int, outcome: str | FetchError, seconds: float) -> None:
            # Parsed as it arrives, while the other fetches go on; the target is free again.
            samples[index] = claimed[index].finish(outcome, seconds)

        try:
            together = self._multi.fetch([(t.client, t.url) for t in claimed], deadline, done)
        except Exception:  # a bug in the fetch loop costs this scrape's targets, not the exporter
            log.exception("fetching the targets failed")
            together = True
        if not together:
            for t in claimed:
                t.unclaim()
            return self._scrape_in_threads(targets, deadline, budget)
        for index, t in enumerate(claimed):
            if index not in samples:
                samples[index] = t.finish(FetchError("internal error while fetching"), 0.0)
        by_target = {id(t): samples[i] for i, t in enumerate(claimed)}
        return [by_target.get(id(t)) or t.busy() for t in targets]

    def _scrape_in_threads(
        self, targets: list[TargetScraper], deadline: float, budget: float
    ) -> list[TargetSample]:
        futures = [self._pool.submit(t.scrape, deadline) for t in targets]
        wait_futures(futures, timeout=max(0.0, deadline - time.monotonic()))
        return [
            f.result()
            if f.done()
            else TargetSample(t.target, up=False, error=f"timed out after {budget:g} s")
            for t, f in zip(targets, futures, strict=True)
        ]

    def _submit_processes(self, targets: list[str]) -> Future[Any] | None:
        if self.process_tracker is None or not self._process_guard.acquire(blocking=False):
            return None

        def run() -> Any:
            try:
                return self.process_tracker.collect(targets, [])
            except Exception as exc:
                log.debug("process memory: %s", exc)
                raise
            finally:
                self._process_guard.release()

        return self._pool.submit(run)

    def _target_statuses(self, snap: Snapshot, elapsed: float) -> None:
        if not snap.targets:
            return
        durations = [t.scrape_seconds for t in snap.targets if t.scrape_seconds is not None]
        duration = max(durations) if len(durations) == len(snap.targets) else elapsed
        down = [t for t in snap.targets if not t.up]
        error = f"{len(down)} of {len(snap.targets)} targets down" if down else None
        snap.collectors.append(CollectorStatus("vllm", not down, duration, error))
        # Targets that served LMCache series; forgotten when they leave the target list
        # (discovery churn must not grow this set for ever).
        self._lmcache_targets &= {t.target for t in snap.targets}
        self._lmcache_targets.update(t.target for t in snap.targets if t.lmcache)
        lm = [t for t in snap.targets if t.target in self._lmcache_targets]
        if lm:
            lm_down = [t for t in lm if not t.up]
            lm_error = f"{len(lm_down)} of {len(lm)} LMCache targets down" if lm_down else None
            snap.collectors.append(CollectorStatus("lmcache", not lm_down, duration, lm_error))

    def _collect_source(
        self, source: _GuardedSource, future: Future[tuple[float, Any]], budget: float, snap: Snapshot
    ) -> CollectorStatus:
        if not future.done():
            error = f"timed out after {budget:g} s"
            source.note(error)
            return CollectorStatus(source.name, False, budget, error)
        try:
            duration, value = future.result()
        except _TimedFailure as failure:
            error = one_line(failure.error)
            source.note(error)
            return CollectorStatus(source.name, False, failure.duration, error)
        if isinstance(value, HostSample):
            snap.host = value
        elif isinstance(value, list) and all(isinstance(g, GpuSample) for g in value):
            snap.gpus.extend(value)
        source.note(None)
        return CollectorStatus(source.name, True, duration)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        for t in self.targets:
            t.close()
        self._multi.close()
        self._discovered.clear()
        for s in self.sources:
            close = getattr(s.source, "close", None)
            if close is not None:
                close()


class _TimedFailure(Exception):
    def __init__(self, error: BaseException, duration: float) -> None:
        super().__init__(str(error))
        self.error = error
        self.duration = duration


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.monotonic()
    try:
        value = fn()
    except Exception as exc:
        raise _TimedFailure(exc, time.monotonic() - start) from exc
    return time.monotonic() - start, value


def _hardware_families() -> Any:
    try:
        return importlib.import_module("kvops.exporter.hardware_families")
    except ModuleNotFoundError as exc:  # hardware collectors not in this build
        if exc.name != "kvops.exporter.hardware_families":
            raise
        return None


def render(snap: Snapshot) -> list[Metric]:
    """All families for one snapshot."""
    metrics = target_families(snap.targets)
    hw = _hardware_families()
    if hw is not None:
        metrics += hw.gpu_families(snap.gpus)
        if snap.host is not None:
            metrics += hw.host_families(snap.host)
        metrics += hw.process_families(snap.processes)
    metrics += self_families(snap.collectors)
    return metrics


class SnapshotCollector(Collector):
    """prometheus_client Collector over a ScrapeRunner (for registries and tests)."""

    def __init__(self, runner: ScrapeRunner) -> None:
        self.runner = runner

    def describe(self) -> list[Metric]:
        return []  # nothing is fetched at registration

    def collect(self) -> Iterator[Metric]:
        yield from render(self.runner.snapshot())
