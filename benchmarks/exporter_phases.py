"""Where a fresh exporter round's CPU goes, piece by piece, in one process.

    python benchmarks/exporter_phases.py [--targets 16] [--gpus 8] [--rounds 60] [--pause 0.6]

The setup of benchmarks/exporter_scrape.py (simulated vLLMs in processes of their own, the stub
NVML library as the GPUs), without HTTP: `kvops exporter`'s runner (kvops.exporter.command.
build_runner) makes a round every `--pause` seconds and the round's exposition is written and
gzipped, as a scrape would. Each piece's CPU is its own thread's (time.thread_time), summed over
the rounds and divided by them: the fetch on the round's thread (libcurl, without the parses it
calls back and the host and process-tree reads it makes while the targets answer), each page's
parse and its engines' readers, those reads, the exposition, gzip, and the GPU collector in its
worker thread. "process" is the whole process's CPU a round.

A piece measured here costs about twice what it costs in a tight loop: each round starts on a
machine that was idle (docs/performance.md, "A round starts cold").
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from cli_args import positive  # noqa: E402  (benchmarks/cli_args.py)
from exporter_scrape import exporter_args, stub_gpu_env  # noqa: E402  (benchmarks/exporter_scrape.py)
from sim_targets import start_targets  # noqa: E402  (benchmarks/sim_targets.py)

_CHILD = "KVOPS_PHASES_CHILD"  # set once the stub NVML library is on the loader's path


def timed(owner: Any, name: str, key: str, spent: collections.Counter[str]) -> None:
    """Wrap owner.name so that each call adds its thread's CPU time (ns) to spent[key]."""
    inner: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(inner)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time_ns()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[key] += time.thread_time_ns() - start

    setattr(owner, name, wrapper)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", type=positive(int), default=16)
    ap.add_argument("--gpus", type=positive(int), default=8)
    ap.add_argument("--rounds", type=positive(int), default=60)
    ap.add_argument("--pause", type=positive(float), default=0.6, help="seconds between rounds (default 0.6)")
    args = ap.parse_args()
    if not os.environ.get(_CHILD):  # the loader reads LD_LIBRARY_PATH at start: run again under it
        env = dict(stub_gpu_env(args.gpus), **{_CHILD: "1"})
        os.execve(sys.executable, [sys.executable, *sys.argv], env)

    from kvops import gcsettle
    from kvops.collectors import host, nvidia, procs
    from kvops.engines import registry
    from kvops.exporter import command, compress, config, text_sink
    from kvops.scrape import target
    from kvops.transport import multi

    spent: collections.Counter[str] = collections.Counter()
    timed(target, "parse", "parse", spent)
    timed(registry, "normalise", "readers", spent)
    timed(multi.MultiFetcher, "fetch", "fetch (with parse and readers)", spent)
    timed(nvidia.NvidiaCollector, "collect", "worker: nvidia", spent)
    # on the round's thread, inside the fetch (kvops.scrape.runner: up to 64 local targets)
    timed(host.HostCollector, "collect", "in the fetch: host", spent)
    timed(procs.ProcessTracker, "collect", "in the fetch: process trees", spent)

    targets = start_targets(args.targets)
    try:
        parser = argparse.ArgumentParser()
        command.configure(parser)
        runner = command.build_runner(config.load_config(parser.parse_args(exporter_args(targets.urls, 0))))
        for _ in range(5):  # warm-up: connections, heads kept, first-scrape work
            compress.gzip_bytes(text_sink.write(runner.snapshot()))
        gcsettle.settle()
        spent.clear()
        process = time.process_time_ns()
        for _ in range(args.rounds):
            time.sleep(args.pause)
            start = time.thread_time_ns()
            snap = runner.snapshot()
            spent["round (fetch, parse, readers, rest)"] += time.thread_time_ns() - start
            start = time.thread_time_ns()
            body = text_sink.write(snap)
            spent["exposition written"] += time.thread_time_ns() - start
            start = time.thread_time_ns()
            compress.gzip_bytes(body)
            spent["gzip"] += time.thread_time_ns() - start
        process = time.process_time_ns() - process
        runner.close()
    finally:
        targets.stop()
    with_reads = spent["fetch (with parse and readers)"]
    inline = spent["in the fetch: host"] + spent["in the fetch: process trees"]
    spent["fetch (libcurl alone)"] = with_reads - spent["parse"] - spent["readers"] - inline
    print(f"{args.targets} simulated vLLM targets, {args.gpus} stub GPUs, {args.rounds} rounds "
          f"{args.pause} s apart; CPU ms a round")  # fmt: skip
    print(f"  {'process':40} {process / args.rounds / 1e6:6.2f}")
    for key, ns in sorted(spent.items()):
        print(f"  {key:40} {ns / args.rounds / 1e6:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
