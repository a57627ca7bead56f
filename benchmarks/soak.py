"""Soak: `kvops exporter` scraped every 100 ms for 30 minutes while its targets restart.

    python benchmarks/soak.py [--minutes 30] [--targets 4] [--period 0.1] [--restart-every 15]

Setup, all on loopback: N `kvops sim` processes (simulated vLLMs) and one `kvops exporter`
process (host collector on, GPU collectors off: no GPU here) scraping them. Every
--restart-every seconds one simulator is killed and, a couple of scrapes later, started
again on the same port with another vLLM version, data-parallel size and model name
(counters back to zero, engines added and dropped, label sets changing). Meanwhile the
exporter is scraped every --period seconds over one keep-alive connection, as Prometheus does.

Every --sample-every seconds the exporter process is measured: RSS, threads, open file
descriptors, TCP sockets, and the series it served. At the end: the figures after warm-up
against the last ones. Exit 0 when RSS is within 5 % and threads and sockets did not grow
(the rule from issue 9/10), 1 otherwise.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.prom import free_port

# (vLLM version, data-parallel size, served model name): each restart takes the next one.
PROFILES = [
    ("0.33.0", 2, "meta-llama/Llama-3.1-8B-Instruct"),
    ("0.20.0", 1, "Qwen/Qwen3-8B"),
    ("0.11.2", 3, "meta-llama/Llama-3.1-8B-Instruct"),
    ("0.24.0", 4, "mistralai/Mistral-7B-Instruct-v0.3"),
    ("0.10.0", 1, "Qwen/Qwen3-8B"),
]


def wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{what} did not start (exit {proc.poll()})") from None
            time.sleep(0.05)


class SimTarget:
    """One `kvops sim` process on a fixed port, restartable with another profile."""

    def __init__(self, index: int) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.profiles = itertools.cycle(PROFILES[index % len(PROFILES) :] + PROFILES[: index % len(PROFILES)])
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    def start(self) -> None:
        version, dp, model = next(self.profiles)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kvops.cli",
                "sim",
                "--listen",
                f"127.0.0.1:{self.port}",
                "--vllm-version",
                version,
                "--data-parallel-size",
                str(dp),
                "--served-model-name",
                model,
                "--seed",
                str(random.randrange(1 << 20)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_port(self.port, self.proc, f"kvops sim on {self.port}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)  # a crash, not a clean exit
            self.proc.wait(timeout=10)


class Fleet:
    """The simulators and the exporter over them."""

    def __init__(self, n_targets: int, extra_args: list[str] | None = None) -> None:
        self.targets = [SimTarget(i) for i in range(n_targets)]
        for t in self.targets:
            t.start()
        self.port = free_port()
        argv = [
            sys.executable,
            "-m",
            "kvops.cli",
            "exporter",
            "--listen",
            f"127.0.0.1:{self.port}",
            "--no-collector",
            "nvidia",
            "--no-collector",
            "amd",
            "--timeout",
            "2",
            "--log-level",
            "error",
            *(extra_args or []),
        ]
        for t in self.targets:
            argv += ["--target", t.url]
        self.exporter = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.exporter, "kvops exporter")
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self.process = psutil.Process(self.exporter.pid)
        self.session = requests.Session()
        self.session.trust_env = False
        self._down: list[tuple[float, SimTarget]] = []
        self._next = itertools.cycle(self.targets)

    def scrape(self) -> tuple[float, int | None, str]:
        """(seconds, HTTP status or None, body)."""
        start = time.monotonic()
        try:
            resp = self.session.get(self.url, timeout=10)
        except requests.RequestException:
            return time.monotonic() - start, None, ""
        return time.monotonic() - start, resp.status_code, resp.text

    def kill_one(self, down_for: float) -> None:
        target = next(self._next)
        target.stop()
        self._down.append((time.monotonic() + down_for, target))

    def revive_due(self) -> None:
        now = time.monotonic()
        for item in [d for d in self._down if d[0] <= now]:
            self._down.remove(item)
            item[1].start()
            item[1].restarts += 1

    def measure(self) -> dict[str, float]:
        p = self.process
        sockets = len(p.net_connections(kind="tcp"))
        return {
            "rss": p.memory_info().rss,
            "threads": p.num_threads(),
            "fds": p.num_fds(),
            "sockets": sockets,
        }

    def close(self) -> None:
        self.session.close()
        self.exporter.terminate()
        try:
            self.exporter.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.exporter.kill()
        for t in self.targets:
            t.stop()


def count_series(text: str) -> tuple[int, set[str]]:
    """Sample lines, and the label sets of per-engine series (to show they stay bounded)."""
    n = 0
    engines: set[str] = set()
    for line in text.splitlines():
        if line and line[0] != "#":
            n += 1
            if line.startswith("kvops_vllm_requests_running{"):
                engines.add(line[line.index("{") : line.index("}") + 1])
    return n, engines


@dataclass
class Sample:
    elapsed: float
    scrapes: int
    errors: int
    p50_ms: float
    p99_ms: float
    series: int
    figures: dict[str, float] = field(default_factory=dict)


def mib(n: float) -> str:
    return f"{n / 2**20:.1f}"


def print_sample(s: Sample) -> None:
    f = s.figures
    print(
        f"{s.elapsed:8.0f} {s.scrapes:8d} {s.errors:6d} {s.p50_ms:7.1f} {s.p99_ms:7.1f} {s.series:7d} "
        f"{mib(f['rss']):>8} {f['threads']:7.0f} {f['fds']:5.0f} {f['sockets']:7.0f}",
        flush=True,
    )


HEADER = (
    f"{'t (s)':>8} {'scrapes':>8} {'errors':>6} {'p50 ms':>7} {'p99 ms':>7} {'series':>7} "
    f"{'RSS MiB':>8} {'threads':>7} {'fds':>5} {'sockets':>7}"
)


def verdict(samples: list[Sample], warmup: float) -> bool:
    """Print the drift from the first sample after warm-up to the last; True when flat."""
    steady = [s for s in samples if s.elapsed >= warmup] or samples
    first, last = steady[0], steady[-1]
    rss_drift = (last.figures["rss"] - first.figures["rss"]) / first.figures["rss"] * 100
    rss_max = max(s.figures["rss"] for s in steady)
    threads = [s.figures["threads"] for s in steady]
    sockets = [s.figures["sockets"] for s in steady]
    fds = [s.figures["fds"] for s in steady]
    print(f"\nafter warm-up ({first.elapsed:.0f} s -> {last.elapsed:.0f} s):")
    print(
        f"  RSS      {mib(first.figures['rss'])} -> {mib(last.figures['rss'])} MiB "
        f"({rss_drift:+.1f} %), max {mib(rss_max)} MiB"
    )
    print(
        f"  threads  {min(threads):.0f}..{max(threads):.0f}  (first {threads[0]:.0f}, last {threads[-1]:.0f})"
    )
    print(f"  fds      {min(fds):.0f}..{max(fds):.0f}  (first {fds[0]:.0f}, last {fds[-1]:.0f})")
    print(
        f"  sockets  {min(sockets):.0f}..{max(sockets):.0f}  (first {sockets[0]:.0f}, last {sockets[-1]:.0f})"
    )
    flat = abs(rss_drift) <= 5.0 and threads[-1] <= threads[0] + 2 and sockets[-1] <= sockets[0] + 2
    print(f"  verdict  {'flat' if flat else 'NOT flat'} (RSS within 5 %, threads and sockets not growing)")
    return flat


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--targets", type=int, default=4)
    ap.add_argument("--period", type=float, default=0.1, help="seconds between scrapes")
    ap.add_argument("--restart-every", type=float, default=15.0, help="seconds between target kills")
    ap.add_argument("--down-for", type=float, default=1.0, help="seconds a killed target stays down")
    ap.add_argument("--sample-every", type=float, default=30.0, help="seconds between measurements")
    ap.add_argument(
        "--warmup",
        type=float,
        default=None,
        help="seconds before the baseline sample (default: a third, at most 300)",
    )
    args = ap.parse_args()
    # RSS climbs for the first 1,000-2,000 scrapes while the heap reaches its working size
    # (bodies of 100-260 KB per target, in several threads), then stays flat.
    if args.warmup is None:
        args.warmup = min(300.0, args.minutes * 60 / 3)

    fleet = Fleet(args.targets)
    print(
        f"kvops exporter pid {fleet.exporter.pid}: {args.targets} simulated vLLMs, scrape every "
        f"{args.period * 1000:.0f} ms for {args.minutes:g} min, a target killed every "
        f"{args.restart_every:g} s and back {args.down_for:g} s later "
        f"(python {sys.version.split()[0]}, {os.cpu_count()} CPUs)"
    )
    print(HEADER)
    samples: list[Sample] = []
    latencies: list[float] = []
    scrapes = errors = 0
    label_sets: set[str] = set()
    max_engines = 0
    series = 0
    start = time.monotonic()
    end = start + args.minutes * 60
    next_scrape = next_sample = start
    next_kill = start + args.restart_every
    try:
        while (now := time.monotonic()) < end:
            if now >= next_kill:
                fleet.kill_one(args.down_for)
                next_kill += args.restart_every
            fleet.revive_due()
            if now >= next_scrape:
                seconds, status, text = fleet.scrape()
                scrapes += 1
                latencies.append(seconds)
                if status != 200:
                    errors += 1
                else:
                    series, engines = count_series(text)
                    label_sets |= engines
                    max_engines = max(max_engines, len(engines))
                next_scrape += args.period
                if next_scrape < time.monotonic():  # a slow scrape: keep the period, skip the backlog
                    next_scrape = time.monotonic() + args.period
            if now >= next_sample:
                lat = sorted(latencies) or [0.0]
                s = Sample(
                    now - start,
                    scrapes,
                    errors,
                    statistics.median(lat) * 1000,
                    lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000,
                    series,
                    fleet.measure(),
                )
                samples.append(s)
                print_sample(s)
                latencies.clear()
                next_sample += args.sample_every
            time.sleep(max(0.0, min(next_scrape, next_sample, next_kill) - time.monotonic()))
        s = Sample(time.monotonic() - start, scrapes, errors, 0.0, 0.0, series, fleet.measure())
        samples.append(s)
        print_sample(s)
    finally:
        restarts = sum(t.restarts for t in fleet.targets)
        fleet.close()
    print(
        f"\n{scrapes} scrapes, {errors} not 200, {restarts} target restarts; engine label sets seen "
        f"{len(label_sets)}, at most {max_engines} served at once"
    )
    return 0 if verdict(samples, args.warmup) and errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
