"""One scrape round: every source concurrently, each behind its own error boundary and deadline.

Targets are fetched together in the scraping thread (kvops.transport.multi) and parsed as each
arrives; hardware collectors run in worker threads meanwhile (a driver call may hang), and the
sources that read only procfs and sysfs (host memory, process trees) run on the scraping thread
once the requests are out, before the answers are read: a worker's wake-up and its GIL
hand-offs cost more than their reads (docs/collectors.md, "Which thread reads what").

Like node_exporter, each source reports kvops_collector_success / _duration_seconds, so a
broken or slow source costs only its own series. Sources are pulled on demand, when
Prometheus scrapes (or `kvops top` refreshes): there is no background timer.

One guard keeps work from piling up, single flight: a scrape that arrives while a round is
running joins it (waiting within its own deadline) and serves its result, so two Prometheus
servers of an HA pair see the same data and neither sees a live target down; a round that
ended less than `min_interval` ago is served again, so upstream fetches per second stay
bounded whatever the number of scrapers. A hardware call that outlives its round (a hung
driver) is joined by the next round in the same way instead of being called again, and a
large page's parse that outlives its round keeps its target out of later rounds (down, with
the reason) until it ends.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from typing import Protocol

from kvops.errors import UsageError, one_line
from kvops.scrape.target import PARSE_OUT_OF_TIME, PARSE_STILL_RUNNING, TargetScraper
from kvops.snapshot import (
    Collector,
    CollectorStatus,
    GpuSample,
    HostSample,
    ProcessMemory,
    Reading,
    Snapshot,
    TargetSample,
)
from kvops.termsafe import visible
from kvops.transport.http import FetchError, FetchOptions, normalise_target
from kvops.transport.multi import MultiFetcher

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 5.0


class ProcessSource(Protocol):
    """Memory of local targets' process trees (kvops.collectors.procs.ProcessTracker).
    `attach_gpus` names the GPUs each tree uses, once the round's GPUs are read. `collect`
    reads procfs only (no call that can hang): it runs on the round's thread."""

    def collect(self, targets: list[str], gpus: list[GpuSample]) -> list[ProcessMemory]: ...

    def attach_gpus(self, processes: list[ProcessMemory], gpus: list[GpuSample]) -> None: ...

    def close(self) -> None: ...


class TargetDiscovery(Protocol):
    """Finds targets at run time (e.g. vLLM pods on this node). `targets()` is called on every
    round, so it answers from its own cache; it may raise, which costs only discovered targets."""

    name: str

    def targets(self) -> list[str]: ...


# Threads for hardware calls: one per source at most (single flight), so this is a ceiling.
MAX_WORKERS = 32
# Pages longer than this are parsed in a worker thread (a real vLLM page is 60-80 kB; 45,000
# label sets are 3.4 MB and a second of parse, during which one thread fetches nothing else).
PARSE_INLINE_CHARS = 256 * 1024
# Process trees are read on the round's thread for at most this many targets (_run_round).
INLINE_PROCESS_TARGETS = 64
# A parse looks at the clock every few thousand lines: it ends this soon after the deadline.
_PARSE_GRACE = 0.1


@dataclass
class _Round:
    started: float
    done: threading.Event = field(default_factory=threading.Event)
    snapshot: Snapshot | None = None


class _Timed:
    """A call's outcome and how long it took, measured in the worker thread."""

    def __init__(self, fn: Callable[[], object]) -> None:
        start = time.monotonic()
        self.error: BaseException | None = None
        self.value: object = None
        try:
            self.value = fn()
        except Exception as exc:
            self.error = exc
        self.seconds = time.monotonic() - start


class _Inline:
    """Calls for the round's own thread (sources that never block), each a Future that `run`
    completes once, so that the round reads them as it reads a worker's."""

    def __init__(self) -> None:
        self._calls: list[tuple[Callable[[], object], Future[_Timed]]] = []

    def add(self, fn: Callable[[], object]) -> Future[_Timed]:
        future: Future[_Timed] = Future()
        self._calls.append((fn, future))
        return future

    def run(self) -> None:
        calls, self._calls = self._calls, []
        for fn, future in calls:
            future.set_result(_Timed(fn))


def _url_for(target: TargetScraper, probe: bool) -> str:
    """What a pass fetches for the target: its probe's filtered page, or its page this round."""
    if probe and target.probe_url is not None:
        return target.probe_url
    return target.fetch_url()


