"""The `kvops top` Textual app: a target table, GPU and host panels, help and detail screens.

Scraping runs in a worker thread (one at a time: a slow scrape skips ticks instead of piling
up); its Snapshot comes back through call_from_thread, so the UI thread never waits on the
network. Everything shown is read from a Board (board.py), which takes its figures from
kvops.rates.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Input, Static

from kvops import gcsettle
from kvops.rates import GpuInterval, ratio
from kvops.snapshot import Snapshot
from kvops.termsafe import visible
from kvops.top import fleet, numbers
from kvops.top.board import SORTS, Board, Row, RowKey
from kvops.top.charts import ChartPanel
from kvops.top.hints import first_run_hint, short_reason
from kvops.top.history import Ring
from kvops.top.store_view import store_table
from kvops.top.table import Cell, TargetTable
from kvops.top.tiers_view import signals_table, tiers_table, unread_line
from kvops.top.view import View

log = logging.getLogger(__name__)

SPARK_WIDTH = 10
COLUMNS: tuple[tuple[str, str], ...] = (
    ("target", "Target"),
    ("model", "Model"),
    ("engine", "Eng"),
    ("kv", "KV\n%"),
    ("local", "Local\nhit %"),
    ("external", "Ext\nhit %"),
    # GB/s while moving (bytes / transfer time); the chart's is per wall-clock second.
    ("store", "Storing\nGB/s"),
    ("load", "Loading\nGB/s"),
    ("ratio", "Load:\nStore"),
    ("running", "Run"),
    ("waiting", "Wait"),
    ("preempt", "Pre-\nempt"),
    ("ttft", "TTFT\np90 ms"),
    ("store_trend", "Stored\nper s"),
    ("load_trend", "Loaded\nper s"),
)
# Shown only where the page needs them: the engine kind when the page mixes kinds, and the
# hit rate of each tier beyond the GPU cache and the offload tier ("Ext") that some engine has.
KIND_COLUMN = ("kind", "Kind")
TIER_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("host", "hit_host", "Host\nhit %"),
    ("disk", "hit_disk", "Disk\nhit %"),
    ("storage", "hit_storage", "Stor.\nhit %"),
    ("peer", "hit_peer", "Peer\nhit %"),
    ("external", "hit_external", "Conn.\nhit %"),
)
NUMERIC_COLUMNS = frozenset(
    ("kv", "local", "external", "store", "load", "ratio", "running", "waiting", "preempt", "ttft",
     *(key for _, key, _ in TIER_COLUMNS))
)  # fmt: skip
# Left out first when the terminal is narrow (the detail view and the charts still have
# them); target, model, KV % and the two hit rates always stay.
DROP_ORDER = (
    *(key for _, key, _ in reversed(TIER_COLUMNS)),
    "load_trend",
    "store_trend",
    "ttft",
    "engine",
    "ratio",
    "running",
    "preempt",
    "waiting",
    "load",
    "store",
    "kind",
)

# `--group-by`: one row per group, figures summed as kvops.top.fleet.group() sums them.
GROUP_COLUMNS: tuple[tuple[str, str], ...] = (
    ("group", "Group"),
    ("engines", "Engines"),
    ("down", "Down"),
    ("local", "Local\nhit %"),
    ("external", "Ext\nhit %"),
    ("store", "Storing\nGB/s"),
    ("load", "Loading\nGB/s"),
    ("stored", "Stored/s\nGB"),
    ("loaded", "Loaded/s\nGB"),
    ("running", "Run"),
    ("waiting", "Wait"),
    ("preempt", "Pre-\nempt"),
)
GROUP_NUMERIC = frozenset(key for key, _ in GROUP_COLUMNS if key != "group")
GROUP_DROP_ORDER = ("loaded", "stored", "preempt", "waiting", "running", "load", "store", "down")


def tier_hit_rate(row: Row, tier: str) -> float | None:
    """A tier's hit rate over the interval, else the engine's own gauge for it (KVBM's,
    over its own window); None where the engine has neither."""
    part = (row.get("tiers") or {}).get(tier)
    if part is None:
        return None
    return part.hit_rate if part.hit_rate is not None else part.engine_hit_rate


def columns_for(rows: list[Row]) -> tuple[tuple[str, str], ...]:
    """The main table's columns for these rows: the kind where kinds are mixed, and the
    tiers whose hit rate some row has beyond what its Ext column already shows."""
    kinds = {row.kind for row in rows if row.kind}
    tiers = [
        (key, label)
        for tier, key, label in TIER_COLUMNS
        if any(
            (rate := tier_hit_rate(row, tier)) is not None and rate != row.get("external_hit_rate")
            for row in rows
        )
    ]
    out = list(COLUMNS)
    if len(kinds) > 1:
        out.insert(3, KIND_COLUMN)
    at = next(i for i, (key, _) in enumerate(out) if key == "external") + 1
    out[at:at] = tiers
    return tuple(out)


class FrameSource(Protocol):
    """Where frames come from: live scrapes, a Prometheus server, or a replay."""

    description: str
    live: bool

    def next(self) -> Snapshot | tuple[Snapshot, Snapshot] | None:
        """Blocking: the next Snapshot, or (before, after) where the source computes the
        interval itself (Prometheus), or None when there is nothing new (the store has no
        newer sample, or a replay ended: then its `finished` is True)."""
        ...

    def close(self) -> None: ...


# What each column holds, for `?`: generated from here with the table's own headers, so a
# column the table gains without a line here fails help_text() (tests/top/test_help_text.py).
COLUMN_HELP: dict[str, str] = {
    "target": "the URL scraped; a target down says why in the Model column",
    "model": "the served model (else the engine kind)",
    "engine": "the engine's index (vLLM's data-parallel rank)",
    "kind": "the engine kind, when the page mixes kinds",
    "kv": "GPU KV cache in use now",
    "local": "prefix-cache hits in GPU memory / tokens looked up",
    "external": "hits in the offload tier (KV connector) / tokens looked up there",
    "hit_host": "hits in the host (CPU) tier / its lookups",
    "hit_disk": "hits in the disk tier / its lookups",
    "hit_storage": "hits in the remote storage tier / its lookups",
    "hit_peer": "hits served by a peer / its lookups",
    "hit_external": "hits the connector reported / its lookups",
    "store": "while storing (GPU -> offload tier): bytes / transfer time",
    "load": "while loading back to the GPU: bytes / transfer time",
    "ratio": "bytes loaded per byte stored",
    "running": "requests running now",
    "waiting": "requests waiting now",
    "preempt": "preemptions in the interval",
    "ttft": "time to first token, 90th percentile over the interval",
    "store_trend": "sparkline of bytes stored per wall-clock second",
    "load_trend": "sparkline of bytes loaded per wall-clock second",
}
KEYS_HELP: tuple[tuple[str, str], ...] = (
    ("q, Ctrl-C", "quit (from any screen)"),
    ("?", "this help (Esc closes it)"),
    ("/", "filter by URL, model or engine kind (Enter keeps, Esc clears)"),
    ("s", "next sort: " + ", ".join(name for name, _, _ in SORTS)),
    ("w", "charts' smoothing window: 1 s, 10 s, 1 min"),
    ("c", "charts for the whole fleet, or for the row under the cursor"),
    ("p", "pause / resume scraping"),
    ("↑ ↓", "pick a target (PgUp PgDn Home End)"),
    ("← →", "scroll sideways when the terminal is narrower than the table"),
    ("Enter", "detail view: every figure, each tier, the derived signals"),
)
_LINE_HELP = {
    "GPU cache": "prefix-cache hits in GPU memory / lookups",
    "offload tier": "hits in the offload tier / its lookups",
    "stored": "bytes stored to the offload tier per wall-clock second",
    "loaded": "bytes loaded back per wall-clock second",
    "TTFT p90": "time to first token, 90th percentile (ms, left scale)",
    "offload share": "share of prompt tokens served below the GPU (%, right scale)",
}
_ALARMS = (
    '[b]Alarms[/b]  marked "!" (and [bold red]red[/bold red]): hit rate under 50 %, PCIe link over 90 %'
    ' busy,\n/dev/shm or RAM smaller than the offload tier; a target down says "down" and why.\n'
    '"!" in [bold yellow]yellow[/bold yellow]: GPU KV cache 95 % full or more.\n'
    'NO_COLOR=1 turns colour off: alarms are then in reverse video, with the "!".'
)


def _help_rows(rows: list[tuple[str, str]], width: int = 14) -> list[str]:
    return [f"  {escape(name):<{width}}{escape(text)}" for name, text in rows]


def _one_line(header: str) -> str:
    """A two-line column header on one line: "Pre-" "empt" is "Pre-empt", "Load:" "Store"
    "Load:Store"."""
    return header.replace("-\n", "-").replace(":\n", ":").replace("\n", " ")


def help_text() -> str:
    """The `?` screen, from the keys above, the table's columns (COLUMNS, KIND_COLUMN,
    TIER_COLUMNS: every one the table can show) and the charts' legends (CHARTS, the tiers
    of the saved chart, the link maximum)."""
    from kvops.top.charts import CHARTS, LINK_MAX_MARKER, SHARE_LINE, TIER_LABELS, TIER_MARKERS

    columns = [*COLUMNS[:3], KIND_COLUMN, *COLUMNS[3:], *((key, label) for _, key, label in TIER_COLUMNS)]
    column_rows = [(_one_line(label), COLUMN_HELP[key]) for key, label in columns]
    chart_lines: list[str] = []
    for chart in CHARTS:
        chart_lines.append(f"  {escape(chart.title)} ({escape(chart.unit)})")
        legend = [(f"{line.marker}━ {line.label}", _LINE_HELP[line.label]) for line in chart.lines]
        if chart.key == "saved":  # a line per tier that served a token: one row for them all
            tiers = "  ".join(f"{TIER_MARKERS[t]}━ {label}" for t, label in TIER_LABELS.items())
            legend = [(tiers, ""), ("", "prompt tokens each tier served, per second")]
        if chart.key == "bandwidth":
            legend.append((f"{LINK_MAX_MARKER}━ link max", "the GPUs' PCIe link maximum, when near"))
        chart_lines += _help_rows(legend, 18)
    share = f"{SHARE_LINE} is drawn on its own scale, 0-100 %, labelled on the right edge"
    return "\n".join([
        "[b]kvops top[/b] — KV-cache offloading at a glance", "",
        "[b]Keys[/b]", *_help_rows(list(KEYS_HELP)), "",
        "[b]Columns[/b] (over the last interval)", *_help_rows(column_rows), "",
        "[b]Charts[/b] (the fleet summed, or the row under the cursor: c)", *chart_lines, f"  {share}", "",
        "[b]Units[/b]  GB/s = 10⁹ bytes per second · memory in GiB = 2³⁰ bytes · ratios in %.",
        '"-" means unknown: the target does not expose it, or nothing moved.', "", _ALARMS,
    ])  # fmt: skip


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark", "dismiss", "close help"),
        Binding("q", "app.quit", "quit"),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 84; max-width: 100%; height: auto; max-height: 100%;
                                  border: round $accent; padding: 0 1; background: $surface; }
    """

    def compose(self) -> ComposeResult:
        # Scrolls (arrow keys, PgDn) where the terminal is shorter than the help.
        with VerticalScroll():
            yield Static(help_text(), id="help")


