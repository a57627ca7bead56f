"""A KV store's own row in the detail view (engine_kind "mooncake": Mooncake's master), as Rich
renderables: what the store served and refused over the interval, and how full it is now.
Everything comes from the row's `storage` tier (kvops.rates.StoreInterval); segment names are
the store's text and go through kvops.termsafe.visible()."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from kvops.rates import StoreInterval, TierInterval
from kvops.termsafe import visible
from kvops.top import numbers
from kvops.top.board import Row

MAX_SEGMENTS = 8  # the fullest ones; a store with more says how many it left out


def size(value: float | None) -> str:
    """Bytes in the largest binary unit that keeps the figure at or above 1 (test stores hold MiB,
    real ones TiB)."""
    value = numbers.known(value)
    if value is None:
        return numbers.UNKNOWN
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B"


def _red_when(value: float | None, unit: str = "") -> Text:
    if value is None:
        return Text(numbers.UNKNOWN)
    return Text(f"{value:.0f}{unit}", style=numbers.alarm() if value else "")


def _by_medium(values: dict[str, float], fmt: type[str] | None = None) -> str:
    shown = [f"{visible(m)} {size(v) if fmt is None else f'{v:.0f}'}" for m, v in sorted(values.items()) if v]
    return " · ".join(shown) or "0"


def store_table(row: Row) -> Table | None:
    """The store's figures, or None for a row that is not a store."""
    tiers = row.get("tiers") or {}
    tier: TierInterval | None = tiers.get("storage")
    figures: StoreInterval | None = tier.store if tier is not None else None
    if tier is None or figures is None:
        return None
    table = Table.grid(padding=(0, 2))
    table.add_column(style="dim")
    table.add_column()
    table.add_row("store lookups", f"{numbers.count(figures.lookups)} ({numbers.count(figures.hits)} hit)")
    table.add_row("hits by medium", _by_medium(figures.hits_by_medium, str))
    table.add_row("served by medium", _by_medium(figures.hit_bytes_by_medium))
    table.add_row("puts", numbers.count(figures.puts))
    # A put of a key already held fails its start (the client is told it succeeded): not red.
    failed = Text(numbers.count(figures.put_failures))
    if figures.put_no_space_failures:
        failed.append(f" ({figures.put_no_space_failures:.0f} no space)", style=numbers.alarm())
    table.add_row("failed put starts", failed)
    table.add_row("puts abandoned", _red_when(figures.puts_abandoned))
    table.add_row("failed lookups (misses)", numbers.count(figures.get_failures))
    evicted = _red_when(figures.evicted_keys, " keys")
    if figures.evicted_bytes:
        evicted.append(f" ({size(figures.evicted_bytes)})")
    table.add_row("evicted", evicted)
    promoted = Text(numbers.count(figures.promotions))
    if figures.promotion_failures:
        promoted.append(f" ({figures.promotion_failures:.0f} failed)", style=numbers.alarm())
    table.add_row("promoted to memory", promoted)
    table.add_row("keys", numbers.count(figures.keys))
    table.add_row("active clients", numbers.count(figures.active_clients))
    for medium in sorted(figures.capacity_bytes_by_medium):
        capacity = figures.capacity_bytes_by_medium[medium]
        if capacity:
            used = figures.allocated_bytes_by_medium.get(medium)
            share = numbers.pct(used / capacity) if used is not None else numbers.UNKNOWN
            table.add_row(f"{visible(medium)} used", f"{share} ({size(used)} of {size(capacity)})")
    fullest = sorted(
        figures.segments.items(),
        key=lambda item: -((item[1].get("allocated_bytes") or 0.0) / (item[1].get("capacity_bytes") or 1.0)),
    )
    for name, seg in fullest[:MAX_SEGMENTS]:
        held, room = seg.get("allocated_bytes"), seg.get("capacity_bytes")
        share = numbers.pct(held / room) if held is not None and room else numbers.UNKNOWN
        table.add_row(f"segment {visible(name)}", f"{share} of {size(room)}")
    if len(fullest) > MAX_SEGMENTS:
        table.add_row("segments", f"{len(fullest) - MAX_SEGMENTS} more not shown")
    return table
