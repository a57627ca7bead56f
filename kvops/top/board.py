"""What `kvops top` knows between frames: the last interval figures per engine, their
history for sparklines, and which targets are down. No Textual here, so it is tested and
reused (--once text) without a terminal.

Every figure comes from kvops.rates.interval(): top never computes a rate itself.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from kvops.rates import interval
from kvops.snapshot import CollectorStatus, Snapshot

HISTORY_POINTS = 300  # 5 minutes at the default 1 s interval

RowKey = tuple[str, str, str]  # (target, model_name, engine); model "" while never seen up


@dataclass
class Row:
    key: RowKey
    figures: dict[str, Any] = field(default_factory=dict)  # one rates.interval() target entry
    up: bool = True
    error: str | None = None
    down_frames: int = 0  # consecutive frames down; after the history window the row goes
    # Bytes per wall second moved each way, per frame; None where unknown or down.
    store_history: deque[float | None] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))
    load_history: deque[float | None] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))

    @property
    def target(self) -> str:
        return self.key[0]

    @property
    def model(self) -> str:
        return self.key[1]

    @property
    def engine(self) -> str:
        return self.key[2]

    def get(self, name: str) -> Any:
        """A figure, or None while the row is down (stale numbers must not look live)."""
        return self.figures.get(name) if self.up else None


# name shown, figure sorted on, worst first when True (low hit rates first)
SORTS: tuple[tuple[str, str | None, bool], ...] = (
    ("target", None, False),
    ("local hit", "local_hit_rate", True),
    ("external hit", "external_hit_rate", True),
    ("store GB/s", "store_bandwidth_bytes_per_second", False),
    ("load GB/s", "load_bandwidth_bytes_per_second", False),
    ("KV usage", "kv_cache_usage", False),
)


class Board:
    def __init__(self) -> None:
        self.prev: Snapshot | None = None
        self.doc: dict[str, Any] | None = None  # the last rates.interval() document
        self.rows: dict[RowKey, Row] = {}
        self.frames = 0
        self.collectors: list[CollectorStatus] = []

    def update(self, snap: Snapshot) -> None:
        # The first frame has no interval: an empty "before" leaves every rate None while
        # the current state (KV usage, running, waiting) shows at once.
        doc = interval(self.prev if self.prev is not None else Snapshot(time=snap.time), snap).to_json()
        self.prev = snap
        self.doc = doc
        self.frames += 1
        self.collectors = list(snap.collectors)
        seen: set[RowKey] = set()
        for entry in doc["targets"]:
            if entry["up"]:
                seen.add(self._update_up(entry))
            else:
                seen.update(self._update_down(entry["target"], entry.get("error")))
        for target in snap.targets:
            if target.up and not target.engines:  # up, but no vLLM engine (LMCache only)
                seen.add(self._update_engineless(target.target))
        for key, row in list(self.rows.items()):
            if key not in seen:  # gone from the source (an exporter stopped listing it)
                self._mark_down(row, "not in the last sample")
            if not row.up and self._forgotten(row):
                del self.rows[key]  # down for the whole history window: a pod that left the fleet

    @staticmethod
    def _forgotten(row: Row) -> bool:
        return row.down_frames >= HISTORY_POINTS

    def _update_up(self, entry: dict[str, Any]) -> RowKey:
        key: RowKey = (entry["target"], entry["model_name"], entry["engine"])
        if key[1:] != ("", ""):
            self.rows.pop((key[0], "", ""), None)  # the "never seen up" row, now replaced
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = Row(key)
        row.figures = entry
        row.up = True
        row.error = None
        row.down_frames = 0
        row.store_history.append(entry.get("store_offered_bytes_per_second"))
        row.load_history.append(entry.get("load_offered_bytes_per_second"))
        return key

    def _update_engineless(self, target: str) -> RowKey:
        key: RowKey = (target, "", "")
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = Row(key)
        row.figures = {}
        row.up = True
        row.error = None
        row.down_frames = 0
        row.store_history.append(None)
        row.load_history.append(None)
        return key

    def _update_down(self, target: str, error: str | None) -> list[RowKey]:
        rows = [row for row in self.rows.values() if row.target == target]
        if not rows:  # never seen up: one row that says so
            placeholder = Row((target, "", ""))
            self.rows[placeholder.key] = placeholder
            rows = [placeholder]
        for row in rows:
            self._mark_down(row, error or "down")
        return [row.key for row in rows]

    @staticmethod
    def _mark_down(row: Row, error: str) -> None:
        row.up = False
        row.error = error
        row.down_frames += 1
        row.store_history.append(None)
        row.load_history.append(None)

    def visible(self, text_filter: str = "", sort: int = 0) -> list[Row]:
        """Rows whose target or model contains the filter (case-insensitive), sorted."""
        needle = text_filter.lower()
        rows = [r for r in self.rows.values() if needle in r.target.lower() or needle in r.model.lower()]
        _, figure, worst_first_low = SORTS[sort % len(SORTS)]
        if figure is None:
            return sorted(rows, key=lambda r: r.key)
        known = [r for r in rows if r.get(figure) is not None]
        unknown = [r for r in rows if r.get(figure) is None]
        known.sort(key=lambda r: (r.get(figure), r.key), reverse=not worst_first_low)
        return known + sorted(unknown, key=lambda r: r.key)

    def offload_tier_bytes(self) -> float | None:
        """The largest configured offload tier among the engines up: what /dev/shm must hold
        for the next engine that starts (vLLM maps its CPU tier there)."""
        sizes = [r.get("cpu_tier_bytes") for r in self.rows.values() if r.get("cpu_tier_bytes")]
        return max(sizes) if sizes else None