_DETAIL_FIELDS: tuple[tuple[str, str, Any], ...] = (
    ("KV cache usage", "kv_cache_usage", numbers.pct),
    ("local hit rate", "local_hit_rate", numbers.pct),
    ("external hit rate", "external_hit_rate", numbers.pct),
    ("store bandwidth (while transferring)", "store_bandwidth_bytes_per_second", numbers.gbps),
    ("load bandwidth (while transferring)", "load_bandwidth_bytes_per_second", numbers.gbps),
    ("stored per wall second", "store_offered_bytes_per_second", numbers.gbps),
    ("loaded per wall second", "load_offered_bytes_per_second", numbers.gbps),
    ("load:store bytes", "load_store_ratio", numbers.ratio),
    ("stored in the interval", "store_bytes", numbers.gb),
    ("loaded in the interval", "load_bytes", numbers.gb),
    ("local tokens looked up", "local_queries", numbers.count),
    ("external tokens looked up", "external_queries", numbers.count),
    ("preemptions in the interval", "preemptions", numbers.count),
    ("requests running", "requests_running", numbers.count),
    ("requests waiting", "requests_waiting", numbers.count),
    ("offload tier configured", "cpu_tier_bytes", numbers.gib),
    # does offloading pay off (docs/payoff.md): the engine's own histograms over the interval
    ("TTFT p50", "ttft_p50_seconds", numbers.ms),
    ("TTFT p90", "ttft_p90_seconds", numbers.ms),
    ("queue time p50", "queue_time_p50_seconds", numbers.ms),
    ("queue time p90", "queue_time_p90_seconds", numbers.ms),
    ("first tokens in the interval", "first_tokens", numbers.count),
)


