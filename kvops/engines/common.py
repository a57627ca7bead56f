"""What every engine module shares: its declaration (Engine), the samples one page yields
(Page, Engines), and the rank rules for engines whose counters repeat on every tensor-parallel
rank. docs/adding-an-engine.md says how a new engine uses them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kvops.exposition.parser import Labels, ParseResult
from kvops.snapshot import EngineSample, LMCacheSample

EngineKey = tuple[str, str]  # (model_name, engine)


@dataclass
class Page:
    """What one /metrics page yields, filled by each engine whose names it holds."""

    target: str
    engines: list[EngineSample] = field(default_factory=list)
    lmcache_by_key: dict[tuple[str, str], LMCacheSample] = field(default_factory=dict)

    def lmcache(self, model_name: str, worker_id: str) -> LMCacheSample:
        """LMCache's figures for one (model, worker), created on first use: LMCache's legacy
        and multi-process readers add into the same item."""
        key = (model_name, worker_id)
        found = self.lmcache_by_key.get(key)
        if found is None:
            found = self.lmcache_by_key[key] = LMCacheSample(
                target=self.target, model_name=model_name, worker_id=worker_id
            )
        return found


@dataclass(frozen=True)
class Engine:
    """One engine kvops reads, as its module declares it (kvops/engines/registry.py lists them).

    `families`: every sample name it reads: the scrapers ask for these and the parser keeps
    only these. `up_prefix`: any sample named with it makes a target up, read or not (the
    parser counts them while skipping); an engine without one is up on a sample of its
    `families`. `page_format` names the naming generation a page shows, or None when the page
    is not this engine's (shown by `kvops top`). `tiers`: the tiers of docs/tiers.md it can
    report. `fixtures`: its folder under tests/fixtures/. `read` adds a page's figures to a
    Page; it runs only when the page holds one of `families`.
    """

    kind: str  # the engine_kind label ("lmcache" items carry it on LMCacheSample)
    title: str  # for people: error lines and docs
    families: frozenset[str]
    page_format: Callable[[ParseResult], str | None]
    tiers: tuple[str, ...]
    fixtures: str
    read: Callable[[ParseResult, Page], None]
    up_prefix: str = ""
    # EngineSample histogram fields no interval figure is computed from: the exporter passes
    # them through and `kvops top` leaves their buckets unread.
    pass_through_fields: frozenset[str] = frozenset()
    pass_through_names: frozenset[str] = frozenset()
    # Counters the fleet view's charts draw (kvops.top.history.deltas_of), queried summed.
    chart_counters: frozenset[str] = frozenset()


def vllm_key(labels: Labels) -> EngineKey:
    """(model_name, engine) as vLLM labels its series (engine: the data-parallel rank)."""
    return (labels.get("model_name", ""), labels.get("engine", "0"))


def engine_on_page(page: Page, key: EngineKey, kind: str) -> EngineSample:
    """The page's engine of `kind` for `key` (a reader registered earlier read it), else a new
    one: modules reading one engine's optional surface (vLLM's tiering, its SimpleCPU
    connector) add to the sample its main module made instead of making a second."""
    for sample in page.engines:
        if sample.engine_kind == kind and (sample.model_name, sample.engine) == key:
            return sample
    sample = EngineSample(target=page.target, model_name=key[0], engine=key[1], engine_kind=kind)
    page.engines.append(sample)
    return sample


class Engines:
    """The EngineSamples one page yields, created on first use."""

    def __init__(self, target: str, kind: str) -> None:
        self.target = target
        self.kind = kind
        self.by_key: dict[EngineKey, EngineSample] = {}

    def get(self, key: EngineKey) -> EngineSample:
        sample = self.by_key.get(key)
        if sample is None:
            sample = self.by_key[key] = EngineSample(
                target=self.target, model_name=key[0], engine=key[1], engine_kind=self.kind
            )
        return sample

    def samples(self) -> list[EngineSample]:
        return list(self.by_key.values())


# The labels that name one scheduler process of an SGLang engine (0.5.23's storage and radix
# collectors carry all three): a count every rank repeats is read from one of them.
RANK_LABELS: tuple[str, ...] = ("pp_rank", "tp_rank", "attn_cp_rank")


def rank_of(labels: Labels, label: str = "tp_rank") -> int:
    raw = labels.get(label, "0")
    return int(raw) if raw.isascii() and raw.isdigit() else 1 << 30


def rank_key(labels: Labels) -> tuple[int, ...]:
    """Which rank process a series is from, lowest first (a missing label is rank 0)."""
    return tuple(rank_of(labels, label) for label in RANK_LABELS)


def lowest_rank(samples: Iterable[tuple[Labels, float]]) -> list[tuple[Labels, float]]:
    """The series of the lowest rank present (pipeline, tensor and context-parallel ranks
    alike): for counts every rank repeats (summing ranks would multiply them by the rank count)."""
    items = list(samples)
    if not items:
        return []
    low = min(rank_key(labels) for labels, _ in items)
    return [(labels, value) for labels, value in items if rank_key(labels) == low]


def add_to_field(
    samples: Iterable[tuple[Labels, float]], owner: Callable[[Labels], Any], field_name: str
) -> None:
    """Each sample's value added to `field_name` (None counts as 0) of owner(labels): the engine
    or LMCache sample its labels name. For a family whose series sum into one figure."""
    for labels, value in samples:
        sample = owner(labels)
        setattr(sample, field_name, (getattr(sample, field_name) or 0.0) + value)


def label_value(name: str) -> Callable[[Labels], str]:
    """The value of label `name` in a label set ("" without it): a key for add_by_label."""
    return lambda labels: labels.get(name, "")


def add_by_label(
    samples: Iterable[tuple[Labels, float]],
    owner: Callable[[Labels], Any],
    field_name: str,
    key: Callable[[Labels], str],
) -> None:
    """Each sample's value added under key(labels) in the dict `field_name` of owner(labels):
    for a family whose series sum into one figure per label value (tier, outcome, ...)."""
    for labels, value in samples:
        by_key = getattr(owner(labels), field_name)
        k = key(labels)
        by_key[k] = by_key.get(k, 0.0) + value


def summed(samples: Iterable[tuple[Labels, float]]) -> float | None:
    total: float | None = None
    for _, value in samples:
        total = value if total is None else total + value
    return total


# --- issue 42 item 7 (h42a): shape guards ----------------------------------------------------
# Labels that split one count into phases or outcomes when a family kvops sums gains them, and
# the value that is the count as kvops knew it (vllm-project/vllm#57251: phase="completed" is the
# load count 0.33 exposes). Any other label a series carries (instance, job, namespace, pod,
# container, a store's own) names where the series came from: identity, never this case.
SPLITTING_LABELS: dict[str, str | None] = {
    "phase": "completed",
    "stage": None,
    "status": None,
    "result": None,
}


def guarded(
    samples: Iterable[tuple[Labels, float]], family: str, owner: Callable[[Labels], Any]
) -> list[tuple[Labels, float]]:
    """The series of a family kvops sums into one count, less those a splitting label took
    apart: the known value's series are kept (the count as it was), the others dropped, and the
    family recorded on the owner's `partly_read_families` (family -> label) as read in part."""
    kept: list[tuple[Labels, float]] = []
    for labels, value in samples:
        splitter = next((label for label in SPLITTING_LABELS if label in labels), None)
        if splitter is None:
            kept.append((labels, value))
            continue
        owner(labels).partly_read_families[family] = splitter
        if labels[splitter] == SPLITTING_LABELS[splitter]:
            kept.append((labels, value))
    return kept
