"""Bounded history for `kvops top`'s sparklines and charts.

Per engine (and for the whole fleet, summed) the board keeps what each frame's interval moved:
its length, prefix-cache hits and lookups per tier, bytes stored and loaded. A chart smoothed
over a window is then a sum of those deltas over the frames inside it divided by another sum
(hits / lookups, bytes / seconds): exact, not an average of ratios, so a second with few
lookups weighs as little as it counted.

Each figure is a ring of float32 (4 bytes a point, NaN for unknown) rather than a deque of
Python floats (32 bytes a point): 5,000 engines × 9 figures × 300 points stay under 60 MB.
Frame times are the exception: float64, as a float32 holds a Unix time (1.8e9) only to
128 s and `monotonic()` on a host up 97 days only to 1 s, and every frame then fell on
one x (issue 25).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator

from kvops.rates import EngineInterval

HISTORY_POINTS = 300  # 5 minutes at the default 1 s interval

# Per-interval deltas kept per engine, as kvops.rates.interval() names them.
DELTAS = ("local_hits", "local_queries", "external_hits", "external_queries", "store_bytes", "load_bytes",
          # the payoff chart (docs/payoff.md): TTFT p90 weighted by the requests it covers, and
          # the prompt tokens the tiers below the GPU served against all prompt tokens
          "ttft_p90_weighted", "first_tokens", "offload_saved", "prompt_tokens")  # fmt: skip
# The tiers of docs/tiers.md, in the order the charts and the detail view list them.
TIERS = ("gpu", "host", "disk", "storage", "peer", "external")
# Prompt tokens each tier served in the interval (its `tokens_saved`). Kept only for the tiers
# an engine has: their rings are made at the first known value (most engines have two).
SAVED = tuple(f"saved_{tier}" for tier in TIERS)


class Ring:
    """The last `size` values appended; None (unknown) is stored as NaN and read back as None.
    `typecode` "f" (float32) for figures, "d" (float64) where a value must be exact (times)."""

    __slots__ = ("_data", "_next", "size")

    def __init__(self, size: int = HISTORY_POINTS, typecode: str = "f") -> None:
        self._data: array[float] = array(typecode)
        self._next = 0  # where the next value goes once the ring is full
        self.size = size

    def append(self, value: float | None) -> None:
        x = math.nan if value is None else float(value)
        if len(self._data) < self.size:
            self._data.append(x)
        else:
            self._data[self._next] = x
            self._next = (self._next + 1) % self.size

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[float | None]:
        return iter(self.values())

    def values(self) -> list[float | None]:
        return self.tail(len(self._data))

    def tail(self, n: int) -> list[float | None]:
        """The last `n` values (fewer while the ring holds fewer), oldest first: what a
        sparkline `n` cells wide shows, without reading the rest of the history. The two
        halves of a full ring are joined by slicing (in C), not read element by element:
        charts and sparklines read rings every frame."""
        data, end = self._data, self._next or len(self._data)
        n = min(max(0, n), len(data))
        part = data[end - n : end] if n <= end else data[len(data) - (n - end) :] + data[:end]
        return [None if x != x else x for x in part]  # NaN (x != x) is unknown


def deltas_of(entry: EngineInterval) -> dict[str, float | None]:
    """One engine's interval deltas from its rates.interval() figures: hits are hit rate ×
    lookups (the entry carries those two), the rest are there as they are."""
    out: dict[str, float | None] = {}
    for tier, queries, rate in (
        ("local", entry.local_queries, entry.local_hit_rate),
        ("external", entry.external_queries, entry.external_hit_rate),
    ):
        out[f"{tier}_queries"] = queries
        if rate is not None and queries is not None:
            out[f"{tier}_hits"] = rate * queries
        else:  # no lookups in the interval: nothing was hit either
            out[f"{tier}_hits"] = 0.0 if queries == 0 else None
    out["store_bytes"] = entry.store_bytes
    out["load_bytes"] = entry.load_bytes
    p90, first = entry.ttft_p90_seconds, entry.first_tokens
    out["first_tokens"] = first if p90 is not None else None
    out["ttft_p90_weighted"] = p90 * first if p90 is not None and first is not None else None
    out["prompt_tokens"] = entry.prompt_tokens
    tiers = entry.tiers
    below = [t.tokens_saved for name, t in tiers.items() if name != "gpu"]
    known = [v for v in below if v is not None]
    out["offload_saved"] = sum(known) if known else None
    for tier, name in zip(TIERS, SAVED, strict=True):
        part = tiers.get(tier)
        if part is not None and part.tokens_saved is not None:
            out[name] = part.tokens_saved
    # An entry without the tier split (a store's fleet sums): the GPU cache served its hits,
    # the connector its external hits.
    if out.get("saved_gpu") is None:
        out["saved_gpu"] = out["local_hits"]
    if not any(out.get(name) is not None for name in SAVED[1:]):
        out["saved_external"] = out["external_hits"]
    return out


def add(total: dict[str, float | None], part: dict[str, float | None]) -> None:
    """Sum `part` into `total`; a figure unknown everywhere stays None."""
    for name in (*DELTAS, *SAVED):
        value = part.get(name)
        if value is not None:
            total[name] = (total.get(name) or 0.0) + value


class Trend:
    """One engine's (or the fleet's) per-frame deltas and the time each frame ended."""

    __slots__ = ("_ends", "_smoothed", "appended", "deltas", "ends", "seconds")

    def __init__(self, size: int = HISTORY_POINTS) -> None:
        self.ends = Ring(size, "d")  # the frame's end, seconds on the source's clock: exact
        self.seconds = Ring(size)  # the frame's interval length
        self.deltas = {name: Ring(size) for name in DELTAS}
        self.appended = 0  # frames appended so far: frame k is the k-th appended (from 0)
        # smoothed() points worked out, by (numerator, denominator, window) and frame k:
        # (value, the first frame of its window). Kept while the rings hold that window.
        self._smoothed: dict[tuple[str, str | None, float], dict[int, tuple[float | None, int]]] = {}
        self._ends: tuple[int, list[float]] = (0, [])  # (appended, ends) read once a frame

    def append(self, end: float, seconds: float | None, deltas: dict[str, float | None] | None) -> None:
        self.ends.append(end)
        self.seconds.append(seconds)
        for name in SAVED:  # a tier seen for the first time: unknown in the frames before
            if deltas is not None and deltas.get(name) is not None and name not in self.deltas:
                ring = self.deltas[name] = Ring(self.ends.size)
                for _ in range(len(self.ends) - 1):
                    ring.append(None)
        for name, ring in self.deltas.items():
            ring.append(None if deltas is None else deltas.get(name))
        self.appended += 1

    def __len__(self) -> int:
        return len(self.ends)

    def _end_times(self) -> list[float]:
        if self._ends[0] != self.appended:
            self._ends = (self.appended, [end or 0.0 for end in self.ends.values()])
        return self._ends[1]

    def smoothed(
        self, numerator: str, denominator: str | None, window: float, span: float | None = None
    ) -> list[tuple[float, float | None]]:
        """(frame end, sum of `numerator` / sum of `denominator` over the frames that ended
        within `window` seconds up to it) per frame; `denominator` None means per second of
        interval. None where the denominator summed to zero or nothing was known.
        `span`: only the frames that ended within `span` seconds of the last one.

        Each point is its window summed afresh, so it does not depend on when it was worked
        out: a point is kept and not worked out again while the rings hold its whole window
        (a chart draws the same minutes every second, and only its newest point is new)."""
        ends = self._end_times()
        n = len(ends)
        if not n:
            return []
        first = 0
        if span is not None:
            last = ends[-1]
            first = n
            while first > 0 and ends[first - 1] - last >= -span:
                first -= 1
        base = self.appended - n  # the frame ends[0] is
        kept = self._smoothed.setdefault((numerator, denominator, window), {})
        missing = [i for i in range(first, n) if (hit := kept.get(base + i)) is None or hit[1] < base]
        if missing:
            # Frames whose end is a window or more before a frame's are out of its window. A
            # 1 s window at a 1 s interval is the frame alone: the raw per-interval figure.
            def window_start(i: int) -> int:
                start, edge = i, ends[i] - window + 1e-9
                while start > 0 and ends[start - 1] > edge:
                    start -= 1
                return start

            lowest = window_start(missing[0])
            num = self.deltas[numerator].tail(n - lowest)
            den = (self.seconds if denominator is None else self.deltas[denominator]).tail(n - lowest)
            for i in missing:
                start = window_start(i)
                sum_num = sum_den = 0.0
                known = 0  # frames in the window with both figures known
                inside = slice(start - lowest, i - lowest + 1)
                for a, b in zip(num[inside], den[inside], strict=True):
                    if a is not None and b is not None:
                        sum_num, sum_den, known = sum_num + a, sum_den + b, known + 1
                kept[base + i] = (sum_num / sum_den if known and sum_den > 0 else None, base + start)
            if len(kept) > 2 * self.ends.size:  # frames the rings no longer hold
                for k in [k for k in kept if k < base]:
                    del kept[k]
        return [(ends[i], kept[base + i][0]) for i in range(first, n)]
