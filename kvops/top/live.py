"""Live scrapes for `kvops top URL ...`: each URL may be a vLLM (or LMCache) or a `kvops
exporter`; the host and GPU collectors of this machine run beside them.

Scrapes go through the exporter's ScrapeRunner (concurrent, one deadline, one fetch in flight
per target), so top and the exporter see a target the same way. A URL that serves kvops_*
series is read as an exporter: its targets, GPUs and host replace the placeholder sample
(and its GPUs and host are shown instead of this machine's, since they are where it runs).
"""

from __future__ import annotations

import logging
import threading
import time

import requests

from kvops.exporter.collector import ScrapeRunner, default_hardware_sources
from kvops.snapshot import Snapshot, TargetSample
from kvops.sources import kvops_exposition, vllm
from kvops.sources.exposition import parse
from kvops.sources.http import FetchError, FetchOptions, fetch_text, metrics_url, normalise_target

log = logging.getLogger(__name__)


# A set, not a predicate: the parser's fast path tests membership in C.
_WANTED = vllm.WANTED | kvops_exposition.EXPORTED


class UrlScraper:
    """TargetScraper's interface (target, scrape(deadline), close()) for a URL that may be
    a vLLM or a kvops exporter. After an exporter scrape, `exporter` holds what it served."""

    def __init__(self, url: str, options: FetchOptions | None = None) -> None:
        self.target = normalise_target(url)
        self.url = metrics_url(self.target)
        self.options = options or FetchOptions()
        self.exporter: Snapshot | None = None
        self._session = requests.Session()
        self._session.trust_env = False  # a proxy from the environment must not see the scrape
        self._lock = threading.Lock()

    def scrape(self, deadline: float) -> TargetSample:
        start = time.monotonic()
        if not self._lock.acquire(blocking=False):
            return TargetSample(self.target, up=False, error="previous scrape still in flight")
        self.exporter = None
        try:
            result = parse(fetch_text(self._session, self.url, deadline, self.options), _WANTED)
            if kvops_exposition.has_kvops_samples(result):
                self.exporter = kvops_exposition.decode(result, start)
                sample = TargetSample(self.target, up=True)
            else:
                sample = vllm.normalise(result, self.target)
        except FetchError as exc:
            sample = TargetSample(self.target, up=False, error=str(exc))
        except Exception as exc:  # a bug here must cost this target only
            log.exception("scraping %s failed", self.target)
            sample = TargetSample(self.target, up=False, error=f"internal error: {type(exc).__name__}")
        finally:
            self._lock.release()
        sample.scrape_seconds = time.monotonic() - start
        return sample

    def close(self) -> None:
        self._session.close()


class LiveSource:
    live = True

    def __init__(self, urls: list[str], timeout: float, hardware: bool = True) -> None:
        # The same target given twice ("host:8000" and "http://host:8000/", say) is scraped once.
        self.scrapers: list[UrlScraper] = []
        for url in urls:
            scraper = UrlScraper(url)
            if all(s.target != scraper.target for s in self.scrapers):
                self.scrapers.append(scraper)
            else:
                scraper.close()
        sources = default_hardware_sources() if hardware else []
        self.runner = ScrapeRunner(self.scrapers, sources, timeout=timeout)  # type: ignore[arg-type]
        self.description = f"{len(urls)} URL(s), every scrape live"

    def next(self) -> Snapshot:
        snap = self.runner.snapshot()
        exporters = {s.target: s.exporter for s in self.scrapers if s.exporter is not None}
        if not exporters:
            return snap
        targets: list[TargetSample] = []
        gpus, host = [], None
        for sample in snap.targets:
            served = exporters.get(sample.target) if sample.up else None
            if served is None:
                targets.append(sample)
                continue
            targets.extend(served.targets)
            gpus.extend(served.gpus)
            host = host or served.host
        snap.targets = targets
        snap.gpus = gpus
        snap.host = host
        return snap

    def close(self) -> None:
        self.runner.close()
