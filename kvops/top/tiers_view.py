"""The detail view's tier figures as Rich renderables (no Textual here): every tier of one
engine over the interval, and the derived signals of docs/tiers.md. Everything comes from the
engine's kvops.rates.interval() entry; untrusted names go through kvops.termsafe.visible().
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from kvops.rates import TierInterval
from kvops.termsafe import visible
from kvops.top import numbers
from kvops.top.board import Row
from kvops.top.history import TIERS
from kvops.top.store_view import size


def _ms(seconds: float | None) -> str:
    return numbers.UNKNOWN if seconds is None else f"{seconds * 1000:.2f} ms"


# pcie_cross_check's verdicts (kvops.rates), said as a person would. The receive counter is
# the GPUs' host link's: PCIe, or NVLink-C2C on Grace (issue 45).
CROSS_CHECK_TEXT = {
    "consistent": ("consistent with the GPUs' host-link receive", ""),
    "counted_not_moved": ("loads counted exceed host-link receive", numbers.alarm()),
    "moved_not_counted": ("the host link moved GBs the engine did not count", numbers.alarm("yellow")),
}


def signals_table(row: Row) -> Table:
    """The derived signals of docs/tiers.md: is the offload tier paying off, is it full,
    is it slow, do the engine's figures agree with the bus."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="dim")
    table.add_column()
    write_only = row.get("write_only_tier")
    table.add_row(
        "write-only tier",
        Text(numbers.UNKNOWN) if write_only is None
        else Text("yes: stored, never loaded back", numbers.alarm()) if write_only else Text("no"),
    )  # fmt: skip
    saved_per_gb = row.get("offload_tokens_saved_per_gb_moved")
    table.add_row("offload tokens saved per GB moved", numbers.count(saved_per_gb))
    failures = row.get("allocation_failures_per_second")
    table.add_row(
        "allocation failures /s",
        Text(
            numbers.UNKNOWN if failures is None else f"{failures:.2f}",
            style=numbers.alarm() if failures else "",
        ),
    )
    for label, name in (("stores skipped /s", "stores_skipped_per_second"),
                        ("tokens dropped /s", "dropped_tokens_per_second")):  # fmt: skip
        value = row.get(name)
        table.add_row(label, numbers.UNKNOWN if value is None else f"{value:.2f}")
    delays = row.get("lookup_delay_p99_seconds") or {}
    for mode in ("sync", "async"):
        table.add_row(f"lookup delay p99 ({mode})", _ms(delays.get(mode)))
    check = row.get("pcie_cross_check")
    text, style = CROSS_CHECK_TEXT.get(check or "", (visible(check) if check else numbers.UNKNOWN, ""))
    table.add_row("PCIe cross-check", Text(text, style=style))
    table.add_row("prompt tokens in the interval", numbers.count(row.get("prompt_tokens")))
    remote = row.get("host_memory_remote_numa_ratio")
    if remote is not None:  # a target on this host whose GPUs' NUMA nodes are known (issue 45)
        table.add_row(
            "host memory off the GPUs' NUMA node",
            Text(numbers.pct(remote), style=numbers.alarm() if remote > 0.5 else ""),
        )
    for label, name in (("promotion alloc. failures /s", "promotion_allocation_failures_per_second"),
                        ("stores dropped, pool full", "pool_full_drop_ratio")):  # fmt: skip
        value = row.get(name)
        if value is not None:  # vLLM multi-tier offloading / SimpleCPUOffloadConnector only
            shown = numbers.pct(value) if name.endswith("ratio") else f"{value:.2f}"
            table.add_row(label, Text(shown, style=numbers.alarm() if value else ""))
    if row.get("evicted_tokens_per_second") is not None:  # SGLang: device eviction, L3 storage
        table.add_row("tokens evicted /s", numbers.count(row.get("evicted_tokens_per_second")))
        table.add_row("eviction pass (mean)", _ms(row.get("eviction_mean_seconds")))
    for reason, tokens in sorted((row.get("storage_unfulfilled_tokens") or {}).items()):
        table.add_row(f"storage prefetch short ({visible(reason)})", f"{tokens:.0f} tok")
    if row.kind == "lmcache":  # LMCache's local CPU cache, its multi-process health
        table.add_row("evictions /s", numbers.ratio(row.get("evictions_per_second")))
        for name, chunks in sorted((row.get("lmcache_failures") or {}).items()):
            label = "failed " + visible(name).replace("/", " · ")
            table.add_row(label, Text(f"{chunks:.0f} chunks", style=numbers.alarm() if chunks else ""))
    _connector_rows(table, row)
    # Does it pay off (docs/payoff.md): the share the tiers below the GPU served, beside TTFT
    # (the left column of the detail view).
    table.add_row("offload share of prompt", numbers.pct(offload_share(row.get("tiers") or {})))
    _issue42_rows(table, row)
    return table


