"""One vLLM / LMCache target: fetch, parse, normalise into a TargetSample. Never raises."""

from __future__ import annotations

import logging
import threading
import time

from kvops.snapshot import TargetSample
from kvops.sources import vllm
from kvops.sources.exposition import ParseResult, parse
from kvops.sources.http import FetchError, FetchOptions, HttpClient, metrics_url, normalise_target

log = logging.getLogger(__name__)


class TargetScraper:
    """Scrapes one target. At most one fetch per target is in flight: a scrape that finds the
    previous one still running (a hung target outliving its scrape) reports the target down
    instead of starting another thread.

    Subclasses read other expositions by overriding `wanted` and `interpret` (kvops top reads
    a kvops exporter's page through the same path)."""

    wanted: frozenset[str] = vllm.WANTED

    def __init__(self, url: str, options: FetchOptions | None = None) -> None:
        self.target = normalise_target(url)
        self.url = metrics_url(self.target)
        self.options = options or FetchOptions()
        self._client = HttpClient(self.options)
        self._lock = threading.Lock()
        self._last_error: str | None = None

    def scrape(self, deadline: float) -> TargetSample:
        start = time.monotonic()
        if not self._lock.acquire(blocking=False):
            return TargetSample(self.target, up=False, error="previous scrape still in flight")
        try:
            text = self._client.fetch_text(self.url, deadline)
            result = parse(text, self.wanted)
            sample = self.interpret(result, start)
            if result.errors:
                line_no, message = result.errors[0]
                log.debug("%s: %d malformed lines skipped, first at line %d: %s",
                          self.target, len(result.errors), line_no, message)  # fmt: skip
        except FetchError as exc:
            sample = TargetSample(self.target, up=False, error=str(exc))
        except Exception as exc:  # a bug here must cost this target only
            log.exception("scraping %s failed", self.target)
            sample = TargetSample(self.target, up=False, error=f"internal error: {type(exc).__name__}")
        finally:
            self._lock.release()
        sample.scrape_seconds = time.monotonic() - start
        self._log_transition(sample)
        return sample

    def interpret(self, result: ParseResult, started: float) -> TargetSample:
        return vllm.normalise(result, self.target)

    def _log_transition(self, sample: TargetSample) -> None:
        # Log when a target goes down or comes back, not on every failed scrape.
        if sample.error != self._last_error:
            if sample.up:
                log.info("target %s is up", self.target)
            else:
                log.warning("target %s is down: %s", self.target, sample.error)
            self._last_error = sample.error

    def close(self) -> None:
        self._client.close()
