"""Fleet aggregates for `kvops top --group-by`: engines summed by model, instance or kind.

A group's figures are ratios of sums, never averages of ratios: its hit rate is the hits of
all its engines over their lookups, its bandwidth their bytes over their transfer seconds.
So a group equals what one engine doing all that work would show, and summing the
per-engine rows of `--once --json` by hand gives the same numbers.

Everything here reads rates.interval()'s typed entries by attribute, so a misspelt figure
raises instead of showing "–"; `--once --json` alone turns a group into JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from kvops.rates import DownTarget, EngineInterval, ratio

Entry = EngineInterval | DownTarget  # one element of rates.Interval.targets


@dataclass
class Group:
    """One group's engines, their summed counts and the ratios of those sums; None = unknown.
    The order of the fields is the order of `--once --json`'s keys."""

    group: str
    engines: int = 0  # up
    engines_down: int = 0
    # summed over the engines up (None while none of them has the figure)
    local_hits: float | None = None
    local_queries: float | None = None
    external_hits: float | None = None
    external_queries: float | None = None
    store_bytes: float | None = None
    store_seconds: float | None = None
    load_bytes: float | None = None
    load_seconds: float | None = None
    preemptions: float | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    cpu_tier_bytes: float | None = None
    # ratios of the sums
    local_hit_rate: float | None = None
    external_hit_rate: float | None = None
    store_bandwidth_bytes_per_second: float | None = None
    load_bandwidth_bytes_per_second: float | None = None
    store_offered_bytes_per_second: float | None = None
    load_offered_bytes_per_second: float | None = None

    def sort_value(self, figure: str) -> float | None:
        """The figure a `--sort` orders groups by (board.SORTS' names). KV usage is a share
        of each engine's own pool: it does not sum, so groups keep their order under it."""
        if figure == "kv_cache_usage":
            return None
        if figure == "requests":  # the load on the group: what it runs and what queues
            running, waiting = self.requests_running, self.requests_waiting
            return None if running is None and waiting is None else (running or 0) + (waiting or 0)
        value: float | None = getattr(self, figure)  # a name that is no field raises
        return value


def _instance(entry: Entry) -> str:
    return urlsplit(entry.target).netloc or entry.target


def _kind(entry: Entry) -> str:
    # A target down has no kind: it is counted with vLLM's, the engine a bare URL means.
    return (entry.engine_kind if isinstance(entry, EngineInterval) else "") or "vllm"


GROUPS: dict[str, Callable[[Entry], str]] = {
    "model": lambda e: e.model_name or "",
    "instance": _instance,
    "kind": _kind,
}


def tier_hits(rate: float | None, queries: float | None) -> float | None:
    """Tokens hit in a tier over the interval: its hit rate × its lookups."""
    if queries == 0:
        return 0.0
    return None if rate is None or queries is None else rate * queries


def hits(row: Mapping[str, Any], tier: str) -> float | None:
    """tier_hits() of one engine row of `--once --json` (`tier`: local or external), for a
    reader summing the rows by hand to check a group."""
    return tier_hits(row[f"{tier}_hit_rate"], row[f"{tier}_queries"])


def filtered(entries: Iterable[Entry], text_filter: str) -> list[Entry]:
    """The engines whose target, model or kind contains the filter (case-insensitive), as the
    table and `--once --json` filter them."""
    needle = text_filter.lower()

    def matches(e: Entry) -> bool:
        kind = e.engine_kind if isinstance(e, EngineInterval) else ""
        return any(needle in (text or "").lower() for text in (e.target, e.model_name, kind))

    return [e for e in entries if not needle or matches(e)]


# The engine figures summed as they are (hits are rate × lookups, tier_hits()).
_SUMMED = (
    "local_queries", "external_queries", "store_bytes", "store_seconds", "load_bytes", "load_seconds",
    "preemptions", "requests_running", "requests_waiting", "cpu_tier_bytes",
)  # fmt: skip


def _add(acc: Group, name: str, value: float | None) -> None:
    if value is not None:
        total = getattr(acc, name)
        setattr(acc, name, (0.0 if total is None else total) + value)


def group(entries: Iterable[Entry], by: str, seconds: float | None) -> list[Group]:
    """One Group per value of `by` among `entries` (rates.Interval.targets), largest first;
    `seconds`: the interval, for the bytes moved per second. Engines are summed in the order
    given: float sums depend on it, so `--once --json` passes them in its rows' order."""
    key_of = GROUPS[by]
    groups: dict[str, Group] = {}
    for entry in entries:
        name = key_of(entry)
        acc = groups.setdefault(name, Group(name))
        if not isinstance(entry, EngineInterval) or not entry.up:
            acc.engines_down += 1
            continue
        acc.engines += 1
        _add(acc, "local_hits", tier_hits(entry.local_hit_rate, entry.local_queries))
        _add(acc, "external_hits", tier_hits(entry.external_hit_rate, entry.external_queries))
        for field in _SUMMED:
            _add(acc, field, getattr(entry, field))
    for acc in groups.values():
        acc.local_hit_rate = ratio(acc.local_hits, acc.local_queries)
        acc.external_hit_rate = ratio(acc.external_hits, acc.external_queries)
        acc.store_bandwidth_bytes_per_second = ratio(acc.store_bytes, acc.store_seconds)
        acc.load_bandwidth_bytes_per_second = ratio(acc.load_bytes, acc.load_seconds)
        acc.store_offered_bytes_per_second = ratio(acc.store_bytes, seconds)
        acc.load_offered_bytes_per_second = ratio(acc.load_bytes, seconds)
    return sorted(groups.values(), key=lambda a: (-a.engines - a.engines_down, a.group))
