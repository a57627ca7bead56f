"""The KV-related families on a page that no kvops reader consumes (issue 42): named from the
page's `# TYPE` lines by a name pattern, so a user sees what kvops leaves on the table.

The pattern was tuned against the real vLLM 0.32.0 server's pages (tests/fixtures/vllm-real,
the expected list in tests/sources/test_unread_families.py): names about the KV cache, its
offloading, its transfer and its stores are KV-related; the multimodal and encoder caches
(`vllm:mm_cache_*`, `encoder_cache`) and kvops's own exporter families are not.

Cost: one regular expression over the page finds its # TYPE lines (about 0.1-0.2 ms on a vLLM
0.33 page, as much as the C parser's whole read), so it runs on a whole page at most once every
EVERY_SECONDS per target, and again on the first page after the target was down; the list is kept
in between: a page's families change when its server restarts (into another release, with
other flags), not from one scrape to the next. A filtered page
(kvops/scrape/page_filter.py) holds only what kvops reads, so it keeps the last whole page's
list.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Collection

from kvops.engines import registry

EVERY_SECONDS = 300.0
# "# TYPE <name> <type>" with a bare name (a quoted UTF-8 name is not an engine's KV family).
# Not anchored with ^ (re.M): an anchored pattern is tried at every position of the page (1 ms
# on a vLLM 0.33 page), this one jumps between "#"s (0.1 ms); the line start is checked after.
_TYPE_NAME_RE = re.compile(r"#[ \t]*TYPE[ \t]+([a-zA-Z_:][a-zA-Z0-9_:]*)")
KV_NAME_RE = re.compile(
    r"kv|cache|offload|evict|prefetch|backup|load_back|hicache|lmcache|kvbm|nixl|mooncake|hf3fs|"
    r"hisparse|umbp|storage"
)
NOT_KV_RE = re.compile(r"mm_cache|encoder_cache|multimodal|^kvops_")
# prometheus_client's per-series creation times: a _created TYPE line repeats its family.
_HELPER_SUFFIX = "_created"


@functools.lru_cache(maxsize=4096)  # a page's names are the same every time it is looked at
def is_kv_family(name: str) -> bool:
    low = name.lower()
    return KV_NAME_RE.search(low) is not None and NOT_KV_RE.search(low) is None


def type_names(text: str) -> set[str]:
    """The names on the page's # TYPE lines (a "# TYPE" inside a line is not one)."""
    return {
        m.group(1) for m in _TYPE_NAME_RE.finditer(text)
        if m.start() == 0 or text[m.start() - 1] == "\n"
    }  # fmt: skip


def unread_families(text: str, read: Collection[str] = registry.WANTED_FAMILIES) -> list[str]:
    """The KV-related family names of the page's # TYPE lines that are not in `read` (the
    family names kvops's readers consume), sorted, each once."""
    names = type_names(text)
    return sorted(
        name for name in names
        if name not in read and not name.endswith(_HELPER_SUFFIX) and is_kv_family(name)
    )  # fmt: skip


class UnreadFamilies:
    """One target's list: worked out from a whole page when due, kept in between."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, every: float = EVERY_SECONDS) -> None:
        self.clock = clock
        self.every = every
        self.current: list[str] | None = None  # None: no whole page read yet
        self._at: float | None = None

    def forget(self) -> None:
        """The target was down: its next whole page may be another server's (a restart)."""
        self._at = None

    def whole_page(self, text: str) -> list[str]:
        now = self.clock()
        if self._at is None or now - self._at >= self.every:
            self.current, self._at = unread_families(text), now
        assert self.current is not None
        return self.current
