"""Ask a target for the samples kvops reads instead of its whole page.

SGLang, LMCache and TensorRT-LLM serve /metrics through prometheus_client, which answers
`/metrics?name[]=a&name[]=b` with only the samples named (exposition.py, `_bake_output`:
`registry.restricted_registry(params['name[]'])`). vLLM does not: 0.10-0.33 answer /metrics from
prometheus-fastapi-instrumentator's route, added before the `make_asgi_app` Mount that would
honour the filter, so a real vLLM sends its whole page and stays on whole pages here
(docs/real-vllm.md, measured on 0.32.0). kvops reads 46 of the 496 sample
lines of a vLLM 0.33 page: the rest (request latency histograms) cost the scraper a parse and
the vLLM API server a render, every scrape.

A filtered page is used only once it has been seen to hold everything the whole page held:
after the second whole page, the probe fetches the filtered page and compares. The probe is the
second step of a round for that target, after its whole page (ScrapeRunner's second pass,
TargetScraper.scrape()): the round's sample is already read from the whole page, so a server
that rejects the query is never shown down for it, and the target never has two kvops requests
in flight at once. (A probe on a thread of its own overlapped the next round when that round
came before the probe was answered, e.g. under load.) Its cost: that one round waits for the
filtered page, at most until its deadline.

prometheus_client in multiprocess mode (vLLM with --api-server-count > 1, SGLang) answers a
filter with an empty page: its MultiProcessCollector has no names, and a restricted registry
leaves such collectors out unless built with support_collectors_without_names (0.26 still
defaults to False). A proxy may refuse a long
query, a server may ignore it. Each of those leaves the target on whole pages, as does a
query longer than MAX_QUERY_BYTES (never sent). Whole pages come back for a round when a
filtered one holds nothing kvops reads (a restarted server: its whole page is fetched in the
same round, so the target is not shown down for it), after a failed fetch, and every
REPROBE_SECONDS (a new release may serve names the filter lacks). The probe compares series,
(name, label set), not names: a filtered page that keeps every name but leaves out an engine
would make that engine disappear while the target stays up.

A one-shot read (`kvops top --once`, `kvops doctor --target`) reads two whole pages and ends:
a filtered page would never be used, so it is built with probe=False and never asks for one
(the probe would cost the server a third render of its page).

A PageFilter belongs to one TargetScraper and is used by one round at a time: no lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from urllib.parse import quote

from kvops.exposition.parser import ParseResult, families_of, parse
from kvops.termsafe import visible
from kvops.transport.http import FetchError, FetchOptions

log = logging.getLogger(__name__)

REPROBE_SECONDS = 600.0
# nginx's default buffer for a request line is 8 KiB (large_client_header_buffers): far below.
MAX_QUERY_BYTES = 4096
# A filtered page must be at most this share of the whole one to be worth its longer URL
# (a server that ignores the query sends the whole page).
MAX_SHARE = 0.8


Series = tuple[str, frozenset[tuple[str, str]]]  # (sample name, label set)


def _series(result: ParseResult) -> set[Series]:
    return {
        (name, frozenset(labels.items())) for name, samples in result.samples.items() for labels, _ in samples
    }


def filtered_url(url: str, names: list[str]) -> str:
    query = "&".join("name[]=" + quote(name, safe=":") for name in names)
    return url + ("&" if "?" in url else "?") + query


class PageFilter:
    """The URL to fetch for one target this round; told what each round's page held."""

    def __init__(
        self,
        url: str,
        wanted: frozenset[str],
        options: FetchOptions,
        clock: Callable[[], float] = time.monotonic,
        probe: bool = True,
    ) -> None:
        self.url = url  # the whole page's
        self.probe = probe  # False: a one-shot read, whole pages only
        self.wanted = wanted
        self.options = options
        self.clock = clock
        self.filtered: str | None = None  # the filtered page's URL while it is in use
        self.whole_pages = 0  # whole pages read since the last change
        self.decided_at: float | None = None  # when the probe last decided (either way)
        # The filtered page to fetch after this round's whole page (set by after(), cleared by
        # probed()), with what the whole page held.
        self.probe_url: str | None = None
        self._present: set[Series] = set()
        self._whole_size = 0

    def fetch_url(self) -> str:
        if self.decided_at is not None and self.clock() - self.decided_at > REPROBE_SECONDS:
            self.filtered, self.decided_at, self.whole_pages = None, None, 0
        return self.filtered or self.url

    def after(self, url: str, result: ParseResult | None, size: int) -> bool:
        """What the round fetched from `url`: the parsed page (None: the fetch failed, or the
        page was not read whole) and its length in characters. True when the filtered page
        was empty: the caller fetches the whole page (fetch_url()) again in this round. After
        the second whole page `probe_url` is set: the caller fetches it next, in this round, and
        hands the outcome to probed()."""
        if url != self.url:  # a filtered page
            empty = result is not None and not any(result.samples.values())
            if result is None or empty:
                log.debug("%s: filtered page empty or failed; whole pages again", visible(self.url))
                self.filtered, self.decided_at, self.whole_pages = None, None, 0
            return empty
        if result is None or not self.probe or self.decided_at is not None or self.probe_url is not None:
            return False
        self.whole_pages += 1
        if self.whole_pages < 2:  # the page is known only once it has been read whole twice
            return False
        names = self._names(result)
        url = filtered_url(self.url, names)
        if not names or len(url) - len(self.url) > MAX_QUERY_BYTES:  # nothing to ask, or too much
            self.decided_at = self.clock()
            return False
        self.probe_url, self._present, self._whole_size = url, _series(result), size
        return False

    def _names(self, result: ParseResult) -> list[str]:
        """The wanted sample names of the families this page has (a labelled family with no
        child yet has its TYPE line and no sample), or of the samples it has."""
        families = set(result.types)
        return sorted(
            name for name in self.wanted
            if name in result.samples or not families.isdisjoint(families_of([name]))
        )  # fmt: skip

    def probed(self, outcome: str | FetchError, deadline: float | None = None) -> None:
        """The filtered page fetched for probe_url (or why not): used from the next round on if
        it holds every series the whole page held and is worth its longer URL."""
        url, present, self.probe_url, self._present = self.probe_url, self._present, None, set()
        if url is None:
            return
        verdict = "filtered page in use"
        try:
            if isinstance(outcome, FetchError):
                verdict = f"filtered fetch failed: {outcome}"
            elif len(outcome) > MAX_SHARE * self._whole_size:  # no need to parse it
                verdict = "filter ignored"
            else:
                result = parse(outcome, self.wanted, max_samples=self.options.max_samples, deadline=deadline)
                got = _series(result)
                if result.over_limit or result.out_of_time:
                    verdict = "filtered page not read whole"
                elif not present <= got:
                    verdict = f"filter dropped {len(present - got)} series"
                else:
                    self.filtered = url
        except Exception:  # a bug here must leave the target on whole pages, not break it
            log.exception("probing %s failed", visible(self.url))
            verdict = "probe failed"
        self.decided_at = self.clock()
        log.debug("%s: %s", visible(self.url), verdict)
