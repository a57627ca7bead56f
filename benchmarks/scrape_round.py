"""CPU per scrape round of 16 targets: all on one libcurl multi handle vs a thread per target.

Why ScrapeRunner fetches every target in its own thread's loop (kvops/transport/multi.py)
rather than one worker thread each: the process's CPU time per round, one round a second,
targets in processes of their own (benchmarks/sim_targets.py). Both ways use the same
TargetScraper (fetch with libcurl, parse, read); only who waits for the network differs.

    python benchmarks/scrape_round.py [--targets 16] [--rounds 15]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from concurrent.futures import ThreadPoolExecutor, wait

from sim_targets import start_targets

from kvops.scrape.runner import ScrapeRunner
from kvops.scrape.target import TargetScraper


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def ms_per_round(one_round, rounds: int) -> float:
    for _ in range(2):  # connections open, caches warm
        one_round()
    began = cpu_seconds()
    for _ in range(rounds):
        start = time.monotonic()
        one_round()
        time.sleep(max(0.0, 1.0 - (time.monotonic() - start)))
    return (cpu_seconds() - began) / rounds * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    targets = start_targets(args.targets)
    try:
        threaded = [TargetScraper(url) for url in targets.urls]
        pool = ThreadPoolExecutor(max_workers=len(threaded))

        def in_threads() -> None:
            deadline = time.monotonic() + 5
            wait([pool.submit(t.scrape, deadline) for t in threaded])

        runner = ScrapeRunner([TargetScraper(url) for url in targets.urls], [], timeout=5)
        results: dict[str, list[float]] = {"thread per target": [], "one multi handle (kvops)": []}
        for _ in range(2):  # interleaved, so drift on a shared machine hits both
            results["thread per target"].append(ms_per_round(in_threads, args.rounds))
            results["one multi handle (kvops)"].append(ms_per_round(runner.snapshot, args.rounds))
        runner.close()
        pool.shutdown()
        for t in threaded:
            t.close()
    finally:
        targets.stop()
    print(f"CPU per round of {args.targets} targets (process user+system, {args.rounds} rounds, 2 passes):")
    for name, figures in results.items():
        print(f"  {name:26s} " + " / ".join(f"{ms:5.1f} ms" for ms in figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
