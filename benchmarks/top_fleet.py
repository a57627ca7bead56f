"""`kvops top --prometheus` on a 2,000-engine fleet: frame time, CPU, RSS and bytes per frame.

Loads the history of N simulated engines' raw vllm:* series (12 per engine, one sample per
15 s, 10 samples) into a real VictoriaMetrics (its Prometheus text import API) and a real
Prometheus (backfilled with promtool), nobody scraping either. Then, per store, in a fresh
process each (so its RSS is its own):
- kvops live: what one frame of `kvops top --prometheus` costs before drawing: the store
  computes the deltas over its window for the engines the table shows (PAGE, the first in
  target order) and the fleet's sums for the charts, then Board.update();
- kvops all: the same for every engine (`--once --json`, or a sort on a figure);
- baseline, the approach kvops top had before: one instant query for every raw series,
  decoded and normalised per instance in Python, and Board.update() against the previous
  frame's snapshot.
Both run in the same run, against the same store, frames back to back. Reported: the first
frame (process start to figures ready: imports, connection, the scrape-interval probe),
p50/p99 of the following frames, CPU per frame (this process only; the store's CPU is the
store's), RSS (the highest seen after a frame), and bytes fetched per frame.

`--before DIR` adds two rows per store: the live view and every engine with kvops imported
from another checkout (`git archive <commit> | tar -x -C DIR`), same stores, same run.

    python benchmarks/top_fleet.py [--engines 2000] [--frames 20] [--json] [--before DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
if "--code" in sys.argv:  # a --before measurement: kvops from that checkout
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--code") + 1]).resolve()))
else:
    sys.path.insert(0, str(ROOT))

STEP, SAMPLES = 15.0, 10
PAGE = 30  # rows a 120x40 terminal's table shows, give or take


def measure(url: str, mode: str, frames: int) -> dict[str, float]:
    """One process, one mode: frames back to back against the store at `url`."""
    import psutil

    me = psutil.Process()
    started_cpu, started = time.process_time(), time.monotonic()
    from kvops.engines import registry
    from kvops.frames.prometheus import VLLM, PrometheusSource, _selector, to_parse_result
    from kvops.snapshot import Snapshot
    from kvops.top.board import Board

    source = PrometheusSource(url, timeout=60.0)
    board = Board()
    if mode == "page":
        source.set_page(PAGE)

    def kvops_frame() -> int:
        source._last_stamp = None  # as if the store had scraped again since
        pair = source.frame(time.monotonic() + 60)
        assert pair is not None
        board.update(pair[1], before=pair[0], fleet=source.last_fleet)
        return len(pair[1].targets)

    def raw_frame() -> int:
        series = source.query(_selector(VLLM.counters + VLLM.gauges), time.monotonic() + 60)
        by_instance: dict[str, list[dict]] = {}
        for item in series:
            by_instance.setdefault(item["metric"].get("instance", ""), []).append(item)
        snap = Snapshot(time=time.monotonic())
        for instance, items in sorted(by_instance.items()):
            snap.targets.append(registry.normalise(to_parse_result(items), f"http://{instance}"))
        board.update(snap)
        return len(snap.targets)

    frame = raw_frame if mode == "raw" else kvops_frame
    times, cpus, sizes, rss = [], [], [], []
    engines = 0
    for i in range(frames + 1):
        cpu0, t0, fetched0 = time.process_time(), time.monotonic(), source.bytes_fetched
        engines = frame()
        times.append(time.monotonic() - t0)
        cpus.append(time.process_time() - cpu0)
        sizes.append(source.bytes_fetched - fetched0)
        # Sampled after each frame: ru_maxrss would carry the parent's peak across exec.
        rss.append(me.memory_info().rss)
        if i == 0:
            first = time.monotonic() - started
            first_cpu = time.process_time() - started_cpu
    steady = sorted(times[1:])
    source.close()
    return {
        "engines_shown": engines,
        "first_frame_seconds": first,
        "first_frame_cpu_seconds": first_cpu,
        "frame_p50_seconds": steady[len(steady) // 2],
        "frame_p99_seconds": steady[min(len(steady) - 1, round(0.99 * (len(steady) - 1)))],
        "cpu_per_frame_seconds": sum(cpus[1:]) / len(cpus[1:]),
        "bytes_per_frame": sum(sizes[1:]) / len(sizes[1:]),
        "peak_rss_bytes": max(rss),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", type=int, default=2000)
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--before", metavar="DIR", help="also measure the live view of this kvops checkout")
    parser.add_argument("--measure", nargs=2, metavar=("URL", "MODE"), help=argparse.SUPPRESS)
    parser.add_argument("--code", help=argparse.SUPPRESS)  # read before argparse, at import
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure[0], args.measure[1], args.frames)))
        return 0

    from top.stores import fleet, history_lines, loaded_stores

    lines = history_lines(fleet(args.engines), SAMPLES, STEP, end=time.time() - 20)
    results: dict[str, dict[str, dict[str, float]]] = {}
    with loaded_stores(lines) as stores:
        time.sleep(2)  # VictoriaMetrics: imported samples become searchable within a second
        for store in stores:
            modes = [("kvops live", "page", []), ("kvops all", "all", []), ("baseline", "raw", [])]
            if args.before:
                modes.insert(1, ("live before", "page", ["--code", args.before]))
                modes.insert(3, ("all before", "all", ["--code", args.before]))
            for mode, flag, code in modes:
                command = [
                    sys.executable,
                    __file__,
                    "--frames",
                    str(args.frames),
                    "--measure",
                    store.url,
                    flag,
                ]
                proc = subprocess.run(
                    [*command, *code], capture_output=True, text=True, timeout=1800, check=True
                )
                results.setdefault(store.name, {})[mode] = json.loads(proc.stdout)
    if args.json:
        print(json.dumps({"engines": args.engines, "results": results}))
        return 0
    print(f"kvops top --prometheus, {args.engines} engines x 12 series, {args.frames} frames per row:")
    print(f"{'store':18} {'approach':10} {'first s':>8} {'p50 ms':>8} {'p99 ms':>8} {'CPU ms/frame':>13}"
          f" {'CPU @2s':>8} {'RSS MiB':>8} {'KB/frame':>9}")  # fmt: skip
    for store, modes in results.items():
        for mode, r in modes.items():
            print(f"{store:18} {mode:10} {r['first_frame_seconds']:8.2f} {r['frame_p50_seconds'] * 1e3:8.0f}"
                  f" {r['frame_p99_seconds'] * 1e3:8.0f} {r['cpu_per_frame_seconds'] * 1e3:13.0f}"
                  f" {r['cpu_per_frame_seconds'] / 2 * 100:7.1f}% {r['peak_rss_bytes'] / 2**20:8.0f}"
                  f" {r['bytes_per_frame'] / 1e3:9.0f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
