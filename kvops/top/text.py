"""One frame as plain text, for `kvops top --once` (scripts, bug reports)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvops.rates import ratio
from kvops.termsafe import visible
from kvops.top import fleet, numbers
from kvops.top.board import Board

if TYPE_CHECKING:
    from kvops.top.view import View

_HEADER = ("TARGET", "MODEL", "ENG", "KV", "LOCAL HIT", "EXT HIT", "STORE", "LOAD", "LOAD:STORE",
           "RUN", "WAIT", "PREEMPT", "TTFT P90")  # fmt: skip


def render(
    board: Board,
    simulated: bool = False,
    view: View | None = None,
    simulated_targets: frozenset[str] = frozenset(),
) -> str:
    """The frame as text; `simulated`: the GPU and host come from the demo's simulator;
    `view`: sort, filter, at most `top` engines (the rest counted), fleet groups."""
    rows: list[tuple[str, ...]] = [_HEADER]
    shown = board.visible(view.text_filter, view.sort) if view else board.visible()
    rest = 0
    if view and view.top is not None and len(shown) > view.top:
        shown, rest = shown[: view.top], len(shown) - view.top
    for row in shown:
        if not row.up:
            rows.append((visible(row.target), visible(row.model or row.kind or numbers.UNKNOWN),
                         visible(row.engine or numbers.UNKNOWN), f"DOWN: {visible(row.error)}",
                         *([""] * 9)))  # fmt: skip
            continue
        rows.append((
            visible(row.target),
            visible(row.model or row.kind or numbers.UNKNOWN),  # KVBM names no model: its kind
            visible(row.engine),
            _usage(row.get("kv_cache_usage")),
            _hit_rate(row.get("local_hit_rate")),
            _hit_rate(row.get("external_hit_rate")),
            numbers.gbps(row.get("store_bandwidth_bytes_per_second")),
            numbers.gbps(row.get("load_bandwidth_bytes_per_second")),
            numbers.ratio(row.get("load_store_ratio")),
            numbers.count(row.get("requests_running")),
            numbers.count(row.get("requests_waiting")),
            numbers.count(row.get("preemptions")),
            numbers.ms(row.get("ttft_p90_seconds")),
        ))  # fmt: skip
    if len({row.kind for row in shown if row.up and row.kind}) > 1:  # mixed kinds: name each
        kinds = ["KIND", *(visible(row.kind) for row in shown)]
        rows = [(*r[:3], kind, *r[3:]) for r, kind in zip(rows, kinds, strict=True)]
    lines = _columns(rows)
    if rest:
        lines.append(f"… and {rest} more engine(s) (--top)")
    frame = board.interval
    if view and view.group_by:
        lines.append("")
        # The engines --filter leaves, as --json and the live view group them.
        engines = fleet.filtered(frame.targets if frame is not None else [], view.text_filter)
        seconds = frame.interval_seconds if frame is not None else None
        lines.extend(_groups(fleet.group(engines, view.group_by, seconds), view.group_by))
    for g in frame.gpus if frame is not None else []:
        tx, rx, link = g.shown_link()  # NVLink-C2C's on a Grace GPU (issue 45), else PCIe's
        label = "Simulated GPU" if simulated else "GPU"
        lines.append(
            f"{label} {visible(g.gpu)} {visible(g.name or '')}:"
            f" memory {numbers.gib(g.memory_used_bytes)}"
            f" of {numbers.gib(g.memory_total_bytes)},"
            f" {g.link_label} TX {_link(tx, ratio(tx, link))}"
            f" RX {_link(rx, ratio(rx, link))}"
            f" (link max {numbers.gbps(link)} per direction)"
        )
    host = frame.host if frame is not None else {}
    if host:
        available, total = host.get("memory_available_bytes"), host.get("memory_total_bytes")
        tier, shm_free = board.offload_tier_bytes(simulated_targets), host.get("shm_free_bytes")
        sim_tier = board.offload_tier_bytes() if tier is None and simulated_targets else None
        lines.append(
            f"{'Simulated host' if simulated else 'Host'}:"
            f" RAM available {numbers.flagged(numbers.gib(available), numbers.room_style(available, tier))}"
            f" of {numbers.gib(total)},"
            f" /dev/shm free {numbers.flagged(numbers.gib(shm_free), numbers.room_style(shm_free, tier))},"
            + (f" offload tier {numbers.gib(sim_tier)} simulated, not judged against this host"
               if sim_tier else f" offload tier {numbers.gib(tier)}")
        )  # fmt: skip
    lines.extend(_numa_flags(frame.targets if frame is not None else []))
    failing = [c for c in board.collectors if not c.success and c.name not in ("vllm", "lmcache")]
    for c in failing:
        lines.append(f"Collector {visible(c.name)} failed: {visible(c.error)}")
    seconds = frame.interval_seconds if frame is not None else None
    lines.append(f"Interval: {seconds:g} s" if seconds else "Interval: unknown")
    return "\n".join(lines)


# NUMA placement (issue 45): most of a target's host memory, where its offload pool lives, on a
# node none of its GPUs sit on. The evidence is both sides: numa_maps and the GPUs' nodes.
NUMA_REMOTE_FLAG = 0.5


def _numa_flags(entries: list[Any]) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for e in entries:
        ratio_ = getattr(e, "host_memory_remote_numa_ratio", None)
        if ratio_ is None or ratio_ <= NUMA_REMOTE_FLAG or e.target in seen:
            continue
        seen.add(e.target)
        out.append(
            f"NUMA! {visible(e.target)}: {numbers.pct(ratio_)} of its host memory (/proc/PID/numa_maps)"
            " sits on a node none of its GPUs is on (sysfs numa_node):"
            " playbooks/KvopsOffloadPoolRemoteNuma.md"
        )
    return out


def _groups(groups: list[fleet.Group], by: str) -> list[str]:
    rows: list[tuple[str, ...]] = [(by.upper(), "ENGINES", "DOWN", "LOCAL HIT", "EXT HIT", "STORE", "LOAD",
                                    "STORED/S", "LOADED/S", "RUN", "WAIT", "PREEMPT")]  # fmt: skip
    for g in groups:
        rows.append((
            visible(g.group or numbers.UNKNOWN), str(g.engines), str(g.engines_down),
            _hit_rate(g.local_hit_rate), _hit_rate(g.external_hit_rate),
            numbers.gbps(g.store_bandwidth_bytes_per_second),
            numbers.gbps(g.load_bandwidth_bytes_per_second),
            numbers.gbps(g.store_offered_bytes_per_second),
            numbers.gbps(g.load_offered_bytes_per_second),
            numbers.count(g.requests_running),
            numbers.count(g.requests_waiting),
            numbers.count(g.preemptions),
        ))  # fmt: skip
    return _columns(rows)


# The live table's alarms (kvops.top.numbers' *_style()), marked "!" as it marks them.
def _hit_rate(value: float | None) -> str:
    return numbers.flagged(numbers.pct(value), numbers.hit_rate_style(value))


def _usage(value: float | None) -> str:
    return numbers.flagged(numbers.pct(value), numbers.usage_style(value))


def _link(rate: float | None, fraction: float | None) -> str:
    return numbers.flagged(numbers.gbps(rate), numbers.link_style(fraction))


def _columns(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
