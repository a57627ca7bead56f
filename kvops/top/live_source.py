"""Live scrapes for `kvops top URL ...`: each URL may be a vLLM (or LMCache) or a `kvops
exporter`; the host and GPU collectors of this machine run beside them.

Scrapes go through the sources' ScrapeRunner (concurrent, one deadline, one fetch in flight
per target), so top and the exporter see a target the same way. A URL that serves kvops_*
series is read as an exporter: its targets, GPUs and host replace the placeholder sample
(and its GPUs and host are shown instead of this machine's, since they are where it runs).
"""

from __future__ import annotations

import logging

from kvops.collectors.procs import ProcessTracker
from kvops.collectors.registry import default_collectors
from kvops.engines import registry
from kvops.exposition.histograms import sample_names
from kvops.exposition.parser import ParseResult
from kvops.frames import kvops_exposition
from kvops.names import bound
from kvops.scrape.runner import ScrapeRunner
from kvops.scrape.target import TargetScraper
from kvops.snapshot import Snapshot, TargetSample
from kvops.top.board import MAX_ROWS
from kvops.transport.http import FetchError, FetchOptions

log = logging.getLogger(__name__)


# A set, not a predicate: the parser's fast path tests membership in C.
# Every family kvops reads, less the histograms top computes no figure from (the exporter passes
# them through), in vLLM's names and in a kvops exporter's: on a vLLM 0.33 page the lines top
# reads go from 113 to 48, and benchmarks/top_cpu.py from 3.4-3.8 % to 2.8-3.1 % of a core.
_PASS_THROUGH = registry.PASS_THROUGH_HISTOGRAMS | {
    name
    for spec in bound("engine")
    if spec.type == "histogram" and {spec.field, *(f for _, f in spec.split)} & registry.PASS_THROUGH_FIELDS
    for name in sample_names(spec.name)
}
# The simulator says so on its page: its offload tier is then not judged against this host's
# RAM and /dev/shm (`kvops top` on `kvops sim` raised red alarms for a tier nobody allocated).
SIM_INFO = "kvops_sim_info"
_WANTED = (registry.WANTED | kvops_exposition.EXPORTED | {SIM_INFO}) - _PASS_THROUGH


class UrlScraper(TargetScraper):
    """A TargetScraper for a URL that may be a vLLM or a kvops exporter. After an exporter
    scrape, `exporter` holds what it served."""

    wanted = _WANTED

    def __init__(self, url: str, options: FetchOptions | None = None, probe: bool = True) -> None:
        super().__init__(url, options, probe)
        self.exporter: Snapshot | None = None
        self.simulated = False  # the last page read was kvops sim's

    # _trim() bounds what follows the parse: a fraction of it, not the exporter's encoding.
    work_after_parse = 1.0

    def finish(
        self, outcome: str | FetchError, fetch_seconds: float, deadline: float | None = None
    ) -> TargetSample:
        self.exporter = None  # set again by interpret() if this scrape got an exporter's page
        return super().finish(outcome, fetch_seconds, deadline)

    def interpret(self, result: ParseResult, started: float) -> TargetSample:
        _trim(result)
        self.simulated = bool(result.samples.get(SIM_INFO))
        if kvops_exposition.has_kvops_samples(result):
            self.exporter = kvops_exposition.decode(result, started)
            return TargetSample(self.target, up=True)
        return registry.normalise(result, self.target)


# The dashboard keeps at most MAX_ROWS engines (board.py): samples of a family beyond a few
# per kept engine are dropped before they become engines (a hostile page of 200k label sets
# made top normalise 200k engines a second). The exporter keeps its own limits.
SAMPLES_PER_FAMILY = 8 * MAX_ROWS


def _trim(result: ParseResult) -> None:
    for samples in result.samples.values():
        if len(samples) > SAMPLES_PER_FAMILY:
            del samples[SAMPLES_PER_FAMILY:]


class LiveSource:
    live = True

    def __init__(
        self, urls: list[str], timeout: float, hardware: bool = True, one_shot: bool = False
    ) -> None:
        """`one_shot`: `--once`, two frames and out: each page fetched whole, never probed for a
        filtered one (kvops.scrape.page_filter)."""
        # The same target given twice ("host:8000" and "http://host:8000/", say) is scraped once.
        self.scrapers: list[UrlScraper] = []
        seen: set[str] = set()  # a set: comparing each URL with every earlier one took minutes at 30,000
        for url in urls:
            scraper = UrlScraper(url, probe=not one_shot)
            if scraper.target not in seen:
                seen.add(scraper.target)
                self.scrapers.append(scraper)
            else:
                scraper.close()
        sources = default_collectors() if hardware else []
        # Local targets' processes, as the exporter tracks them: which GPUs an engine uses is
        # what the offload cross-check (kvops.rates) compares its loaded bytes against.
        tracker = ProcessTracker() if hardware else None
        self.runner = ScrapeRunner(
            self.scrapers,  # type: ignore[arg-type]
            sources,
            timeout=timeout,
            process_tracker=tracker,
        )
        self.description = f"{len(urls)} URL(s), every scrape live"

    @property
    def simulated_targets(self) -> frozenset[str]:
        """Targets whose page is kvops sim's: their tiers are simulated, this host is not."""
        return frozenset(s.target for s in self.scrapers if s.simulated)

    def next(self) -> Snapshot:
        snap = self.runner.snapshot()
        exporters = {s.target: s.exporter for s in self.scrapers if s.exporter is not None}
        if not exporters:
            return snap
        targets: list[TargetSample] = []
        gpus, host = [], None
        processes = [p for p in snap.processes if p.target not in exporters]
        for sample in snap.targets:
            served = exporters.get(sample.target) if sample.up else None
            if served is None:
                targets.append(sample)
                continue
            targets.extend(served.targets)
            gpus.extend(served.gpus)
            processes.extend(served.processes)
            host = host or served.host
        snap.targets = targets
        snap.gpus = gpus
        snap.host = host
        snap.processes = processes
        return snap

    def close(self) -> None:
        self.runner.close()
