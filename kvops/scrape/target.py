"""One vLLM / LMCache target: fetch, parse, normalise into a TargetSample. Never raises."""

from __future__ import annotations

import logging
import time

from kvops.engines import registry
from kvops.exposition.parser import ParseResult, parse
from kvops.scrape.page_filter import PageFilter
from kvops.scrape.unread import UnreadFamilies
from kvops.snapshot import TargetSample
from kvops.termsafe import visible
from kvops.transport.http import FetchError, FetchOptions, HttpClient, metrics_url, normalise_target

log = logging.getLogger(__name__)

PARSE_OUT_OF_TIME = "parse exceeded the scrape deadline"
# A large page's parse that outlived its round (kvops.scrape.runner) holds its target back.
PARSE_STILL_RUNNING = "an earlier round's page is still being parsed"


class TargetScraper:
    """Scrapes one target. Not re-entrant: kvops.scrape.runner runs one round at a time
    (single flight), and a round's fetches end by its deadline, so no fetch outlives it.

    Subclasses read other expositions by overriding `wanted` and `interpret` (kvops top reads
    a kvops exporter's page through the same path)."""

    wanted: frozenset[str] = registry.WANTED
    # What reading a page costs after its parse, in parse-seconds: interpret() and the
    # exporter's families and encoding. Measured on 45,000 label sets of a family kvops reads
    # (issue 25): parse 0.9 s, normalise 1.3 s, families 2.9 s, encode 0.9 s. A page whose
    # parse ends too late for the rest to fit before the deadline is abandoned there.
    work_after_parse = 6.0

    def __init__(self, url: str, options: FetchOptions | None = None, probe: bool = True) -> None:
        """`probe`: False for a one-shot read, which never asks for a filtered page."""
        self.target = normalise_target(url)
        self.url = metrics_url(self.target)
        self.options = options or FetchOptions()
        self._client = HttpClient(self.options)
        self._last_error: str | None = None
        self._filter = PageFilter(self.url, self.wanted, self.options, probe=probe)
        self._fetching = self.url  # the URL of the fetch finish() is told about
        self.refetch_whole = False  # set by finish(): fetch the whole page again, this round
        self._unread = UnreadFamilies()  # the page's KV families no reader consumes (issue 42)

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
        sample = self.finish(self._fetch(self.fetch_url(), deadline), time.monotonic() - start, deadline)
        if self.refetch_whole:  # the filtered page was empty: the whole one, in this round
            again = time.monotonic()
            sample = self.finish(self._fetch(self.fetch_url(), deadline), time.monotonic() - again, deadline)
        probe = self.probe_url
        if probe is not None and sample.up:  # after the whole page, never beside it (page_filter)
            self.probed(self._fetch(probe, deadline), deadline)
        return sample

    @property
    def probe_url(self) -> str | None:
        """The filtered page to fetch after this round's whole page, if it is time to probe."""
        return self._filter.probe_url

    def probed(self, outcome: str | FetchError, deadline: float | None = None) -> None:
        """The probe's outcome: decides whether later rounds fetch the filtered page."""
        self._filter.probed(outcome, deadline)

    def _fetch(self, url: str, deadline: float) -> str | FetchError:
        try:
            return self._client.fetch_text(url, deadline)
        except FetchError as exc:
            return exc
        except Exception as exc:  # a bug here must cost this target only
            log.exception("fetching %s failed", visible(self.target))
            return FetchError(f"internal error: {type(exc).__name__}")

    def finish(
        self, outcome: str | FetchError, fetch_seconds: float, deadline: float | None = None
    ) -> TargetSample:
        """The sample for one fetched body, or for why there is none. With a deadline, a
        page whose reading would not end by it is abandoned (down, with the reason).
        `refetch_whole` then says whether the whole page must be fetched again this round."""
        start = time.monotonic()
        self.refetch_whole = False
        try:
            if isinstance(outcome, FetchError):
                self._filter.after(self._fetching, None, 0)
                sample = TargetSample(self.target, up=False, error=str(outcome))
            else:
                limit = self.options.max_samples
                # The work after the parse is estimated from the parse's own pace (the
                # machine's speed now), every few thousand lines: a page that cannot be served
                # in time is not read. A page shorter than that is not looked at: its fixed
                # costs (a regular expression compiled once) would make the estimate wrong.
                result = parse(outcome, self.wanted, max_samples=limit, deadline=deadline,
                               work_after=self.work_after_parse)  # fmt: skip
                complete = not result.over_limit and not result.out_of_time
                self.refetch_whole = self._filter.after(self._fetching, result if complete else None,
                                                        len(outcome))  # fmt: skip
                if result.over_limit:  # as Prometheus's sample_limit: none rather than part
                    sample = TargetSample(
                        self.target, up=False, error=f"more than {limit} samples (--max-samples-per-target)"
                    )
                elif result.out_of_time:
                    sample = TargetSample(self.target, up=False, error=PARSE_OUT_OF_TIME)
                else:
                    sample = self.interpret(result, start - fetch_seconds)
                    if sample.up:  # from a whole page when due; a filtered page keeps the last list
                        whole = self._fetching == self.url
                        sample.unread_families = (
                            self._unread.whole_page(outcome) if whole else self._unread.current
                        )
                if result.errors:
                    line_no, message = result.errors[0]
                    log.debug("%s: %d malformed lines skipped, first at line %d: %s",
                              visible(self.target), len(result.errors), line_no,
                              visible(message))  # fmt: skip
        except Exception as exc:  # a bug here must cost this target only
            log.exception("scraping %s failed", visible(self.target))
            sample = TargetSample(self.target, up=False, error=f"internal error: {type(exc).__name__}")
        if not sample.up:  # a restart may bring other families: the next whole page is looked at
            self._unread.forget()
        sample.scrape_seconds = fetch_seconds + (time.monotonic() - start)
        if not self.refetch_whole:  # else the whole page, fetched next, says how the target is
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
