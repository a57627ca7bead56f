"""One vLLM / LMCache target: fetch, parse, normalise into a TargetSample. Never raises."""

from __future__ import annotations

import logging
import time

from kvops.engines import registry
from kvops.exposition.parser import ParseResult, parse
from kvops.scrape.page_filter import PageFilter
from kvops.snapshot import TargetSample
from kvops.termsafe import visible
from kvops.transport.http import FetchError, FetchOptions, HttpClient, metrics_url, normalise_target

log = logging.getLogger(__name__)


class TargetScraper:
    """Scrapes one target. Not re-entrant: kvops.scrape.runner runs one round at a time
    (single flight), and a round's fetches end by its deadline, so no fetch outlives it.

    Subclasses read other expositions by overriding `wanted` and `interpret` (kvops top reads
    a kvops exporter's page through the same path)."""

    wanted: frozenset[str] = registry.WANTED

    def __init__(self, url: str, options: FetchOptions | None = None) -> None:
        self.target = normalise_target(url)
        self.url = metrics_url(self.target)
        self.options = options or FetchOptions()
        self._client = HttpClient(self.options)
        self._last_error: str | None = None
        self._filter = PageFilter(self.url, self.wanted, self.options)
        self._fetching = self.url  # the URL of the fetch finish() is told about

    def fetch_url(self) -> str:
        """The URL to GET this round: the page, or only its samples kvops reads once the
        target has been seen to serve those alone (kvops.scrape.page_filter)."""
        self._fetching = self._filter.fetch_url()
        return self._fetching

    @property
    def client(self) -> HttpClient:
        return self._client

    def scrape(self, deadline: float) -> TargetSample:
        """Fetch, parse and read the target in this thread (ScrapeRunner fetches many targets
        at once instead, and calls finish() with each body)."""
        start = time.monotonic()
        outcome: str | FetchError
        try:
            outcome = self._client.fetch_text(self.fetch_url(), deadline)
        except FetchError as exc:
            outcome = exc
        except Exception as exc:  # a bug here must cost this target only
            log.exception("fetching %s failed", visible(self.target))
            outcome = FetchError(f"internal error: {type(exc).__name__}")
        return self.finish(outcome, time.monotonic() - start)

    def finish(self, outcome: str | FetchError, fetch_seconds: float) -> TargetSample:
        """The sample for one fetched body, or for why there is none."""
        start = time.monotonic()
        try:
            if isinstance(outcome, FetchError):
                self._filter.after(self._fetching, None, 0)
                sample = TargetSample(self.target, up=False, error=str(outcome))
            else:
                limit = self.options.max_samples
                result = parse(outcome, self.wanted, max_samples=limit)
                self._filter.after(self._fetching, None if result.over_limit else result, len(outcome))
                if result.over_limit:  # as Prometheus's sample_limit: none rather than part
                    sample = TargetSample(
                        self.target, up=False, error=f"more than {limit} samples (--max-samples-per-target)"
                    )
                else:
                    sample = self.interpret(result, start - fetch_seconds)
                if result.errors:
                    line_no, message = result.errors[0]
                    log.debug("%s: %d malformed lines skipped, first at line %d: %s",
                              visible(self.target), len(result.errors), line_no,
                              visible(message))  # fmt: skip
        except Exception as exc:  # a bug here must cost this target only
            log.exception("scraping %s failed", visible(self.target))
            sample = TargetSample(self.target, up=False, error=f"internal error: {type(exc).__name__}")
        sample.scrape_seconds = fetch_seconds + (time.monotonic() - start)
        self._log_transition(sample)
        return sample

    def interpret(self, result: ParseResult, started: float) -> TargetSample:
        return registry.normalise(result, self.target)

    def _log_transition(self, sample: TargetSample) -> None:
        # Log when a target goes down or comes back, not on every failed scrape.
        if sample.error != self._last_error:
            if sample.up:
                log.info("target %s is up", visible(self.target))
            else:
                log.warning("target %s is down: %s", visible(self.target), visible(sample.error))
            self._last_error = sample.error

    def close(self) -> None:
        self._client.close()
