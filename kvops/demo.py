"""`kvops demo`: the simulated vLLM and a live view of it, no GPU needed.

Placeholder until `kvops top` lands: prints the interval figures once a second.
"""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between frames")
    parser.add_argument("--vllm-version", default="0.33.0", help="exposition format to simulate")


def run(args: argparse.Namespace) -> int:
    import json
    import time

    from kvops.exporter.collector import ScrapeRunner
    from kvops.rates import interval
    from kvops.sim.server import start
    from kvops.sources.target import TargetScraper

    sim = start(vllm_version=args.vllm_version)
    runner = ScrapeRunner([TargetScraper(sim.url)], [])
    try:
        prev = runner.snapshot()
        while True:
            time.sleep(args.interval)
            cur = runner.snapshot()
            for row in interval(prev, cur)["targets"]:
                print(json.dumps(row), flush=True)
            prev = cur
    except KeyboardInterrupt:
        return 0
    finally:
        runner.close()
        sim.stop()
