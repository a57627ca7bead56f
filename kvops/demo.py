"""`kvops demo`: the simulated vLLM and `kvops top` on it, no GPU needed."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--interval", default="1", metavar="S", help="seconds between frames (default 1)")
    parser.add_argument("--vllm-version", default="0.33.0", help="exposition format to simulate")
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
    sim = start(vllm_version=args.vllm_version)
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
