"""How fast is the simulated vLLM? Events per second, scrape latency, cost of many instances.

    python benchmarks/sim_events.py [--duration S] [--instances N] [--json]

- events: scheduler steps, requests admitted, KV blocks filled (hashed), CPU-tier transfer
  jobs; per preset, simulating --duration seconds of engine time as fast as possible.
- speed-up: simulated seconds per wall second (how many real-time simulators one core runs).
- scrape: wall time of one /metrics render (0.33 format) and of a scrape over HTTP with
  --instances simulators serving from this process, scraped once per second each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.request

from kvops.sim import server
from kvops.sim.workload import PRESETS


def engine_speed(workload: str, duration: float) -> dict[str, float]:
    engine = server.build_engine(seed=0, workload=workload)
    started = time.perf_counter()
    engine.advance_to(duration)
    wall = time.perf_counter() - started
    c = engine.counters
    blocks = (c.prompt_tokens + c.generation_tokens) // engine.config.block_size
    events = c.steps + c.lookups + c.requests_finished + blocks + c.store_jobs + c.load_jobs
    return {
        "workload": workload,
        "simulated_seconds": duration,
        "wall_seconds": wall,
        "steps": c.steps,
        "requests_finished": c.requests_finished,
        "blocks_filled": blocks,
        "transfer_jobs": c.store_jobs + c.load_jobs,
        "events": events,
        "events_per_second": events / wall,
        "speedup": duration / wall,
    }


def scrape_latency(instances: int, seconds: float) -> dict[str, float]:
    sims = [server.start(port=0, seed=i) for i in range(instances)]
    try:
        render_ms = []
        for _ in range(20):
            t = time.perf_counter()
            sims[0].sim.metrics()
            render_ms.append((time.perf_counter() - t) * 1e3)
        http_ms = []
        cpu0 = time.process_time()
        wall0 = time.perf_counter()
        while time.perf_counter() - wall0 < seconds:
            tick = time.perf_counter()
            for s in sims:
                t = time.perf_counter()
                urllib.request.urlopen(s.metrics_url, timeout=10).read()
                http_ms.append((time.perf_counter() - t) * 1e3)
            time.sleep(max(0.0, 1.0 - (time.perf_counter() - tick)))
        cpu = time.process_time() - cpu0
        wall = time.perf_counter() - wall0
    finally:
        for s in sims:
            s.stop()
    http_ms.sort()
    return {
        "instances": instances,
        "render_ms_median": statistics.median(render_ms),
        "scrape_ms_median": statistics.median(http_ms),
        "scrape_ms_p99": http_ms[int(0.99 * (len(http_ms) - 1))],
        "cpu_cores_used": cpu / wall,  # this process, all instances, scraped every second
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=120.0, help="simulated seconds per preset")
    ap.add_argument("--instances", type=int, default=16)
    ap.add_argument("--scrape-seconds", type=float, default=10.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    engines = [engine_speed(w, args.duration) for w in PRESETS]
    scrape = scrape_latency(args.instances, args.scrape_seconds)
    if args.json:
        json.dump({"engines": engines, "scrape": scrape}, sys.stdout, indent=1)
        print()
        return 0
    print(f"{'workload':<8} {'events/s':>10} {'steps/s':>9} {'speed-up':>9}  (x real time)")
    for r in engines:
        print(
            f"{r['workload']:<8} {r['events_per_second']:>10,.0f} "
            f"{r['steps'] / r['wall_seconds']:>9,.0f} {r['speedup']:>8.0f}x"
        )
    print(
        f"\n{scrape['instances']} simulators scraped every second: "
        f"render {scrape['render_ms_median']:.1f} ms, "
        f"scrape median {scrape['scrape_ms_median']:.1f} ms, p99 {scrape['scrape_ms_p99']:.1f} ms, "
        f"{scrape['cpu_cores_used']:.2f} CPU cores"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
