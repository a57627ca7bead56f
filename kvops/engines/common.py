"""What every engine normaliser shares: EngineSamples keyed by (model, engine), and the
rank rules for engines whose counters repeat on every tensor-parallel rank."""

from __future__ import annotations

from collections.abc import Iterable

from kvops.exposition.parser import Labels
from kvops.snapshot import EngineSample

EngineKey = tuple[str, str]  # (model_name, engine)


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


def rank_of(labels: Labels, label: str = "tp_rank") -> int:
    raw = labels.get(label, "0")
    return int(raw) if raw.isascii() and raw.isdigit() else 1 << 30


def lowest_rank(
    samples: Iterable[tuple[Labels, float]], label: str = "tp_rank"
) -> list[tuple[Labels, float]]:
    """The series of the lowest rank present: for counts every rank repeats (summing ranks
    would multiply them by the TP size)."""
    items = list(samples)
    if not items:
        return []
    low = min(rank_of(labels, label) for labels, _ in items)
    return [(labels, value) for labels, value in items if rank_of(labels, label) == low]


def summed(samples: Iterable[tuple[Labels, float]]) -> float | None:
    total: float | None = None
    for _, value in samples:
        total = value if total is None else total + value
    return total