def _tokens(value: float) -> Text:
    return Text(f"{value:.0f} tok", style=numbers.alarm() if value else "")


def _issue42_rows(table: Table, row: Row) -> None:
    """Issue 42's figures where the engine has them: all caches' share of the prompt, SGLang's
    GPU pool, L3 lookup losses and load-back p90, KVBM's edges between lower tiers, LMCache's
    remote health."""
    share = row.get("cached_prompt_share")
    if share is not None:
        table.add_row("cached share of prompt (all caches)", numbers.pct(share))
    capacity = row.get("kv_capacity_tokens")
    pool = [row.get(f"kv_{state}_tokens") for state in ("used", "evictable", "available")]
    if capacity is not None or any(v is not None for v in pool):
        used, evictable, free = (numbers.count(v) for v in pool)
        table.add_row(
            "GPU pool (used/evictable/free of)", f"{used}/{evictable}/{free} of {numbers.count(capacity)} tok"
        )
    if row.get("storage_prefetch_hit_tokens") is not None:
        table.add_row("storage lookup hits", numbers.count(row.get("storage_prefetch_hit_tokens")))
    for label, name in (("backups dropped before storage", "backup_dropped_tokens"),
                        ("prefetches forfeited (aux pool)", "prefetch_aux_alloc_failed_tokens")):  # fmt: skip
        value = row.get(name)
        if value is not None:
            table.add_row(label, _tokens(value))
    for reason, tokens in sorted((row.get("storage_deferred_tokens") or {}).items()):
        table.add_row(f"storage prefetch deferred ({visible(reason)})", f"{tokens:.0f} tok")
    if row.get("load_back_p90_seconds") is not None:
        table.add_row("load-back p90", _ms(row.get("load_back_p90_seconds")))
    if row.get("eviction_seconds") is not None:
        table.add_row("time evicting", _ms(row.get("eviction_seconds")))
    for edge, blocks in sorted((row.get("transfer_blocks_by_edge") or {}).items()):
        src, _, dst = edge.partition("_to_")
        if "gpu" not in (src, dst):  # the tiers table shows the GPU's edges
            table.add_row(f"{visible(src)} → {visible(dst)}", f"{blocks:.0f} blocks")
    if row.kind == "lmcache":
        for label, name in (("remote put failures", "remote_put_failures"),
                            ("remote get (blocking) failures", "remote_get_blocking_failures"),
                            ("remote ping errors", "remote_ping_errors"),
                            ("local CPU eviction failures", "local_cpu_evict_failures"),
                            ("forced unpins", "forced_unpins")):  # fmt: skip
            value = row.get(name)
            if value is not None:
                table.add_row(label, Text(f"{value:.0f}", style=numbers.alarm() if value else ""))
        if row.get("remote_ping_successes") is not None:
            table.add_row("remote pings ok", numbers.count(row.get("remote_ping_successes")))
        if row.get("remote_ping_latency_seconds") is not None:
            table.add_row("remote ping (latest)", _ms(row.get("remote_ping_latency_seconds")))
        chunk_rows = (
            ("L1 chunks read/written/evicted", ("l1_read_chunks", "l1_write_chunks", "l1_evicted_chunks")),
            ("L2 chunks stored/prefetched", ("l2_stored_chunks", "l2_prefetched_chunks")),
        )
        for label, fields in chunk_rows:
            values = [row.get(n) for n in fields]
            if any(v is not None for v in values):
                table.add_row(label, "/".join(numbers.count(v) for v in values))


