"""CPU cost of `kvops top` watching 16 targets at 1 Hz, and its time to first frame.

The claim (issue 4): under 3 % of one core. This runs 16 simulated vLLMs in a process of
their own (benchmarks/sim_targets.py: each answers at once, as a vLLM's API server does),
starts `kvops top URL x16` as its own process in a real terminal (tmux, 120x40),
waits until all 16 engines are on screen (time to first frame: process start to 16 rows),
then measures the top process's CPU time (user + system, its threads included) over a
window and divides by wall time. The simulators' CPU is not counted.
The dashboard scrapes, parses, normalises, computes rates and redraws each second.

    python benchmarks/top_cpu.py [--targets 16] [--interval 1] [--seconds 60]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from sim_targets import start_targets  # benchmarks/sim_targets.py


def tmux(sock: str, *args: str) -> str:
    return subprocess.run(["tmux", "-S", sock, *args], capture_output=True, text=True, check=True).stdout


def ui_thread_seconds(proc: psutil.Process) -> float:
    """CPU seconds of the main thread (Textual's event loop: layout, render, terminal output);
    the rest of the process is the scrape threads (fetch, parse, normalise, collectors)."""
    for thread in proc.threads():
        if thread.id == proc.pid:
            return thread.user_time + thread.system_time
    return 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=16)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--seconds", type=float, default=60.0, help="measurement window")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        print("tmux is needed (apt-get install tmux)", file=sys.stderr)
        return 2

    targets = start_targets(args.targets)
    work = Path(tempfile.mkdtemp(prefix="kvops-top-bench-"))
    sock, pid_file = str(work / "tmux.sock"), work / "pid"
    urls = " ".join(targets.urls)
    command = (f"echo $$ > {pid_file}; exec {sys.executable} -m kvops.cli top "
               f"--interval {args.interval:g} {urls}")  # fmt: skip
    try:
        launched = time.monotonic()
        tmux(sock, "new-session", "-d", "-x", "120", "-y", "40", "-s", "bench", f"bash -c '{command}'")
        want = f"{args.targets} engine(s)"
        first_frame = None
        while time.monotonic() - launched < 60:
            screen = tmux(sock, "capture-pane", "-p", "-t", "bench")
            if want in screen and screen.count("Llama-3.1-8B-Instruct") >= min(args.targets, 30):
                first_frame = time.monotonic() - launched
                break
            time.sleep(0.02)
        if first_frame is None:
            print("kvops top did not show every target within 60 s", file=sys.stderr)
            return 1
        proc = psutil.Process(int(pid_file.read_text()))
        time.sleep(2 * args.interval)  # past start-up: the steady state is what is claimed
        cpu0, ui0, wall0 = proc.cpu_times(), ui_thread_seconds(proc), time.monotonic()
        time.sleep(args.seconds)
        cpu1, ui1, wall1 = proc.cpu_times(), ui_thread_seconds(proc), time.monotonic()
        busy = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
        share = busy / (wall1 - wall0)
        system_share = (cpu1.system - cpu0.system) / (wall1 - wall0)  # syscalls, wake-ups
        ui_share = (ui1 - ui0) / (wall1 - wall0)
        rss = proc.memory_info().rss
        screen = tmux(sock, "capture-pane", "-p", "-t", "bench")
        down = "down" in screen.split("\n", 1)[0]
        tmux(sock, "send-keys", "-t", "bench", "q")  # quit cleanly before the simulators stop
        proc.wait(timeout=10)
    finally:
        subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)
        targets.stop()
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "targets": args.targets,
        "interval_seconds": args.interval,
        "window_seconds": args.seconds,
        "cpu_share_of_one_core": share,
        "system_share": system_share,
        "ui_thread_share": ui_share,
        "scrape_threads_share": share - ui_share,
        "time_to_first_frame_seconds": first_frame,
        "rss_bytes": rss,
        "any_target_down": down,
        "cpus": os.cpu_count(),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"kvops top, {args.targets} targets at {args.interval:g} s, {args.seconds:g} s window:")
        print(f"  CPU: {share * 100:.2f} % of one core (user+system of the top process)")
        print(f"    of which in the kernel (system time): {system_share * 100:.2f} %")
        scrape = share - ui_share
        print(f"    UI thread (Textual): {ui_share * 100:.2f} %; scrape threads: {scrape * 100:.2f} %")
        print(f"  time to first frame (process start to all {args.targets} rows): {first_frame:.2f} s")
        print(f"  RSS: {rss / 2**20:.0f} MiB; any target down: {down}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