class ScrapeRunner:
    def __init__(
        self,
        targets: list[TargetScraper],
        sources: list[Collector],
        timeout: float = DEFAULT_TIMEOUT,
        discovery: TargetDiscovery | None = None,
        discovered_options: FetchOptions | None = None,
        process_tracker: ProcessSource | None = None,
        min_interval: float = 0.0,
    ):
        self.static_targets = targets
        self.sources = sources
        self.timeout = timeout
        self.discovery = discovery
        self.min_interval = min_interval
        self._discovered_options = discovered_options
        self._discovered: dict[str, TargetScraper] = {}
        self._discovery_error: str | None = None
        self._identities: dict[str, dict[str, str]] = {}  # normalised target -> pod labels
        self._lmcache_targets: set[str] = set()
        self.process_tracker = process_tracker
        self._source_errors: dict[str, str | None] = {}
        self._in_flight: dict[str, Future[_Timed]] = {}  # hardware calls, by source
        # Large-page parses that outlived their round, by target: a target is not fetched again
        # until its parse ends (two rounds must never read into one TargetScraper at once).
        self._late_parses: dict[str, Future[TargetSample]] = {}
        self._round_lock = threading.Lock()
        self._round: _Round | None = None
        self.rounds = 0  # rounds run (each fetches every target once)
        self._pool = ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="kvops-scrape")
        self._multi = MultiFetcher()

    @property
    def targets(self) -> list[TargetScraper]:
        return [*self.static_targets, *self._discovered.values()]

    def snapshot(self, timeout: float | None = None) -> Snapshot:
        """A snapshot within `timeout` seconds (at most the runner's own): the round in flight
        if there is one, a round that ended under `min_interval` ago, or a new round."""
        budget = self.timeout if timeout is None else min(timeout, self.timeout)
        now = time.monotonic()
        deadline = now + budget
        with self._round_lock:
            current = self._round
            fresh = current is not None and (
                not current.done.is_set() or now - current.started < self.min_interval
            )
            if not fresh:
                current = self._round = _Round(now)
        assert current is not None
        if fresh:
            if current.done.wait(max(0.0, deadline - time.monotonic())) and current.snapshot is not None:
                return copy.copy(current.snapshot)
            return self._timed_out(now, budget)
        try:
            current.snapshot = self._run_round(now, deadline, budget)
            return copy.copy(current.snapshot)
        finally:
            current.done.set()

    def _timed_out(self, start: float, budget: float) -> Snapshot:
        """For a scrape whose deadline passed while it waited for the round in flight."""
        snap = Snapshot(time=start)
        error = f"timed out after {budget:g} s"
        snap.targets = [TargetSample(t.target, up=False, error=error) for t in self.targets]
        self._target_statuses(snap, budget)
        return snap

    def _run_round(self, start: float, deadline: float, budget: float) -> Snapshot:
        self.rounds += 1
        discovery_status = self._refresh_discovered()
        targets = self.targets
        inline = _Inline()  # run by the fetch while the targets answer (kvops.transport.multi)
        source_calls = [
            inline.add(s.collect) if getattr(s, "inline", False) else self._call(s.name, s.collect)
            for s in self.sources
        ]
        process_call = None
        if self.process_tracker is not None:
            tracker, names = self.process_tracker, [t.target for t in targets]

            def read() -> list[ProcessMemory]:
                return tracker.collect(names, [])

            # Its reads grow with the local targets (each tree's /proc/PID/status): past a few
            # dozen they would hold the answers back (30,000 targets: seconds), so a worker.
            few = len(names) <= INLINE_PROCESS_TARGETS
            process_call = inline.add(read) if few else self._call("processes", read)
        snap = Snapshot(time=start)
        try:
            snap.targets = self._scrape_targets(targets, deadline, inline.run)
        finally:
            inline.run()  # if the fetch did not get to it
        for sample in snap.targets:  # a discovered pod's labels (kvops.transport.kubernetes)
            sample.identity = self._identities.get(sample.target, {})
        pending = [*source_calls, *([process_call] if process_call else [])]
        wait_futures(pending, timeout=max(0.0, deadline - time.monotonic()))
        self._target_statuses(snap, time.monotonic() - start)
        if discovery_status is not None:
            snap.collectors.append(discovery_status)
        for source, call in zip(self.sources, source_calls, strict=True):
            snap.collectors.append(self._place(source.name, call, budget, snap))
        if process_call is not None and process_call.done() and self.process_tracker is not None:
            outcome = process_call.result()
            if outcome.error is None:
                snap.processes = outcome.value  # type: ignore[assignment]
                self.process_tracker.attach_gpus(snap.processes, snap.gpus)
            else:
                log.debug("process memory: %s", one_line(outcome.error))
        return snap

    def _call(self, key: str, fn: Callable[[], object]) -> Future[_Timed]:
        """fn in a worker, or the call of `key` still running from an earlier round (a hung
        driver call is waited for again, never called twice)."""
        running = self._in_flight.get(key)
        if running is not None and not running.done():
            return running
        future = self._pool.submit(_Timed, fn)
        self._in_flight[key] = future
        return future

    def _scrape_targets(
        self, targets: list[TargetScraper], deadline: float, meanwhile: Callable[[], None] | None = None
    ) -> list[TargetSample]:
        """All targets fetched at once in this thread (kvops.transport.multi), each parsed as it
        arrives while the others go on; a large page is parsed in a worker, so that its parse
        does not hold up the other fetches. Every parse ends by the deadline (TargetScraper.
        finish): a page that cannot be read in time is abandoned, its target shown down.
        A second pass fetches the whole page of a target whose filtered page came back empty,
        and the filtered page of a target due a probe (kvops.scrape.page_filter): a target's
        fetches in a round follow one another, never overlap. `meanwhile` is run once by the
        first pass's fetch, while the targets answer."""
        samples: dict[int, TargetSample] = {}
        parsing: dict[int, Future[TargetSample]] = {}
        probing: set[int] = set()  # this pass fetches their probe_url; its outcome is no sample
        late = self._late_parses
        for name, future in list(late.items()):
            if future.done():
                del late[name]
        for index, scraper in enumerate(targets):
            if scraper.target in late:
                samples[index] = TargetSample(scraper.target, up=False, error=PARSE_STILL_RUNNING)

        def done(index: int, outcome: str | FetchError, seconds: float) -> None:
            target = targets[index]
            if index in probing:
                target.probed(outcome, deadline)
            elif isinstance(outcome, str) and len(outcome) > PARSE_INLINE_CHARS:
                parsing[index] = self._pool.submit(target.finish, outcome, seconds, deadline)
            else:
                samples[index] = target.finish(outcome, seconds, deadline)

        indices = [i for i in range(len(targets)) if i not in samples]
        for _ in range(2):
            jobs = [(targets[i].client, _url_for(targets[i], i in probing)) for i in indices]

            def arrived(n: int, outcome: str | FetchError, s: float, of: list[int] = indices) -> None:
                done(of[n], outcome, s)

            try:
                self._multi.fetch(jobs, deadline, arrived, meanwhile)
            except Exception:  # a bug in the fetch loop costs this round's targets, not the exporter
                log.exception("fetching the targets failed")
            meanwhile = None  # called by the first pass's fetch, whatever became of it
            wait_futures(list(parsing.values()), timeout=max(0.0, deadline - time.monotonic()) + _PARSE_GRACE)
            for index, future in parsing.items():
                if future.done():
                    samples[index] = future.result()
                else:  # its parse stops at its next look at the clock; until then, not fetched
                    samples[index] = TargetSample(targets[index].target, up=False, error=PARSE_OUT_OF_TIME)
                    late[targets[index].target] = future
            parsing.clear()
            read = [i for i in indices if i in samples and targets[i].target not in late]  # parses ended
            again = [i for i in read if i not in probing and targets[i].refetch_whole]
            # A probe follows a whole page read this round (a down target is not probed).
            probing = {i for i in indices if i in samples and samples[i].up and targets[i].probe_url}
            indices = sorted({*again, *probing})
            if not indices:
                break
        return [
            samples.get(i) or t.finish(FetchError("internal error while fetching"), 0.0)
            for i, t in enumerate(targets)
        ]

    def _refresh_discovered(self) -> CollectorStatus | None:
        if self.discovery is None:
            return None
        start = time.monotonic()
        name = self.discovery.name
        try:
            urls = self.discovery.targets()
        except Exception as exc:  # keep the last known targets: a flaky API must not drop them
            error = one_line(exc)
            if error != self._discovery_error:
                log.warning("target discovery %s: %s", name, visible(error))
            self._discovery_error = error
            return CollectorStatus(name, False, time.monotonic() - start, error)
        self._discovery_error = None
        static = {t.target for t in self.static_targets}
        wanted: dict[str, str] = {}
        for url in urls:
            try:
                normalised = normalise_target(url)
            except UsageError as exc:
                log.warning("target discovery %s: skipping %s", name, visible(exc))
                continue
            if normalised not in static:
                wanted[normalised] = url
        for gone in set(self._discovered) - set(wanted):
            self._discovered.pop(gone).close()  # its series disappear with it
        for normalised, url in wanted.items():
            if normalised not in self._discovered:
                self._discovered[normalised] = TargetScraper(url, self._discovered_options)
        identities = getattr(self.discovery, "identities", None)  # only Kubernetes has pods
        by_url = identities() if identities is not None else {}
        self._identities = {n: by_url[url] for n, url in wanted.items() if url in by_url}
        return CollectorStatus(name, True, time.monotonic() - start)

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

    def _place(self, name: str, call: Future[_Timed], budget: float, snap: Snapshot) -> CollectorStatus:
        """The source's reading into the snapshot, and its collector status."""
        if not call.done():
            return self._status(name, False, budget, f"timed out after {budget:g} s")
        outcome = call.result()
        if outcome.error is not None:
            return self._status(name, False, outcome.seconds, one_line(outcome.error))
        reading: Reading = outcome.value  # type: ignore[assignment]
        if isinstance(reading, HostSample):
            snap.host = reading
        else:
            snap.gpus.extend(reading)
        return self._status(name, True, outcome.seconds, None)

    def _status(self, name: str, ok: bool, seconds: float, error: str | None) -> CollectorStatus:
        # Logged when a source fails or recovers, not on every round.
        if error != self._source_errors.get(name):
            if error is None:
                log.info("collector %s recovered", name)
            else:
                log.warning("collector %s: %s", name, visible(error))
        self._source_errors[name] = error
        return CollectorStatus(name, ok, seconds, error)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        for t in self.targets:
            t.close()
        self._multi.close()
        self._discovered.clear()
        for s in self.sources:
            s.close()
        if self.process_tracker is not None:  # its kept status files, its NUMA reader
            self.process_tracker.close()
