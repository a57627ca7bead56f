"""What `kvops top` knows between frames: the last interval figures per engine, their
history for sparklines, and which targets are down. No Textual here, so it is tested and
reused (--once text) without a terminal.

Every figure comes from kvops.rates.interval(): top never computes a rate itself (the
charts' smoothed figures are sums of its per-interval deltas, binding.py).

Memory stays bounded whatever a source serves: at most MAX_ROWS engines are kept (the rest
are counted in `rows_cut`, and cut before rates are computed), each with HISTORY_POINTS
frames of float32 history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvops.rates import EngineInterval, Interval, interval
from kvops.snapshot import CollectorStatus, Snapshot, TargetSample
from kvops.top.history import HISTORY_POINTS, Ring, Trend, add, deltas_of

__all__ = ["HISTORY_POINTS", "MAX_ROWS", "SORTS", "Board", "Row", "RowKey"]

# Well above a real fleet (issue 17: 2,000 engines are not cut), well below a hostile page of
# 200k label sets (which took top to 2.45 GB).
MAX_ROWS = 5000

RowKey = tuple[str, str, str]  # (target, model_name, engine); model "" while never seen up


@dataclass
class Row:
    key: RowKey
    figures: EngineInterval | None = None  # this engine's rates.interval() figures
    kind_seen: str = ""  # an engineless target's kind (LMCache only), where there are no figures
    up: bool = True
    error: str | None = None
    down_frames: int = 0  # consecutive frames down; after the history window the row goes
    # Bytes per wall second moved each way, per frame; None where unknown or down.
    store_history: Ring = field(default_factory=Ring)
    load_history: Ring = field(default_factory=Ring)
    trend: Trend = field(default_factory=Trend)  # per-frame deltas, for the charts

    @property
    def target(self) -> str:
        return self.key[0]

    @property
    def model(self) -> str:
        return self.key[1]

    @property
    def engine(self) -> str:
        return self.key[2]

    @property
    def kind(self) -> str:
        """The engine kind (vllm, sglang, dynamo-kvbm, trtllm, lmcache); "" while never seen up."""
        return self.figures.engine_kind if self.figures is not None else self.kind_seen

    def get(self, name: str) -> Any:
        """A figure, by its EngineInterval field name (a name that is not one raises), or None
        while the row is down (stale numbers must not look live) or has no figures."""
        if not self.up or self.figures is None:
            return None
        if name == "requests":  # the load on the engine: what it runs and what queues
            running, waiting = self.figures.requests_running, self.figures.requests_waiting
            return None if running is None and waiting is None else (running or 0) + (waiting or 0)
        return getattr(self.figures, name)


# name shown, figure sorted on, worst first when True (low hit rates first)
SORTS: tuple[tuple[str, str | None, bool], ...] = (
    ("target", None, False),
    ("local hit", "local_hit_rate", True),
    ("external hit", "external_hit_rate", True),
    ("store GB/s", "store_bandwidth_bytes_per_second", False),
    ("load GB/s", "load_bandwidth_bytes_per_second", False),
    ("KV usage", "kv_cache_usage", False),
    ("requests", "requests", False),  # running + waiting: the highest load first
    ("preemptions", "preemptions", False),
)


class Board:
    def __init__(self, max_rows: int | None = MAX_ROWS) -> None:
        self.max_rows = max_rows  # None: never cut (--once)
        self.prev: Snapshot | None = None
        self.interval: Interval | None = None  # the last frame's rates.interval()
        self.rows: dict[RowKey, Row] = {}
        self._end = 0.0  # the current frame's time and interval length, while updating
        self._seconds: float | None = None
        self.frames = 0
        self.collectors: list[CollectorStatus] = []
        self.has_interval = False  # the last frame had rates
        self.fleet_engines: int | None = None  # engines in the fleet, where rows are a page of it
        self.rows_cut = 0  # engines the last sample had beyond MAX_ROWS, not shown
        self.fleet = Trend()  # every engine up, summed: the charts when no target is picked
        self.fleet_link_max: float | None = None  # summed host-link maximum of the GPUs shown

    def update(
        self,
        snap: Snapshot,
        before: Snapshot | None = None,
        fleet: tuple[EngineInterval | None, int] | None = None,
    ) -> None:
        """The next frame: `snap` against the previous one, or against `before` where the
        source hands over both ends of an interval (the Prometheus fleet view). `fleet`: a
        page of a larger fleet (the whole fleet's figures as one rates entry, and how many
        engines it has): rows not on the page are dropped, not shown down."""
        snap = self._capped(snap)
        if before is not None:
            start = self._capped(before) if before.targets else before
            self.has_interval = bool(before.targets)
        else:
            # The first frame has no interval: an empty "before" leaves every rate None while
            # the current state (KV usage, running, waiting) shows at once.
            start = self.prev if self.prev is not None else Snapshot(time=snap.time)
            self.has_interval = self.prev is not None
        self.interval = frame = interval(start, snap)
        self.prev = snap if before is None else None
        self.frames += 1
        self.collectors = list(snap.collectors)
        self._end = snap.time
        self._seconds = frame.interval_seconds if self.has_interval else None
        totals: dict[str, float | None] | None = {}
        seen: set[RowKey] = set()
        # Each down target's rows, found once per frame (a scan of every row per down target
        # took minutes with 30,000 targets down).
        keys_of: dict[str, list[RowKey]] = {}
        for key in self.rows:
            keys_of.setdefault(key[0], []).append(key)
        for entry in frame.targets:
            if isinstance(entry, EngineInterval):
                seen.add(self._update_up(entry))
                add(totals, deltas_of(entry))  # type: ignore[arg-type]
            else:
                seen.update(
                    self._update_down(entry.target, entry.error, keys_of.setdefault(entry.target, []))
                )
        for target in snap.targets:
            if target.up and not target.engines and not target.lmcache:  # up, nothing rates cover
                seen.add(self._update_engineless(target.target, ""))
        self.fleet_engines = None if fleet is None else fleet[1]
        for key, row in list(self.rows.items()):
            if key not in seen and fleet is not None:  # off the page: not shown, not down
                del self.rows[key]
                continue
            if key not in seen:  # gone from the source (an exporter stopped listing it)
                self._mark_down(row, "not in the last sample")
            if not row.up and self._forgotten(row):
                del self.rows[key]  # down for the whole history window: a pod that left the fleet
        if fleet is not None:  # the store summed the whole fleet, not only the page
            totals = deltas_of(fleet[0]) if fleet[0] is not None else None
        self.fleet.append(snap.time, self._seconds, totals if self._seconds else None)
        links = [g.shown_link()[2] for g in frame.gpus]  # C2C's maximum on a Grace GPU (issue 45)
        self.fleet_link_max = sum(x for x in links if x) or None

    def _capped(self, snap: Snapshot) -> Snapshot:
        """`snap` with at most MAX_ROWS engines (targets in order, each whole or cut)."""
        if self.max_rows is None:
            return snap
        total = sum(max(1, len(t.engines)) for t in snap.targets)
        self.rows_cut = max(0, total - self.max_rows)
        if not self.rows_cut:
            return snap
        kept: list[TargetSample] = []
        room = self.max_rows
        for target in snap.targets:
            if room <= 0:
                break
            if len(target.engines) > room:
                target = TargetSample(target.target, target.up, target.error, target.engines[:room])
            kept.append(target)
            room -= max(1, len(target.engines))
        return Snapshot(time=snap.time, targets=kept, gpus=snap.gpus, host=snap.host,
                        processes=snap.processes, collectors=snap.collectors)  # fmt: skip

    @staticmethod
    def _forgotten(row: Row) -> bool:
        return row.down_frames >= HISTORY_POINTS

    def _update_up(self, entry: EngineInterval) -> RowKey:
        key: RowKey = (entry.target, entry.model_name, entry.engine)
        if key[1:] != ("", ""):
            self.rows.pop((key[0], "", ""), None)  # the "never seen up" row, now replaced
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = Row(key)
        row.figures = entry
        row.up = True
        row.error = None
        row.down_frames = 0
        row.store_history.append(entry.store_offered_bytes_per_second)
        row.load_history.append(entry.load_offered_bytes_per_second)
        row.trend.append(self._end, self._seconds, deltas_of(entry) if self._seconds else None)
        return key

    def _update_engineless(self, target: str, kind: str) -> RowKey:
        key: RowKey = (target, "", "")
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = Row(key)
        row.figures = None
        row.kind_seen = kind
        row.up = True
        row.error = None
        row.down_frames = 0
        row.store_history.append(None)
        row.load_history.append(None)
        row.trend.append(self._end, self._seconds, None)
        return key

    def _update_down(self, target: str, error: str | None, keys: list[RowKey]) -> list[RowKey]:
        """`keys`: the target's rows (kept up to date here, for a target listed twice)."""
        rows = [self.rows[key] for key in keys if key in self.rows]
        if not rows:  # never seen up: one row that says so
            placeholder = Row((target, "", ""))
            self.rows[placeholder.key] = placeholder
            keys.append(placeholder.key)
            rows = [placeholder]
        for row in rows:
            self._mark_down(row, error or "down")
        return [row.key for row in rows]

    def _mark_down(self, row: Row, error: str) -> None:
        row.up = False
        row.error = error
        row.down_frames += 1
        row.store_history.append(None)
        row.load_history.append(None)
        row.trend.append(self._end, self._seconds, None)

    def visible(self, text_filter: str = "", sort: int = 0) -> list[Row]:
        """Rows whose target, model or engine kind contains the filter (case-insensitive), sorted."""
        needle = text_filter.lower()
        rows = [r for r in self.rows.values()
                if needle in r.target.lower() or needle in r.model.lower() or needle in r.kind]  # fmt: skip
        _, figure, worst_first_low = SORTS[sort % len(SORTS)]
        if figure is None:
            return sorted(rows, key=lambda r: r.key)
        known = [r for r in rows if r.get(figure) is not None]
        unknown = [r for r in rows if r.get(figure) is None]
        known.sort(key=lambda r: (r.get(figure), r.key), reverse=not worst_first_low)
        return known + sorted(unknown, key=lambda r: r.key)

    def kinds(self) -> set[str]:
        """The engine kinds of the rows up (more than one: the table names each row's kind)."""
        return {r.kind for r in self.rows.values() if r.up and r.kind}

    def offload_tier_bytes(self, leaving_out: frozenset[str] = frozenset()) -> float | None:
        """The largest configured offload tier among the engines up: what /dev/shm must hold
        for the next engine that starts (vLLM maps its CPU tier there). `leaving_out`: targets
        whose tiers are not this host's to hold (a simulator's)."""
        sizes = [
            r.get("cpu_tier_bytes")
            for r in self.rows.values()
            if r.get("cpu_tier_bytes") and r.target not in leaving_out
        ]
        return max(sizes) if sizes else None
