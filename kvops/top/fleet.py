"""Fleet aggregates for `kvops top --group-by`: engines summed by model, instance or kind.

A group's figures are ratios of sums, never averages of ratios: its hit rate is the hits of
all its engines over their lookups, its bandwidth their bytes over their transfer seconds.
So a group equals what one engine doing all that work would show, and summing the
per-engine rows of `--once --json` by hand gives the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from kvops.rates import ratio

SUMMED = (
    "local_hits", "local_queries", "external_hits", "external_queries", "store_bytes",
    "store_seconds", "load_bytes", "load_seconds", "preemptions", "requests_running",
    "requests_waiting", "cpu_tier_bytes",
)  # fmt: skip


def _instance(entry: dict[str, Any]) -> str:
    target = str(entry.get("target") or "")
    return urlsplit(target).netloc or target


GROUPS: dict[str, Callable[[dict[str, Any]], str]] = {
    "model": lambda e: str(e.get("model_name") or ""),
    "instance": _instance,
    "kind": lambda e: str(e.get("engine_kind") or "vllm"),
}


def hits(entry: dict[str, Any], tier: str) -> float | None:
    """Tokens hit in a tier over the interval: the entry's hit rate × its lookups."""
    rate, queries = entry.get(f"{tier}_hit_rate"), entry.get(f"{tier}_queries")
    if queries == 0:
        return 0.0
    return None if rate is None or queries is None else rate * queries


def filtered(doc: dict[str, Any], text_filter: str) -> dict[str, Any]:
    """The document with only the engines whose target, model or kind contains the filter
    (case-insensitive), as the table and `--once --json` filter them."""
    needle = text_filter.lower()
    if not needle:
        return doc
    keep = [
        e for e in doc.get("targets") or []
        if any(needle in str(e.get(name) or "").lower() for name in ("target", "model_name", "engine_kind"))
    ]  # fmt: skip
    return {**doc, "targets": keep}


def group(doc: dict[str, Any], by: str) -> list[dict[str, Any]]:
    """One entry per group of the rates.interval() document's targets, largest first."""
    key_of = GROUPS[by]
    seconds = doc.get("interval_seconds")
    sums: dict[str, dict[str, Any]] = {}
    for entry in doc.get("targets") or []:
        name = key_of(entry)
        acc = sums.setdefault(name, {"group": name, "engines": 0, "engines_down": 0})
        if not entry.get("up"):
            acc["engines_down"] += 1
            continue
        acc["engines"] += 1
        values = dict(entry, local_hits=hits(entry, "local"), external_hits=hits(entry, "external"))
        for field in SUMMED:
            value = values.get(field)
            if value is not None:
                acc[field] = acc.get(field, 0.0) + value
    out = []
    for acc in sums.values():

        def get(field: str, acc: dict[str, Any] = acc) -> float | None:
            return acc.get(field)

        acc.update(
            local_hit_rate=ratio(get("local_hits"), get("local_queries")),
            external_hit_rate=ratio(get("external_hits"), get("external_queries")),
            store_bandwidth_bytes_per_second=ratio(get("store_bytes"), get("store_seconds")),
            load_bandwidth_bytes_per_second=ratio(get("load_bytes"), get("load_seconds")),
            store_offered_bytes_per_second=ratio(get("store_bytes"), seconds),
            load_offered_bytes_per_second=ratio(get("load_bytes"), seconds),
        )
        for field in SUMMED:
            acc.setdefault(field, None)
        out.append(acc)
    return sorted(out, key=lambda a: (-a["engines"] - a["engines_down"], a["group"]))
