"""CPU cost of `kvops top` watching 16 targets at 1 Hz, and its time to first frame.

The claim (issue 4): under 3 % of one core. This runs 16 simulated vLLMs in a process of
their own (benchmarks/sim_targets.py: each answers at once, as a vLLM's API server does, and
like every vLLM release serves its whole page whatever `?name[]=` asks; `--honour-name-filter`
measures against targets that answer the filter instead, which no vLLM release does),
starts `kvops top URL x16` as its own process in a real terminal (tmux, 120x40),
waits until all 16 engines are on screen (time to first frame: process start to 16 rows),
then measures the top process's CPU time (user + system, its threads included) over a
window and divides by wall time. The simulators' CPU is not counted.
The dashboard scrapes, parses, normalises, computes rates and redraws each second. The
window starts two intervals after the first frame; `--warmup 300` starts it with top's
history full (300 frames: the charts and sparklines read from it every frame).

`--before DIR` also measures a `kvops top` imported from another checkout of kvops (say
`git worktree add DIR <commit>`) on the same targets, in one run: windows alternate, this
checkout's top then the other's, `--rounds` times (default 2), each top alone on the machine
with the simulators, started afresh in a terminal of its own. Alternating spreads the
machine's drift over both; each top's figure is the mean of its windows, and each window
is printed. `--together` runs both tops at once in every window instead (both then share
the two cores, so both read higher than alone: 4.5 % where alone reads 2.9 %, 2026-11-27).

    python benchmarks/top_cpu.py [--targets 16] [--interval 1] [--seconds 60] [--warmup S]
                                 [--before DIR [--rounds 2] [--together]]
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
from typing import Any

import psutil
from cli_args import checkout, positive  # benchmarks/cli_args.py
from sim_targets import start_targets  # benchmarks/sim_targets.py
from trees import c_parts  # benchmarks/trees.py


def tmux(sock: str, *args: str) -> str:
    return subprocess.run(["tmux", "-S", sock, *args], capture_output=True, text=True, check=True).stdout


def ui_thread_seconds(proc: psutil.Process) -> float:
    """CPU seconds of the main thread (Textual's event loop: layout, render, terminal output);
    the rest of the process is the scrape threads (fetch, parse, normalise, collectors)."""
    for thread in proc.threads():
        if thread.id == proc.pid:
            return thread.user_time + thread.system_time
    return 0.0


ROOT = Path(__file__).resolve().parents[1]


class Top:
    """One `kvops top` process (code from `code`, a checkout) in a tmux session of its own."""

    def __init__(self, name: str, code: Path, work: Path, urls: str, interval: float) -> None:
        self.name, self.code = name, code
        self.sock, self.pid_file = str(work / f"{name}.sock"), work / f"{name}.pid"
        command = (f"echo $$ > {self.pid_file}; cd {code}; PYTHONPATH={code} "
                   f"exec {sys.executable} -m kvops.cli top --interval {interval:g} {urls}")  # fmt: skip
        self.launched = time.monotonic()
        tmux(self.sock, "new-session", "-d", "-x", "120", "-y", "40", "-s", "bench", f"bash -c '{command}'")
        self.first_frame: float | None = None
        self.proc: psutil.Process | None = None

    def screen(self) -> str:
        return tmux(self.sock, "capture-pane", "-p", "-t", "bench")

    def shows_all(self, targets: int) -> bool:
        screen = self.screen()
        return f"{targets} engine(s)" in screen and screen.count("Llama-3.1-8B-Instruct") >= min(targets, 30)

    def sample(self) -> tuple[float, float, float]:
        assert self.proc is not None
        cpu = self.proc.cpu_times()
        return cpu.user + cpu.system, cpu.system, ui_thread_seconds(self.proc)

    def stop(self) -> None:
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True)


def measure(tops: list[Top], args: argparse.Namespace) -> list[dict[str, Any]] | None:
    """Start `tops` at once, wait for their first frames, measure one window, quit them.
    None if a top did not show every target within 60 s."""
    results: list[dict[str, Any]] = []
    try:
        while any(t.first_frame is None for t in tops):
            for top in tops:
                if top.first_frame is None and top.shows_all(args.targets):
                    top.first_frame = time.monotonic() - top.launched
            if time.monotonic() - tops[0].launched > 60:
                print("kvops top did not show every target within 60 s", file=sys.stderr)
                return None
            time.sleep(0.02)
        for top in tops:
            top.proc = psutil.Process(int(top.pid_file.read_text()))
        time.sleep(args.warmup if args.warmup is not None else 2 * args.interval)  # past start-up
        before = [t.sample() for t in tops]
        wall0 = time.monotonic()
        time.sleep(args.seconds)
        after = [t.sample() for t in tops]
        wall = time.monotonic() - wall0
        for top, (cpu0, sys0, ui0), (cpu1, sys1, ui1) in zip(tops, before, after, strict=True):
            assert top.proc is not None
            down = "down" in top.screen().split("\n", 1)[0]
            results.append({
                "code": top.name,
                "c parts": c_parts(top.code),
                "cpu_share_of_one_core": (cpu1 - cpu0) / wall,
                "system_share": (sys1 - sys0) / wall,  # syscalls, wake-ups
                "ui_thread_share": (ui1 - ui0) / wall,
                "scrape_threads_share": (cpu1 - cpu0 - (ui1 - ui0)) / wall,
                "time_to_first_frame_seconds": top.first_frame,
                "rss_bytes": top.proc.memory_info().rss,
                "any_target_down": down,
            })  # fmt: skip
        for top in tops:
            tmux(top.sock, "send-keys", "-t", "bench", "q")  # quit cleanly before the simulators stop
        for top in tops:
            assert top.proc is not None
            top.proc.wait(timeout=10)
    finally:
        for top in tops:
            top.stop()
    return results


FIGURES = ("cpu_share_of_one_core", "system_share", "ui_thread_share", "scrape_threads_share",
           "time_to_first_frame_seconds", "rss_bytes")  # fmt: skip


def summary(code: str, windows: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """One top's figures: the mean of its windows (each kept under "windows")."""
    out: dict[str, Any] = {
        "code": code,
        "c parts": windows[0]["c parts"],
        "targets": args.targets,
        "interval_seconds": args.interval,
        "window_seconds": args.seconds,
        "warmup_seconds": args.warmup if args.warmup is not None else 2 * args.interval,
        "targets_honour_name_filter": args.honour_name_filter,
        "together": args.together,
        "cpus": os.cpu_count(),
    }
    for key in FIGURES:
        values = [float(w[key]) for w in windows]
        out[key] = sum(values) / len(values)
    out["any_target_down"] = any(w["any_target_down"] for w in windows)
    out["windows"] = windows
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=positive(int), default=16)
    parser.add_argument("--interval", type=positive(float), default=1.0)
    parser.add_argument("--seconds", type=positive(float), default=60.0, help="measurement window")
    parser.add_argument(
        "--before", metavar="DIR", type=checkout, help="also measure the top of this checkout"
    )
    parser.add_argument(
        "--rounds", type=positive(int), default=2, help="with --before: windows of each top, alternating"
    )
    parser.add_argument(
        "--together", action="store_true", help="with --before: both tops at once in each window"
    )
    parser.add_argument(
        "--warmup",
        type=positive(float),
        help="seconds between the first frame and the window (default: two intervals; top's "
        "history is full after 300 frames)",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--honour-name-filter",
        action="store_true",
        help="targets answer ?name[]= with the named samples only (no vLLM release does: docs/real-vllm.md)",
    )
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        print("tmux is needed (apt-get install tmux)", file=sys.stderr)
        return 2
    if (args.together or args.rounds != 2) and not args.before:
        parser.error("--rounds and --together go with --before")

    codes = [("kvops", ROOT)] + ([("before", args.before)] if args.before else [])
    if not args.before:
        plan = [codes]
    elif args.together:
        plan = [codes] * args.rounds
    else:
        plan = [[code] for _ in range(args.rounds) for code in codes]
    targets = start_targets(args.targets, args.honour_name_filter)
    work = Path(tempfile.mkdtemp(prefix="kvops-top-bench-"))
    urls = " ".join(targets.urls)
    windows: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in codes}
    try:
        for window in plan:
            measured = measure([Top(name, code, work, urls, args.interval) for name, code in window], args)
            if measured is None:
                return 1
            for result in measured:
                windows[str(result["code"])].append(result)
    finally:
        targets.stop()
        shutil.rmtree(work, ignore_errors=True)
    results = [summary(name, windows[name], args) for name, _ in codes]
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else results))
        return 0
    how = "at once" if args.together else "alternating, each alone"
    for r in results:
        share, ui = r["cpu_share_of_one_core"], r["ui_thread_share"]
        n = len(r["windows"])
        window = f"{args.targets} targets at {args.interval:g} s, {args.seconds:g} s window"
        window += f" after {r['warmup_seconds']:g} s" if args.warmup is not None else ""
        window += f" x{n} ({how})" if args.before else ""
        print(f"kvops top ({r['code']}; {r['c parts']}), {window}:")
        print(f"  CPU: {share * 100:.2f} % of one core (user+system of the top process)")
        if n > 1:
            each = ", ".join(f"{w['cpu_share_of_one_core'] * 100:.2f}" for w in r["windows"])
            print(f"    each window: {each} %")
        print(f"    of which in the kernel (system time): {r['system_share'] * 100:.2f} %")
        print(f"    UI thread (Textual): {ui * 100:.2f} %; scrape threads: {(share - ui) * 100:.2f} %")
        print(f"  time to first frame (process start to all {args.targets} rows): "
              f"{r['time_to_first_frame_seconds']:.2f} s")  # fmt: skip
        print(f"  RSS: {r['rss_bytes'] / 2**20:.0f} MiB; any target down: {r['any_target_down']}")
    if len(results) == 2:
        ratio = results[1]["cpu_share_of_one_core"] / results[0]["cpu_share_of_one_core"]
        print(f"before / kvops: {ratio:.2f}x the CPU, same run ({how})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