def unread_line(row: Row) -> Text | None:
    """The KV-related families on the target's page no reader consumes (issue 42), on a line of
    its own under the figures (long names would narrow the columns beside each other)."""
    unread = row.get("unread_families")
    if not unread:
        return None
    shown = ", ".join(visible(name) for name in unread[:8])
    more = f" (+{len(unread) - 8} more)" if len(unread) > 8 else ""
    text = Text(f"KV families on the page no kvops reader consumes ({len(unread)}): ", style="dim")
    text.append(shown + more, style="yellow")
    return text


def _connector_rows(table: Table, row: Row) -> None:
    """Issue 42: vLLM's KV connectors (NIXL, Mooncake), storage connectors' failed operations,
    HiSparse's hot-buffer hit rate, and families a label split that were read in part."""
    for name, figures in sorted((row.get("kv_transfers") or {}).items()):
        text = Text(
            f"{numbers.count(figures.transfers)} · {numbers.gbps(figures.bandwidth_bytes_per_second)}"
        )
        text.append(f" · p90 {_ms(figures.p90_transfer_seconds)}")
        failed = (figures.failed_transfers or 0.0) + (figures.failed_receives or 0.0)
        text.append(f" · {failed:.0f} failed", style=numbers.alarm() if failed else "")
        if figures.expired_requests is not None:
            expired = figures.expired_requests
            text.append(f" · {expired:.0f} expired", style=numbers.alarm("yellow") if expired else "")
        table.add_row(f"{visible(name)} transfers", text)
    for name, op in sorted((row.get("storage_operations") or {}).items()):
        if op.not_ok_operations:
            shown = f"{op.not_ok_operations:.0f} of {numbers.count(op.operations)}"
            table.add_row(f"{visible(name)} not ok", Text(shown, style=numbers.alarm()))
    if row.get("hisparse_hit_rate") is not None:
        table.add_row("HiSparse hot-buffer hits", numbers.pct(row.get("hisparse_hit_rate")))
    for family, label in sorted((row.get("partly_read_families") or {}).items()):
        table.add_row("read in part", Text(f"{visible(family)} (split by {visible(label)})", style="yellow"))


def offload_share(tiers: dict[str, TierInterval]) -> float | None:
    """The share of prompt tokens every tier below the GPU served together (None: unmeasured)."""
    shares = [t.prompt_share for name, t in tiers.items() if name != "gpu"]
    known = [s for s in shares if s is not None]
    return sum(known) if known else None


def _moved(moved: float | None, blocks: float | None) -> str:
    """Bytes moved one way, else blocks (an engine that counts blocks only: KVBM)."""
    if moved is not None:
        return numbers.gb(moved)
    return numbers.UNKNOWN if blocks is None else f"{blocks:.0f} blocks"


def _moved_cell(moved: float | None, blocks: float | None, failed: float | None) -> Text:
    """What moved one way, and the blocks whose transfer failed (KVBM object storage) in red."""
    text = Text(_moved(moved, blocks))
    if failed is not None:
        text.append(f" ({failed:.0f} failed)", style=numbers.alarm() if failed else "")
    return text


def _use(figures: TierInterval) -> str:
    usage, used, capacity = figures.usage_ratio, figures.used_tokens, figures.capacity_tokens
    text = numbers.pct(usage)
    if used is not None and capacity is not None:
        text += f" ({used:.0f} of {capacity:.0f} tok)"
    if figures.used_bytes is not None and usage is None:  # LMCache's local CPU cache
        text = numbers.gib(figures.used_bytes)
    if figures.used_bytes is not None and figures.capacity_bytes:  # a KV store's own view
        text += f" ({size(figures.used_bytes)} of {size(figures.capacity_bytes)})"
    blocks, pool = figures.used_blocks, figures.capacity_blocks
    if pool is not None:  # SimpleCPUOffloadConnector: pinned blocks of its pool (no block size)
        text = f"{numbers.count(blocks)} of {pool:.0f} blk pinned"
    return text


