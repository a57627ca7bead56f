"""Rendering a BenchRun: the table people read, and the node_exporter textfile.

The JSON is BenchRun.as_dict() (base units: bytes, bytes per second, seconds).
"""

from __future__ import annotations

from pathlib import Path

from kvops import names
from kvops.bench.plan import DIRECTION_TITLES
from kvops.bench.results import BenchRun, CaseResult, LinkMax
from kvops.units import format_size, to_unit, unit_note

BAR_WIDTH = 30
_EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    """A horizontal bar of `fraction` (clipped to 0-1) of `width` cells, in eighths of a cell."""
    eighths = round(max(0.0, min(1.0, fraction)) * width * 8)
    full, rest = divmod(eighths, 8)
    return "█" * full + (_EIGHTHS[rest] if rest else "")


def link_line(link: LinkMax, unit: str) -> str:
    if not link.known:
        return f"link max unknown ({link.source}); bars are relative to the fastest case"
    assert link.bytes_per_second is not None
    return (
        f"link max {to_unit(link.bytes_per_second, unit):.1f} {unit}/s per direction ({link.source}); "
        "bars and % are of that, doubled for both-at-once"
    )


def render_table(run: BenchRun, unit: str = "GB") -> str:
    d = run.device
    lines = [
        f"kvops bench dma · device {d.index} {d.name} · {d.backend} {d.runtime} · torch {d.torch}",
        f"median of {run.repeats} timed repeats after {run.warmup} warm-up; device-event timing",
        link_line(run.link, unit),
        unit_note(unit),
    ]
    fastest = max((r.summary.median for r in run.results), default=0.0)
    groups: dict[tuple[str, str, bool], list[CaseResult]] = {}
    for r in run.results:
        groups.setdefault((r.case.memory, r.case.direction, r.case.blocks > 1), []).append(r)
    for (memory, direction, batched), rows in groups.items():
        shape = "batched: one copy per block, timed as one transfer" if batched else "one copy per transfer"
        lines.append("")
        lines.append(f"{memory} · {DIRECTION_TITLES[direction]} · {shape}")
        median = f"median {unit}/s"
        lines.append(f"  {'block':>14}  {median:>12}  {'p25–p75':>13}  {'min–max':>13}  {'link':>5}")
        for r in rows:
            s = r.summary
            fraction = r.link_fraction(run.link)
            size = format_size(r.case.block_bytes) + (f" ×{r.case.blocks}" if batched else "")
            shown = fraction if fraction is not None else (s.median / fastest if fastest else 0.0)
            flag = "" if r.verified else "  COPY CHECK FAILED"
            lines.append(
                f"  {size:>14}  {to_unit(s.median, unit):12.2f}  "
                f"{_range(s.p25, s.p75, unit):>13}  {_range(s.min, s.max, unit):>13}  "
                f"{_percent(fraction):>5}  {bar(shown)}{flag}"
            )
    return "\n".join(lines)


def _range(low: float, high: float, unit: str) -> str:
    return f"{to_unit(low, unit):.2f}–{to_unit(high, unit):.2f}"


def _percent(fraction: float | None) -> str:
    return "?" if fraction is None else f"{fraction * 100:.0f}%"


def textfile_text(run: BenchRun) -> str:
    """The run as Prometheus text for node_exporter's textfile collector (base units)."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_RunCollector(run))
    return generate_latest(registry).decode("utf-8")


def write_textfile(run: BenchRun, path: Path) -> None:
    """Atomically (temp file + rename, as node_exporter asks) write the run to `path`."""
    from prometheus_client import CollectorRegistry, write_to_textfile

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_RunCollector(run))
    write_to_textfile(str(path), registry)


class _RunCollector:
    """A prometheus_client collector over one finished run (built fresh on each collect)."""

    def __init__(self, run: BenchRun) -> None:
        self.run = run

    def describe(self) -> list[object]:
        return []

    def collect(self):  # type: ignore[no-untyped-def]
        from prometheus_client.core import GaugeMetricFamily

        run, d = self.run, self.run.device
        # The driver's numbering where the collector matched the GPU, else torch's.
        gpu = [run.link.gpu_index or str(d.index), run.link.gpu_uuid or d.uuid or "", d.vendor]

        def family(spec: names.MetricSpec) -> GaugeMetricFamily:
            return GaugeMetricFamily(spec.name, spec.help, labels=list(spec.labels))

        info = family(names.BENCH_DMA_INFO)
        info.add_metric([*gpu, d.name, d.backend, d.runtime, d.torch], 1.0)
        yield info
        if run.finished_at is not None:
            done = family(names.BENCH_DMA_FINISHED)
            done.add_metric(gpu, run.finished_at)
            yield done
        if run.link.known:
            assert run.link.bytes_per_second is not None
            link = family(names.BENCH_DMA_LINK_MAX)
            link.add_metric([*gpu, run.link.source], run.link.bytes_per_second)
            yield link
        stats = (
            (names.BENCH_DMA_BANDWIDTH, "median"),
            (names.BENCH_DMA_BANDWIDTH_MIN, "min"),
            (names.BENCH_DMA_BANDWIDTH_MAX, "max"),
        )
        for spec, attr in stats:
            fam = family(spec)
            for r in run.results:
                fam.add_metric([*gpu, *_case_labels(r)], getattr(r.summary, attr))
            yield fam
        fraction = family(names.BENCH_DMA_LINK_RATIO)
        for r in run.results:
            value = r.link_fraction(run.link)
            if value is not None:
                fraction.add_metric([*gpu, *_case_labels(r)], value)
        yield fraction


def _case_labels(r: CaseResult) -> list[str]:
    c = r.case
    return [c.direction, c.memory, str(c.block_bytes), str(c.blocks)]
