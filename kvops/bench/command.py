"""`kvops bench dma`: host<->GPU copy bandwidth by block size, beside what the link allows.

Standard library only at module level: --help and --dry-run work without torch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from kvops.errors import UsageError

if TYPE_CHECKING:
    from kvops.bench.plan import Plan
    from kvops.bench.results import CaseFailure, CaseResult

DMA_HELP = "pinned/pageable host<->GPU copy bandwidth by block size (needs torch and a CUDA/ROCm GPU)"


EXAMPLES = """\
examples:
  kvops bench dma --dry-run
  kvops bench dma --sizes 512KiB 2MiB --device 0 --json
"""


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bench_command", metavar="BENCH", help="one of:")
    dma = sub.add_parser(
        "dma",
        help=DMA_HELP,
        description=DMA_HELP
        + ". Bandwidth is printed in GB/s (1 GB = 10^9 bytes) unless --unit GiB; block sizes in "
        "KiB/MiB (2^10/2^20 bytes). JSON and textfile figures are bytes per second.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    configure_dma(dma)


def configure_dma(p: argparse.ArgumentParser) -> None:
    from kvops.bench import plan  # stdlib-only module

    default_sizes = " ".join(_short(s) for s in plan.DEFAULT_SIZES)
    p.add_argument(
        "--sizes",
        nargs="+",
        metavar="SIZE",
        help=f"block sizes, e.g. 512KiB 2MiB (KiB/MiB binary, KB/MB decimal; default {default_sizes})",
    )
    p.add_argument(
        "--directions", nargs="+", choices=plan.DIRECTIONS, help="default: all (bidir = two streams at once)"
    )
    p.add_argument("--memory", nargs="+", choices=plan.MEMORIES, help="host memory kinds (default: both)")
    p.add_argument(
        "--blocks",
        type=int,
        default=plan.DEFAULT_BLOCKS,
        help="blocks per batched transfer, one copy each as vLLM issues them; 1 = single copies only "
        f"(default {plan.DEFAULT_BLOCKS}, capped at 1 GiB per transfer)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=plan.DEFAULT_REPEATS,
        help=f"timed repeats per case (default {plan.DEFAULT_REPEATS})",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=plan.DEFAULT_WARMUP,
        help=f"untimed repeats first (default {plan.DEFAULT_WARMUP})",
    )
    p.add_argument(
        "--device", type=int, default=0, help="torch's GPU index, after CUDA_VISIBLE_DEVICES (default 0)"
    )
    p.add_argument(
        "--link-max-gbps",
        type=float,
        metavar="GB/S",
        help="per-direction link bandwidth to compare with, GB/s (10^9 B/s); default: the GPU collector's",
    )
    p.add_argument(
        "--unit", choices=("GB", "GiB"), default="GB", help="bandwidth unit of the table (default GB)"
    )
    p.add_argument("--json", action="store_true", help="print JSON only (bytes, bytes/s, seconds)")
    p.add_argument("--textfile", type=Path, metavar="FILE", help="also write node_exporter textfile (*.prom)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit; needs no torch or GPU")


def run(args: argparse.Namespace) -> int:
    if getattr(args, "bench_command", None) != "dma":
        raise UsageError("which benchmark? the one there is: kvops bench dma (see kvops bench dma --help)")
    return run_dma(args)


def run_dma(args: argparse.Namespace) -> int:
    from kvops.bench import linkmax
    from kvops.bench.plan import describe

    plan = _plan_from_args(args)
    link_flag = None if args.link_max_gbps is None else args.link_max_gbps * 1e9
    if args.textfile is not None:
        _check_textfile(args.textfile)
    if args.dry_run:
        if args.json:
            planned_link = {
                "bytes_per_second": link_flag,
                "source": linkmax.FLAG_SOURCE if link_flag is not None else "collector, at run time",
            }
            print(json.dumps({"plan": plan.as_dict(), "link_max": planned_link}, indent=2))
        else:
            print(describe(plan, linkmax.planned(link_flag)))
        return 0
    return _measure_and_report(args, plan, link_flag)


def _measure_and_report(args: argparse.Namespace, plan: Plan, link_flag: float | None) -> int:
    from kvops.bench import dma, linkmax, report
    from kvops.bench.results import BenchRun, CaseResult

    device = dma.open_device(args.device)  # the refusal: no torch, no GPU, no such index
    link = linkmax.resolve(device, link_flag)
    run = BenchRun(device=device, link=link, repeats=plan.repeats, warmup=plan.warmup)
    show_progress = sys.stderr.isatty()

    def progress(i: int, outcome: CaseResult | CaseFailure) -> None:
        # Kept as they arrive, so Ctrl-C still reports what was measured.
        if isinstance(outcome, CaseResult):
            run.results.append(outcome)
        else:
            run.failures.append(outcome)
            print(f"kvops bench dma: case failed: {_case_name(outcome)}: {outcome.error}", file=sys.stderr)
        if show_progress:
            print(f"\r[{i + 1}/{len(plan.cases)}] {_case_name(outcome):50}", end="", file=sys.stderr)

    try:
        dma.measure(plan, device.torch_device, progress=progress)
    except KeyboardInterrupt:
        run.interrupted = True
    if show_progress:
        print(file=sys.stderr)
    run.finished_at = time.time()

    if args.json:
        print(json.dumps(run.as_dict(), indent=2))
    else:
        print(report.render_table(run, args.unit))
        for f in run.failures:
            print(f"failed: {_case_name(f)}: {f.error}")
        if run.interrupted:
            print(f"interrupted: {len(run.results)} of {len(plan.cases)} cases measured")
    if args.textfile is not None:
        try:
            report.write_textfile(run, args.textfile)
        except OSError as exc:
            print(f"kvops bench dma: error: cannot write {args.textfile}: {exc.strerror}", file=sys.stderr)
            return 2
    if run.interrupted:
        return 130
    unverified = [r for r in run.results if not r.verified]
    for r in unverified:
        print(f"kvops bench dma: copy check failed: {_case_name(r)}", file=sys.stderr)
    return 1 if run.failures or unverified else 0


def _plan_from_args(args: argparse.Namespace) -> Plan:
    from kvops.bench.plan import DEFAULT_SIZES, DIRECTIONS, MEMORIES, build_plan
    from kvops.units import size_as_written

    sizes = [size_as_written(t) for text in args.sizes for t in text.split(",") if t] if args.sizes else None
    for name in ("repeats", "blocks"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1, not {getattr(args, name)}")
    if args.warmup < 0:
        raise UsageError(f"--warmup must be 0 or more, not {args.warmup}")
    if args.device < 0:
        raise UsageError(f"--device must be 0 or more, not {args.device}")
    if args.link_max_gbps is not None and not args.link_max_gbps > 0:
        raise UsageError(f"--link-max-gbps must be a positive number of GB/s, not {args.link_max_gbps}")
    if sizes == []:
        raise UsageError("--sizes: no size given")
    return build_plan(
        sizes=sizes or DEFAULT_SIZES,
        directions=args.directions or DIRECTIONS,
        memories=args.memory or MEMORIES,
        blocks=args.blocks,
        repeats=args.repeats,
        warmup=args.warmup,
        device=args.device,
    )


def _check_textfile(path: Path) -> None:
    """Before measuring, so a bad path does not waste the run."""
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise UsageError(f"--textfile {path}: is a directory")
    if not parent.is_dir():
        raise UsageError(f"--textfile {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"--textfile {path}: directory {parent} is not writable")
    if path.suffix != ".prom":
        print(
            f"kvops bench dma: warning: node_exporter's textfile collector reads only *.prom; {path} "
            "will be written but not collected",
            file=sys.stderr,
        )


def _case_name(outcome: CaseResult | CaseFailure) -> str:
    from kvops.units import format_size

    case = outcome.case
    blocks = f" ×{case.blocks}" if case.blocks > 1 else ""
    return f"{case.memory} {case.direction} {format_size(case.block_bytes)}{blocks}"


def _short(n_bytes: int) -> str:
    from kvops.units import format_size

    return format_size(n_bytes).replace(" ", "")
