"""Exporter memory over 10,000 scrapes with targets restarting (issue 9, item 3).

    python benchmarks/exporter_memory.py [--scrapes 10000] [--targets 4] [--restart-every 250]

The same fleet as benchmarks/soak.py (N `kvops sim` processes, one `kvops exporter`
process), scraped back to back instead of on a period. Every --restart-every scrapes one
simulator is killed and restarted with another vLLM version, data-parallel size and model
name, so engines and label sets come and go.

Printed: exporter RSS, threads and fds every 1,000 scrapes; RSS at scrape 1,000 (after
warm-up) against the end; the series served at most at once against the label sets seen
over the run (a dropped engine or model must leave no series); how many series a killed
target leaves while it is down. Exit 0 when RSS is within 5 % and series stay bounded.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from soak import PROFILES, Fleet, count_series, mib


def target_series(text: str, target: str) -> int:
    needle = f'target="{target}"'
    return sum(1 for line in text.splitlines() if line and line[0] != "#" and needle in line)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scrapes", type=int, default=10_000)
    ap.add_argument("--targets", type=int, default=4)
    ap.add_argument("--restart-every", type=int, default=250, help="scrapes between target kills")
    ap.add_argument("--down-for", type=int, default=5, help="scrapes a killed target stays down")
    ap.add_argument("--report-every", type=int, default=1000)
    args = ap.parse_args()

    fleet = Fleet(args.targets)
    print(
        f"kvops exporter pid {fleet.exporter.pid}: {args.targets} simulated vLLMs, {args.scrapes} scrapes "
        f"back to back, a target killed every {args.restart_every} scrapes for {args.down_for}"
    )
    print(f"{'scrapes':>8} {'RSS MiB':>8} {'threads':>7} {'fds':>5} {'series':>7} {'p50 ms':>7}")
    errors = 0
    label_sets: set[str] = set()
    max_series = max_engines = 0
    down_series: list[int] = []  # series of a killed target while it is down
    latencies: list[float] = []
    rows: list[tuple[int, dict[str, float]]] = []
    killed: tuple[int, str] | None = None  # (revive at scrape, target url)
    restarts = 0
    start = time.monotonic()
    try:
        for i in range(1, args.scrapes + 1):
            if i % args.restart_every == 0:
                target = fleet.targets[(i // args.restart_every) % len(fleet.targets)]
                target.stop()
                killed = (i + args.down_for, target.url)
            if killed is not None and i >= killed[0]:
                next(t for t in fleet.targets if t.url == killed[1]).start()
                restarts += 1
                killed = None
            seconds, status, text = fleet.scrape()
            latencies.append(seconds)
            if status != 200:
                errors += 1
                continue
            n, engines = count_series(text)
            label_sets |= engines
            max_series, max_engines = max(max_series, n), max(max_engines, len(engines))
            if killed is not None and 'kvops_target_up{target="' + killed[1] + '"} 0.0' in text:
                down_series.append(target_series(text, killed[1]))
            if i % args.report_every == 0 or i == 1:
                figures = fleet.measure()
                rows.append((i, figures))
                print(
                    f"{i:8d} {mib(figures['rss']):>8} {figures['threads']:7.0f} {figures['fds']:5.0f} "
                    f"{n:7d} {statistics.median(latencies) * 1000:7.1f}",
                    flush=True,
                )
                latencies.clear()
    finally:
        elapsed = time.monotonic() - start
        fleet.close()

    base = next((f for i, f in rows if i >= args.report_every), rows[0][1])
    last = rows[-1][1]
    drift = (last["rss"] - base["rss"]) / base["rss"] * 100
    print(f"\n{args.scrapes} scrapes in {elapsed:.0f} s, {errors} not 200, {restarts} target restarts")
    print(
        f"RSS at scrape {args.report_every}: {mib(base['rss'])} MiB; at the end: {mib(last['rss'])} MiB "
        f"({drift:+.1f} %); max {mib(max(f['rss'] for _, f in rows))} MiB"
    )
    print(
        f"threads {base['threads']:.0f} -> {last['threads']:.0f}, fds {base['fds']:.0f} -> {last['fds']:.0f}"
    )
    print(
        f"engine label sets seen over the run: {len(label_sets)}; served at once: at most {max_engines}; "
        f"series per scrape at most {max_series}"
    )
    if down_series:
        print(
            f"a killed target, while down, leaves {min(down_series)}..{max(down_series)} series "
            f"(kvops_target_up 0 and its scrape duration), over {len(down_series)} scrapes"
        )
    # every target at its largest data-parallel size: the most engine series that can be live
    bounded = max_engines <= args.targets * max(dp for _, dp, _ in PROFILES)
    ok = abs(drift) <= 5.0 and errors == 0 and (not down_series or max(down_series) <= 2) and bounded
    print(f"verdict: {'flat and bounded' if ok else 'NOT flat or not bounded'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
