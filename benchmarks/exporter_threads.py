"""Where a `kvops exporter` scrape's CPU goes, thread by thread, in exporter_scrape.py's rhythm.

    python benchmarks/exporter_threads.py [--targets 16] [--gpus 8] [--scrapes 60] [--pause 0.6]

The same setup as benchmarks/exporter_scrape.py (16 simulated vLLMs in processes of their own,
the stub NVML library as 8 GPUs), without the naive exporter: kvops alone is scraped, once every
`--pause` seconds (0.6 s: the naive scrape that separates two kvops scrapes there), and each
thread's CPU time (psutil) is divided by the scrapes. The thread that serves /metrics runs the
round (fetch, parse, normalise, render, encode, gzip); the hardware collectors run in the
runner's pool. `--pause 0` shows the other end: scrapes within 0.5 s share a round
(ROUND_REUSE_SECONDS), so most cost only a copy of the round's exposition.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import psutil
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from cli_args import positive  # noqa: E402  (benchmarks/cli_args.py)
from exporter_scrape import exporter_command, stub_gpu_env, wait_http  # noqa: E402  (benchmarks/exporter_scrape.py)
from sim_targets import start_targets  # noqa: E402  (benchmarks/sim_targets.py)

from support.prom import free_port  # noqa: E402


def thread_names(pid: int) -> dict[int, str]:
    """Native thread id -> Python thread name, from py-spy if it is installed (else empty)."""
    try:
        out = subprocess.run(["py-spy", "dump", "--pid", str(pid)], capture_output=True, text=True).stdout
    except OSError:
        return {}
    names: dict[int, str] = {}
    for line in out.splitlines():
        if line.startswith("Thread ") and '"' in line:
            tid = line.split()[1]
            if tid.isdigit():
                names[int(tid)] = line.split('"')[1]
    return names


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", type=positive(int), default=16)
    ap.add_argument("--gpus", type=positive(int), default=8)
    ap.add_argument("--scrapes", type=positive(int), default=60)
    ap.add_argument("--pause", type=float, default=0.6, help="seconds between scrapes (0 or more)")
    args = ap.parse_args()
    if not 0 <= args.pause < float("inf"):
        ap.error(f"--pause: expected a finite number of seconds, 0 or more, got {args.pause}")

    env = dict(stub_gpu_env(args.gpus), PYTHONPATH=str(ROOT))
    targets = start_targets(args.targets)
    port = free_port()
    command = exporter_command(targets.urls, port)
    proc = subprocess.Popen(command, env=env, cwd=str(ROOT))
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        wait_http(url)
        session = requests.Session()
        for _ in range(20):  # warm-up
            session.get(url, timeout=30)
        exporter = psutil.Process(proc.pid)
        before = {t.id: t.user_time + t.system_time for t in exporter.threads()}
        total0 = sum(exporter.cpu_times()[:2])
        for _ in range(args.scrapes):
            assert session.get(url, timeout=30).status_code == 200
            time.sleep(args.pause)
        total = (sum(exporter.cpu_times()[:2]) - total0) / args.scrapes
        per_thread = {t.id: t.user_time + t.system_time - before.get(t.id, 0.0) for t in exporter.threads()}
        per_thread = {tid: seconds / args.scrapes for tid, seconds in per_thread.items()}
        names = thread_names(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        targets.stop()
    print(f"{args.targets} targets, {args.gpus} stub GPUs, {args.scrapes} scrapes {args.pause:g} s apart")
    print(f"exporter process: {total * 1e3:.1f} ms CPU a scrape")
    for tid, seconds in sorted(per_thread.items(), key=lambda kv: -kv[1]):
        if seconds * 1e3 >= 0.1:
            print(f"  {names.get(tid, f'thread {tid}'):20} {seconds * 1e3:6.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