class DetailScreen(Screen[None]):
    """Every figure of one engine, with its charts over the last minutes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,enter,backspace", "app.pop_screen", "back"),
        Binding("q", "app.quit", "quit"),
        Binding("w", "app.window", "smoothing"),
        Binding("question_mark", "app.help", "help"),
    ]
    DEFAULT_CSS = """
    DetailScreen { padding: 0 1; }
    DetailScreen #detail-figures { height: auto; }
    """

    def __init__(self, board: Board, key: RowKey) -> None:
        super().__init__()
        self.board = board
        self.key = key

    def compose(self) -> ComposeResult:
        yield Static(id="detail-figures")
        yield ChartPanel(id="detail-charts")  # this engine's charts, with scales and time marks
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_figures()

    def refresh_figures(self) -> None:
        row = self.board.rows.get(self.key)
        if row is None:
            return
        table = Table.grid(padding=(0, 2))
        table.add_column(style="dim")
        table.add_column()
        # Text, never markup: a "[" in a name is shown; visible(): escapes are shown, not run.
        table.add_row("target", Text(visible(row.target)))
        table.add_row("model", Text(visible(row.model or numbers.UNKNOWN)))
        table.add_row("engine", Text(visible(row.engine or numbers.UNKNOWN)))
        table.add_row("engine kind", Text(visible(row.kind or numbers.UNKNOWN)))
        table.add_row(
            "state",
            Text("up", style="green") if row.up else Text(f"down: {visible(row.error)}", numbers.alarm()),
        )
        for label, name, fmt in _DETAIL_FIELDS:
            table.add_row(label, fmt(row.get(name)))
        layout = Table.grid(padding=(0, 4))
        store = store_table(row)  # a KV store's row: its own figures beside the rest
        layout.add_row(table, signals_table(row), *([store] if store is not None else []))
        unread = unread_line(row)  # issue 42: a line of its own
        parts = (layout, unread, tiers_table(row)) if unread is not None else (layout, tiers_table(row))
        self.query_one("#detail-figures", Static).update(Group(*parts))
        window = getattr(self.app, "window", 10.0)
        subject = f"{_short_target(row.target)} {_short_model(row.model)}"
        self.query_one("#detail-charts", ChartPanel).draw(row.trend, subject, window, None, self.board.frames)


MODEL_WIDTH = 28  # a longer model name is cut with "…"; the detail view has it whole


def _short_model(model: str) -> str:
    # "meta-llama/Llama-3.1-8B-Instruct" -> the part people say; the detail view has it all.
    short = visible(model.rsplit("/", 1)[-1])
    return short if len(short) <= MODEL_WIDTH else short[: MODEL_WIDTH - 1] + "…"


def _short_target(target: str) -> str:
    # http:// is the usual case; https:// stays visible.
    return visible(target.removeprefix("http://"))


def _model_cell(row: Row) -> Cell:
    """The model, else the engine kind (KVBM's page names no model, LMCache's is per worker)."""
    if row.model:
        return Cell(_short_model(row.model))
    return Cell(visible(row.kind) or numbers.UNKNOWN, "dim")


def _trend_cell(history: Ring, style: str) -> Cell:
    """A sparkline of the last SPARK_WIDTH values (read from the end of the history only)."""
    return Cell(numbers.sparkline(history.tail(SPARK_WIDTH), SPARK_WIDTH), style)


def _marked(text: str, style: str) -> Cell:
    """numbers.marked() as a table cell: the alarm mark after the figure where the style is one."""
    return Cell(numbers.flagged(text, style), style)


_UNKNOWN_CELL = Cell(numbers.UNKNOWN)


def _row_cells(row: Row) -> dict[str, Cell]:
    if not row.up:  # its reason in the Model column, a few words (Enter: the whole of it)
        alarm = numbers.alarm()
        cells = {key: _UNKNOWN_CELL for key, _ in COLUMNS}
        cells.update({key: _UNKNOWN_CELL for _, key, _ in TIER_COLUMNS})
        cells.update(
            target=Cell(_short_target(row.target), alarm),
            model=Cell(short_reason(row.error, MODEL_WIDTH), alarm),
            engine=Cell(visible(row.engine)), kv=Cell("down", alarm), kind=Cell(visible(row.kind)),
            store_trend=_trend_cell(row.store_history, ""), load_trend=_trend_cell(row.load_history, ""),
        )  # fmt: skip
        return cells
    kv = row.get("kv_cache_usage")
    local, external = row.get("local_hit_rate"), row.get("external_hit_rate")

    def num(value: float | None, scale: float, digits: int) -> str:
        return numbers.UNKNOWN if value is None else f"{value / scale:.{digits}f}"

    cells = {
        "target": Cell(_short_target(row.target)),
        "model": _model_cell(row),
        "engine": Cell(visible(row.engine)),
        "kind": Cell(visible(row.kind)),
        "kv": _marked(num(kv, 0.01, 1), numbers.usage_style(kv)),
        "local": _marked(num(local, 0.01, 1), numbers.hit_rate_style(local)),
        "external": _marked(num(external, 0.01, 1), numbers.hit_rate_style(external)),
        "store": Cell(num(row.get("store_bandwidth_bytes_per_second"), numbers.GB, 2)),
        "load": Cell(num(row.get("load_bandwidth_bytes_per_second"), numbers.GB, 2)),
        "ratio": Cell(numbers.ratio(row.get("load_store_ratio"))),
        "running": Cell(numbers.count(row.get("requests_running"))),
        "waiting": Cell(numbers.count(row.get("requests_waiting"))),
        "preempt": Cell(numbers.count(row.get("preemptions"))),
        "ttft": Cell(num(row.get("ttft_p90_seconds"), 0.001, 0)),
        "store_trend": _trend_cell(row.store_history, "cyan"),
        "load_trend": _trend_cell(row.load_history, "magenta"),
    }
    for tier, key, _ in TIER_COLUMNS:
        rate = tier_hit_rate(row, tier)
        cells[key] = _marked(num(rate, 0.01, 1), numbers.hit_rate_style(rate))
    return cells


def _group_cells(group: fleet.Group) -> dict[str, Cell]:
    """One --group-by row, the figures kvops.top.fleet.group() summed."""

    def num(value: float | None, scale: float, digits: int, style: str = "") -> Cell:
        return _marked(numbers.UNKNOWN if value is None else f"{value / scale:.{digits}f}", style)

    def rate(value: float | None) -> Cell:
        return num(value, 0.01, 1, numbers.hit_rate_style(value))

    return {
        "group": Cell(visible(group.group) or numbers.UNKNOWN),
        "engines": Cell(str(group.engines)),
        "down": Cell(str(group.engines_down), numbers.alarm() if group.engines_down else ""),
        "local": rate(group.local_hit_rate),
        "external": rate(group.external_hit_rate),
        "store": num(group.store_bandwidth_bytes_per_second, numbers.GB, 2),
        "load": num(group.load_bandwidth_bytes_per_second, numbers.GB, 2),
        "stored": num(group.store_offered_bytes_per_second, numbers.GB, 2),
        "loaded": num(group.load_offered_bytes_per_second, numbers.GB, 2),
        "running": Cell(numbers.count(group.requests_running)),
        "waiting": Cell(numbers.count(group.requests_waiting)),
        "preempt": Cell(numbers.count(group.preemptions)),
    }


GPU_HEADERS = ("Name", "Memory GiB", "PCIe TX GB/s", "PCIe RX GB/s", "Link max GB/s")
GPU_HEADERS_SHORT = ("Name", "Mem GiB", "TX GB/s", "RX GB/s", "Max GB/s")
# Where a GPU's host copies ride NVLink-C2C (Grace, issue 45): host-link columns and a Link column.
GPU_HEADERS_HOST_LINK = ("Name", "Memory GiB", "Host TX GB/s", "Host RX GB/s", "Link max GB/s", "Link")
GPU_HEADERS_HOST_LINK_SHORT = ("Name", "Mem GiB", "TX GB/s", "RX GB/s", "Max GB/s", "Link")


def gpu_table(board: Board, simulated: bool = False, width: int = 200) -> Table | Text:
    """One line per GPU, never wrapped: where `width` cannot hold the bars they are left out,
    then the headers are shortened; a name still too long is cut with "…" (the detail view and
    --once have it whole)."""
    gpus = board.interval.gpus if board.interval is not None else []
    if not gpus:
        return Text("GPUs: none reported by this source", style="dim")
    c2c = any(g.host_link_kind == "c2c" for g in gpus)
    for bars, short in ((True, False), (True, True), (False, True)):
        first = ("Sim. GPU" if short else "GPU (simulated)") if simulated else "GPU"
        names = (
            (GPU_HEADERS_HOST_LINK_SHORT if short else GPU_HEADERS_HOST_LINK)
            if c2c
            else (GPU_HEADERS_SHORT if short else GPU_HEADERS)
        )
        headers: tuple[str, ...] = (first, *names)
        rows = [_gpu_cells(g, bars, short, c2c) for g in gpus]
        needed = sum(max(len(h), *(r[i].cell_len for r in rows)) for i, h in enumerate(headers))
        if needed + 2 * len(headers) <= width:  # padding (0, 1): a cell each side of every column
            break
    table = Table(box=None, padding=(0, 1), header_style="bold", expand=False)
    for name in headers:
        table.add_column(name, no_wrap=True, overflow="ellipsis")
    for cells in rows:
        table.add_row(*cells)
    return table


def _gpu_cells(g: GpuInterval, bars: bool, short: bool, link_column: bool = False) -> list[Text]:
    used, total = g.memory_used_bytes, g.memory_total_bytes
    tx, rx, link = g.shown_link()  # issue 45: NVLink-C2C's figures on a Grace GPU

    def direction(rate: float | None, fraction: float | None) -> Text:
        if rate is None:
            return Text(numbers.UNKNOWN)
        text = Text(numbers.bar(fraction, 8) + " " if bars and fraction is not None else "", style="cyan")
        share = f" ({fraction * 100:.0f} %)" if fraction is not None else ""
        return text.append_text(
            numbers.marked(f"{rate / numbers.GB:.2f}{share}", numbers.link_style(fraction))
        )

    fraction_used = used / total if used is not None and total else None
    memory = Text(
        numbers.bar(fraction_used, 8) + " " if bars and fraction_used is not None else "", style="green"
    )
    of = f"{numbers.gib(used).removesuffix(' GiB')} / {numbers.gib(total)}"
    memory.append(of.replace(" GiB", "").replace(" / ", "/") if short else of)
    return [
        Text(visible(g.gpu)),
        Text(visible(g.name or numbers.UNKNOWN)),
        memory,
        direction(tx, ratio(tx, link)),
        direction(rx, ratio(rx, link)),
        Text(numbers.UNKNOWN if link is None else f"{link / numbers.GB:.1f}"),
        *([Text(g.link_label)] if link_column else []),
    ]


def host_line(
    board: Board, simulated: bool = False, width: int = 200, simulated_targets: frozenset[str] = frozenset()
) -> Text:
    """The host's RAM and /dev/shm against the offload tier. `simulated`: the demo's host,
    said so. `simulated_targets`: kvops sim's targets, whose tiers are not judged against this
    real host (a simulated 64 GiB tier on a 16 GiB laptop was a red false alarm)."""
    host = board.interval.host if board.interval is not None else {}
    tier = board.offload_tier_bytes(simulated_targets)
    sim_tier = board.offload_tier_bytes() if tier is None and simulated_targets else None
    if not host:
        tier_text = f" · offload tier configured {numbers.gib(tier)}" if tier else ""
        return Text(f"Host: not reported by this source{tier_text}", style="dim")
    available, total = host.get("memory_available_bytes"), host.get("memory_total_bytes")
    shm_free = host.get("shm_free_bytes")

    def build(host: str, ram: str, of: str, shm: str, tier_label: str) -> Text:
        line = Text(host + ram)
        ram_text = f"{numbers.gib(available)}{of}{numbers.gib(total)}"
        if of == "/":  # "424.0/512.0 GiB"
            ram_text = f"{numbers.gib(available).removesuffix(' GiB')}/{numbers.gib(total)}"
        line.append_text(numbers.marked(ram_text, numbers.room_style(available, tier)))
        shm_text = numbers.marked(numbers.gib(shm_free), numbers.room_style(shm_free, tier))
        line.append(shm).append_text(shm_text)
        if tier:
            line.append(f" · {tier_label} {numbers.gib(tier)}")
        elif sim_tier:
            line.append(f" · {tier_label} {numbers.gib(sim_tier)} simulated, not judged against this host")
        else:
            line.append(f" · {tier_label} not reported")
        return line

    line = build("Host (simulated): " if simulated else "Host: ", "RAM available ", " of ",
                 " · /dev/shm free ", "offload tier")  # fmt: skip
    if line.cell_len > width:  # one line, never wrapped: the same figures in fewer words
        line = build("Sim. host: " if simulated else "Host: ", "RAM free ", "/", " · shm free ", "tier")
    return line


def fit_status(parts: list[tuple[str, str]], width: int) -> Text:
    """The status parts on one line of `width`: the first (the source's description) is cut
    with "…" so the state after it (down, sort, paused...) stays whole; then trailing parts go."""
    rest = Text(" · ").join(Text(text, style=style) for text, style in parts[1:])
    while len(parts) > 2 and rest.cell_len > width - 12:
        parts = parts[:-1]
        rest = Text(" · ").join(Text(text, style=style) for text, style in parts[1:])
    room = width - rest.cell_len - (3 if parts[1:] else 0)
    first, style = parts[0]
    if len(first) > room:
        first = first[: max(0, room - 1)] + "…" if room > 1 else ""
    line = Text(first, style=style)
    if parts[1:]:
        line.append(" · ").append_text(rest)
    return line


class TopApp(App[int]):
    TITLE = "kvops top"
    # Textual's palette holds only Textual's own commands (theme, screenshot...): no ^p hint.
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        # Every top-like tool quits on Ctrl-C; Textual's default only says "press ctrl+q".
        # priority: also while the filter box (an Input) has the focus.
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("slash", "filter", "filter", key_display="/"),
        Binding("s", "sort", "sort"),
        Binding("w", "window", "smooth"),  # short labels: the footer fits 80 columns
        Binding("c", "charts", "charts"),
        Binding("p", "pause", "pause"),
    ]
    CSS = """
    #status { height: 1; background: $boost; padding: 0 1; }
    #hint { height: auto; padding: 0 1; display: none; }
    #hint.shown { display: block; }
    #targets { height: auto; max-height: 60%; }
    #panels { height: auto; max-height: 12; padding: 0 1; }
    #filter { dock: bottom; display: none; }
    #filter.shown { display: block; }
    """

    def __init__(self, source: FrameSource, interval: float = 1.0, view: View | None = None) -> None:
        super().__init__()
        view = view or View()
        self.source = source
        self.interval = interval
        self.board = Board()
        self.paused = False
        self.sort_index = view.sort
        self.text_filter = view.text_filter
        self.top = view.top
        self.window = view.window
        self.group_by = view.group_by  # rows are groups of engines (model, instance or kind)
        self.charts_follow_cursor = False  # False: the fleet summed
        self.ended = False  # a replay played its last frame
        self._scraping = False
        self.scrape_error: str | None = None
        self._shown: dict[str, str] = {}  # selector -> what its Static shows now
        # Set by the command (not in tests, which share one process): freeze start-up's
        # objects out of the collector once the first frame is drawn (kvops.gcsettle).
        self.settle_gc = False

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        yield Static(id="hint")
        yield TargetTable(COLUMNS, right=NUMERIC_COLUMNS, drop_order=DROP_ORDER, id="targets")
        yield ChartPanel(id="charts")
        with Vertical(id="panels"):
            yield Static(id="gpus")
            yield Static(id="host")
            yield Static(id="collectors")
        yield Input(placeholder="filter by target URL or model; Enter keeps, Esc clears", id="filter")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#targets", TargetTable).focus()
        self._render_all()
        self._tick()
        self.set_interval(self.interval, self._tick)

    def on_resize(self) -> None:
        # The status line, GPU table and host line are laid out for the width: lay them out again.
        self._render_all()

    # --- scraping: a worker thread per frame, one at a time --------------------------------
    def _tick(self) -> None:
        if self.paused or self._scraping or self.ended:
            return
        self._scraping = True
        set_page = getattr(self.source, "set_page", None)
        if set_page is not None:
            # The store's fleet view fetches whole only the engines the table can show, in
            # target order; a sort on a figure needs every engine's figures.
            table = self.query_one("#targets", TargetTable)
            room = max(1, int(self.size.height * 0.6) - 2, table.size.height - 2)
            # Groups sum every engine.
            whole = self.sort_index != 0 or self.group_by is not None
            set_page(None if whole else room, "" if self.group_by else self.text_filter)
        # A daemon thread rather than a Textual thread worker: those run on asyncio's default
        # executor, which the process waits for at exit, so `q` during a hung scrape would
        # hang for the whole scrape timeout.
        threading.Thread(target=self._fetch, name="kvops-top-scrape", daemon=True).start()

    def _fetch(self) -> None:
        error: str | None = None
        snap: Snapshot | tuple[Snapshot, Snapshot] | None = None
        fleet = None
        try:
            snap = self.source.next()
            fleet = getattr(self.source, "last_fleet", None)
        except Exception as exc:  # a source bug must not take the screen down
            log.exception("scrape failed")
            error = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        if not self.is_running:  # quit during the scrape: nobody to hand it to
            return
        with contextlib.suppress(RuntimeError):  # the app closed in between
            self.call_from_thread(self._apply, snap, error, fleet)

    def _apply(
        self, snap: Snapshot | tuple[Snapshot, Snapshot] | None, error: str | None, fleet: Any = None
    ) -> None:
        self._scraping = False
        self.scrape_error = error
        if isinstance(snap, tuple):
            self.board.update(snap[1], before=snap[0], fleet=fleet)
        elif snap is not None:
            self.board.update(snap)
        elif error is None and getattr(self.source, "finished", False):
            self.ended = True
        self._render_all()
        if self.settle_gc and self.board.frames:
            self.settle_gc = False
            gcsettle.settle()

    # --- rendering ------------------------------------------------------------------------
    def _render_all(self) -> None:
        self._render_table()
        self._render_charts()
        self._render_status()
        simulated = bool(getattr(self.source, "simulated_hardware", False))
        gpus = self.board.interval.gpus if self.board.interval is not None else []
        width = max(20, self.size.width - 2)  # #panels' padding
        self._update("#gpus", repr((gpus, width)), lambda: gpu_table(self.board, simulated, width))
        hint = "\n".join(first_run_hint(self.board, self.source))
        self.query_one("#hint", Static).set_class(bool(hint), "shown")
        self._update("#hint", hint, lambda: Text(hint, style="bold"))
        sim_targets: frozenset[str] = getattr(self.source, "simulated_targets", frozenset())
        host = host_line(self.board, simulated, width, sim_targets)
        self._update("#host", repr(host), lambda: host)
        failing = [c for c in self.board.collectors if not c.success and c.name not in ("vllm", "lmcache")]
        note = visible(" · ".join(f"{c.name}: {c.error}" for c in failing))
        self._update("#collectors", note, lambda: Text(note, style="dim"))
        if isinstance(self.screen, DetailScreen):
            self.screen.refresh_figures()

    def _render_charts(self) -> None:
        board = self.board
        table = self.query_one("#targets", TargetTable)
        key = table.cursor_key if self.charts_follow_cursor else None
        row = board.rows.get(key) if key is not None else None
        if row is not None:
            subject = f"{_short_target(row.target)} {_short_model(row.model)}".strip()
            trend, link = row.trend, None
        else:
            up = board.fleet_engines or sum(1 for r in board.rows.values() if r.up)
            subject = f"fleet, {up} engine(s) up"
            trend, link = board.fleet, board.fleet_link_max
        self.query_one("#charts", ChartPanel).draw(trend, subject, self.window, link, (board.frames, key))

    def _update(self, selector: str, key: str, build: Callable[[], Any]) -> None:
        """Update a Static only when what it shows changed: each update costs a layout pass."""
        if self._shown.get(selector) != key:
            self._shown[selector] = key
            self.query_one(selector, Static).update(build())

    def _render_status(self) -> None:
        # A Text, not markup: URLs, filters and errors may hold "[" that markup would eat.
        rows = self.board.rows.values()
        down = sum(1 for r in rows if not r.up)
        parts: list[tuple[str, str]] = [
            (visible(self.source.description), ""),
            (f"{len(self.board.rows)} engine(s)", ""),
        ]
        more = (self.board.fleet_engines or 0) - len(self.board.rows)
        if self.board.fleet_engines is not None and more > 0:
            parts[-1] = (f"{len(self.board.rows)} of {self.board.fleet_engines} engine(s), {more} more: "
                         "filter (/) or sort (s) to see them", "")  # fmt: skip
        if down:
            parts.append((f"{down} down", numbers.alarm()))
        if self.board.rows_cut:
            parts.append(
                (f"{self.board.rows_cut} more engine(s) not kept (row cap)", numbers.alarm("yellow"))
            )
        if self.group_by:
            parts.append((f"grouped by {self.group_by}", "bold"))
        parts.append((f"sort: {SORTS[self.sort_index][0]}", ""))
        if self.charts_follow_cursor:  # else the charts are the fleet's, the usual case
            parts.append((f"charts: {visible(self.query_one('#charts', ChartPanel).subject)}", ""))
        if self.text_filter:
            parts.append((f"filter: {visible(self.text_filter)!r}", ""))
        if self.paused:
            parts.append(("PAUSED", "bold yellow"))
        if self.ended:
            parts.append(("replay finished, holding the last frame (q quits)", ""))
        elif self.board.frames == 0:
            parts.append(("waiting for the first scrape…", ""))
        elif self.board.frames == 1 and not self.board.has_interval:
            parts.append(("rates from the next frame on", ""))
        if self.scrape_error:  # second, where a one-line status cannot cut it off
            parts.insert(1, (f"scrape error: {visible(self.scrape_error)}", numbers.alarm()))
        status = fit_status(parts, max(20, self.size.width - 2))  # #status's padding
        self._update("#status", repr(status), lambda: status)

    def _render_table(self) -> None:
        table = self.query_one("#targets", TargetTable)
        if self.group_by:
            self._render_groups(table, self.group_by)
            return
        rows = self.board.visible(self.text_filter, self.sort_index)
        columns = columns_for(rows)
        table.set_columns(columns, NUMERIC_COLUMNS, DROP_ORDER)
        keys = [key for key, _ in columns]

        def cells_of(i: int) -> list[Cell]:
            cells = _row_cells(rows[i])
            return [cells[key] for key in keys]

        table.set_rows([row.key for row in rows], cells_of)

    def _render_groups(self, table: TargetTable, by: str) -> None:
        """One row per group: what `--once --group-by` prints, from the same fleet.group()."""
        frame = self.board.interval
        engines = fleet.filtered(frame.targets if frame is not None else [], self.text_filter)
        groups = fleet.group(engines, by, frame.interval_seconds if frame is not None else None)
        _, figure, worst_first_low = SORTS[self.sort_index % len(SORTS)]
        if figure is not None:
            known = [g for g in groups if g.sort_value(figure) is not None]
            known.sort(key=lambda g: (g.sort_value(figure), g.group), reverse=not worst_first_low)
            groups = known + [g for g in groups if g.sort_value(figure) is None]
        columns = (("group", by.capitalize()), *GROUP_COLUMNS[1:])
        table.set_columns(columns, GROUP_NUMERIC, GROUP_DROP_ORDER)
        keys = [key for key, _ in columns]

        def cells_of(i: int) -> list[Cell]:
            cells = _group_cells(groups[i])
            return [cells[key] for key in keys]

        table.set_rows([(f"--group-by {by}", g.group, "") for g in groups], cells_of)

    # --- actions ----------------------------------------------------------------------------
    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self._render_all()

    def action_window(self) -> None:
        windows = (1.0, 10.0, 60.0)
        self.window = (
            windows[(windows.index(self.window) + 1) % len(windows)] if self.window in windows else 10.0
        )
        self._render_charts()
        if isinstance(self.screen, DetailScreen):
            self.screen.refresh_figures()

    def action_charts(self) -> None:
        self.charts_follow_cursor = not self.charts_follow_cursor
        self._render_charts()

    def action_pause(self) -> None:
        self.paused = not self.paused
        self._render_status()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("shown")
        box.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.text_filter = event.value.strip()
        self._render_all()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        self.query_one("#filter", Input).remove_class("shown")
        self.query_one("#targets", TargetTable).focus()

    def on_key(self, event: Any) -> None:
        box = self.query_one("#filter", Input)
        if event.key == "escape" and box.has_focus:
            box.value = ""
            box.remove_class("shown")
            self.query_one("#targets", TargetTable).focus()
            event.stop()

    def on_target_table_selected(self, event: TargetTable.Selected) -> None:
        if event.key in self.board.rows:  # a --group-by row has no detail of its own
            self.push_screen(DetailScreen(self.board, event.key))

    def on_unmount(self) -> None:
        self.source.close()
