"""`kvops demo`: the simulated vLLM and `kvops top` on it, no GPU needed."""

from __future__ import annotations

import argparse

EXAMPLES = """\
examples:
  kvops demo
  kvops demo --workload chat --vllm-version 0.11.2
  kvops demo --once --json
"""


DEMO_GPU_BLOCKS = 2048


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--interval", default="1", metavar="S", help="seconds between frames (default 1)")
    parser.add_argument(
        "--vllm-version",
        default="0.33.0",
        metavar="X.Y.Z",
        help="vLLM release whose /metrics format to simulate (default 0.33.0)",
    )
    parser.add_argument(
        "--workload",
        default="rag",
        choices=["chat", "rag", "bursty", "agent"],
        help="workload preset (default rag, as kvops sim)",
    )
    parser.add_argument("--once", action="store_true", help="print one frame as text and exit")
    parser.add_argument("--json", action="store_true", help="with --once: the frame as JSON")


def run(args: argparse.Namespace) -> int:
    from kvops.errors import UsageError
    from kvops.sim.server import start
    from kvops.top import command as top
    from kvops.top.live import LiveSource

    interval = top.parse_interval(args.interval)
    if args.json and not args.once:
        raise UsageError("--json goes with --once")
    top.quiet_logs()
    # A small GPU cache (2048 blocks = 4 GiB of Llama-3.1-8B KV) so blocks spill to the CPU
    # tier and come back within seconds: the demo shows offload hits and loads right away.
    sim = start(vllm_version=args.vllm_version, workload=args.workload, num_gpu_blocks=DEMO_GPU_BLOCKS)
    try:
        if not args.once:
            top.require_terminal()
        source = LiveSource([sim.url], timeout=min(top.MAX_SCRAPE_TIMEOUT, max(1.0, interval)))
        source.description = f"kvops demo: simulated vLLM {args.vllm_version} at {sim.url}"
        if args.once:
            try:
                return top.print_once(source, interval, args.json)
            finally:
                source.close()
        return top.run_app(source, interval)
    finally:
        sim.stop()