def _jobs(figures: TierInterval) -> Text:
    """vLLM multi-tier offloading: failed promotions/cascades in the interval (red when any),
    and the jobs in flight now (promotions/cascades)."""
    failed = [figures.promotion_failures, figures.cascade_failures]
    active = [figures.active_promotions, figures.active_cascades]
    if all(v is None for v in (*failed, *active)):
        return Text(numbers.UNKNOWN)
    count = sum(v or 0.0 for v in failed)
    text = Text(f"{count:.0f} failed", style=numbers.alarm() if count else "")
    text.append(f" · {numbers.count(active[0])}/{numbers.count(active[1])} in flight")
    return text


def tiers_table(row: Row) -> Table | Text:
    """Every tier of the engine (docs/tiers.md) over the interval: hits, prompt tokens it
    served, bytes and bandwidth each way, how full it is."""
    tiers = row.get("tiers") or {}
    if not tiers:
        return Text("tiers: none measured in this interval", style="dim")
    table = Table(box=None, padding=(0, 1), header_style="bold", title="Tiers", title_justify="left")
    for name, justify in (("Tier", "left"), ("Hit %", "right"), ("Tokens saved", "right"),
                          ("Of prompt", "right"), ("Stored", "right"), ("Loaded", "right"),
                          ("Store GB/s", "right"), ("Load GB/s", "right"), ("Use", "right")):  # fmt: skip
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    jobs = any(
        getattr(f, k) is not None
        for f in tiers.values()
        for k in ("promotion_failures", "cascade_failures", "active_promotions", "active_cascades")
    )
    if jobs:  # vLLM multi-tier offloading: its tiers' jobs
        table.add_column("Jobs (promote/cascade)", justify="right")
    configured: dict[str, TierInterval] = row.get("configured_tiers") or {}
    backpressure = any(f.backpressure_stores_dropped is not None for f in tiers.values())
    if backpressure:  # vLLM multi-tier offloading: stores its back-pressure dropped
        table.add_column("Dropped (bp)", justify="right")
    shown = [*(t for t in TIERS if t in tiers), *sorted(t for t in tiers if t not in TIERS)]
    for tier in shown:
        _tier_row(table, Text(visible(tier)), tiers[tier], jobs, backpressure)
        members = [n for n, f in sorted(configured.items()) if f.kind == tier]
        if len(members) > 1:  # tiers of one kind keep their identity: a row each under the kind
            for member in members:
                label = Text(f" └ {visible(member)}", style="dim")
                _tier_row(table, label, configured[member], jobs, backpressure)
    if any(tiers[t].hit_rate is None and tiers[t].engine_hit_rate is not None for t in shown):
        table.caption = "* the engine's own hit-rate gauge, over its own window"
        table.caption_justify = "left"
    return table


def _tier_row(table: Table, label: Text, figures: TierInterval, jobs: bool, backpressure: bool) -> None:
    """One tier's row: a kind's, or one configured tier (vLLM's `1:fs`) under it."""
    rate = figures.hit_rate
    if rate is not None:
        hit = numbers.marked(numbers.pct(rate), numbers.hit_rate_style(rate))
    elif figures.engine_hit_rate is not None:  # the caption explains the mark
        hit = Text(numbers.pct(figures.engine_hit_rate) + "*")
    else:
        hit = Text(numbers.UNKNOWN)
    table.add_row(
        label,
        hit,
        numbers.count(figures.tokens_saved),
        numbers.pct(figures.prompt_share),
        _moved_cell(figures.store_bytes, figures.store_blocks, figures.store_failed_blocks),
        _moved_cell(figures.load_bytes, figures.load_blocks, figures.load_failed_blocks),
        numbers.gbps(figures.store_bandwidth_bytes_per_second).removesuffix(" GB/s"),
        numbers.gbps(figures.load_bandwidth_bytes_per_second).removesuffix(" GB/s"),
        _use(figures),
        *([_jobs(figures)] if jobs else []),
        *([_dropped(figures)] if backpressure else []),
    )


def _dropped(figures: TierInterval) -> Text:
    """Stores (and their blocks) vLLM's back-pressure detector dropped in the interval."""
    stores, blocks = figures.backpressure_stores_dropped, figures.backpressure_blocks_dropped
    if stores is None:
        return Text(
            numbers.UNKNOWN if figures.backpressure_store_latency_ema_seconds_per_mib is None else "0"
        )
    return Text(f"{stores:.0f} ({numbers.count(blocks)} blk)", style=numbers.alarm() if stores else "")
