"""Exporter scrape cost: kvops exporter vs a naive exporter, same targets, same run.

    python benchmarks/exporter_scrape.py [--targets 16] [--gpus 8] [--scrapes 300]

Setup, all on loopback: N simulated vLLMs (`kvops.sim.server.Sim`, vLLM 0.33 format,
re-rendered once a second), one process each (benchmarks/sim_targets.py); the NVML stub
library from tests/collectors/ plays G GPUs. Two exporter processes scrape the same targets
and the same stub GPUs:
- kvops: `kvops exporter` as shipped (targets fetched together by libcurl, fast parser);
- naive: what one writes first (benchmarks/naive_exporter.py): fetch each target in turn,
  parse with prometheus_client.parser, then the same families.
Each is scraped alternately, a kvops exporter at most once in 0.6 s (so that each of its
scrapes is a fresh round, as Prometheus's interval gives); latency is measured by the client,
CPU seconds per scrape from the exporter process's own CPU time (psutil) over the run, and
its minor page faults per scrape (memory given back to the kernel and asked for again).

`--floor` adds benchmarks/floor_exporter.py: the same kvops exporter with the work per wanted
line taken out (the scan that finds the lines is kept), a floor for the ratio to the naive one.

`--before DIR` adds another exporter, `kvops exporter` imported from another checkout of
kvops (say `git archive <commit> | tar -x -C DIR`), scraped in the same rounds: a change's
before and after measured in one run on the same busy machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from cli_args import checkout, positive  # noqa: E402  (benchmarks/cli_args.py)
from collectors import nvml_stub  # noqa: E402  (tests/collectors/nvml_stub.py)
from sim_targets import start_targets  # noqa: E402  (benchmarks/sim_targets.py)
from trees import c_parts  # noqa: E402  (benchmarks/trees.py)

from support.prom import free_port  # noqa: E402

# `kvops exporter` serves a round again to scrapes within ROUND_REUSE_SECONDS (0.5 s) of it;
# Prometheus scrapes every 15 s or so, so every scrape a user's exporter answers is a fresh round.
# A kvops-type exporter is scraped at most once in this many seconds, whatever the naive
# exporter's pace (on an idle machine it answers in ~0.17 s, and kvops would then be measured
# copying a round it already had: 3 ms instead of ~10).
FRESH_ROUND_SECONDS = 0.6


def wait_http(url: str, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if requests.get(url, timeout=5).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{url} did not answer")


def stub_gpu_env(gpus: int) -> dict[str, str]:
    """This process's environment plus the stub NVML library playing `gpus` GPUs."""
    work = Path(tempfile.mkdtemp(prefix="kvops-bench-"))
    libdir = nvml_stub.build(work / "nvml")
    config = nvml_stub.write_config(work / "nvml.json", nvml_stub.gpus(gpus))
    return dict(os.environ, LD_LIBRARY_PATH=str(libdir), **{nvml_stub.CONFIG_ENV: str(config)})


def exporter_args(urls: list[str], port: int) -> list[str]:
    """`kvops exporter`'s options for these targets, listening on loopback at `port`."""
    target_args = [a for u in urls for a in ("--target", u)]
    return [*target_args, "--listen", f"127.0.0.1:{port}", "--log-level", "error"]


def exporter_command(urls: list[str], port: int) -> list[str]:
    return [sys.executable, "-m", "kvops.cli", "exporter", *exporter_args(urls, port)]


def ratio(a: float, b: float) -> str:
    # CPU times tick in 10 ms steps: a short run can measure none at all.
    return f"{a / b:.2f}x" if b > 0 else "unknown (no CPU time measured: too few scrapes)"


def minor_faults(pid: int) -> int:
    """The process's minor page faults so far (/proc/PID/stat, field 10): pages the kernel
    mapped, and zeroed, on their first touch. 0 where there is no /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rpartition(")")[2].split()[7])
    except (OSError, IndexError, ValueError):
        return 0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", type=positive(int), default=16)
    ap.add_argument("--gpus", type=positive(int), default=8)
    ap.add_argument("--scrapes", type=positive(int), default=300)
    ap.add_argument("--profile", metavar="FILE", help="record the kvops exporter with py-spy during the "
                    "measured scrapes, as speedscope JSON (pip install py-spy)")  # fmt: skip
    ap.add_argument("--before", metavar="DIR", type=checkout,
                    help="also run `kvops exporter` from this checkout")  # fmt: skip
    ap.add_argument("--floor", action="store_true",
                    help="also run benchmarks/floor_exporter.py: kvops that finds each page's wanted "
                    "lines and does nothing with them (what no per-line work can go below)")  # fmt: skip
    ap.add_argument("--honour-name-filter", action="store_true",
                    help="targets answer `?name[]=` with the families asked for, as no vLLM release does "
                    "(docs/real-vllm.md); default: whole pages")  # fmt: skip
    args = ap.parse_args()

    env = stub_gpu_env(args.gpus)

    targets = start_targets(args.targets, honour_filter=args.honour_name_filter)
    urls = targets.urls
    procs: dict[str, subprocess.Popen[bytes]] = {}
    ports = {"kvops": free_port(), "naive": free_port()}
    if args.before:
        ports["before"] = free_port()
    if args.floor:
        ports["floor"] = free_port()
    for name, code in (("kvops", str(ROOT)), ("before", args.before)):
        if name not in ports:
            continue
        command = exporter_command(urls, ports[name])
        # cwd too: `python -m` puts the working directory first on sys.path.
        code = str(Path(code).resolve())
        procs[name] = subprocess.Popen(command, env=dict(env, PYTHONPATH=code), cwd=code)
    if args.floor:
        floor = [sys.executable, str(ROOT / "benchmarks" / "floor_exporter.py")]
        floor += exporter_args(urls, ports["floor"])
        procs["floor"] = subprocess.Popen(floor, env=dict(env, PYTHONPATH=str(ROOT)), cwd=str(ROOT))
    procs["naive"] = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "naive_exporter.py"), str(ports["naive"]), *urls], env=env
    )
    try:
        session = requests.Session()
        for port in ports.values():
            wait_http(f"http://127.0.0.1:{port}/metrics")
            for _ in range(20):  # warm-up: connections, caches, first-scrape work
                session.get(f"http://127.0.0.1:{port}/metrics", timeout=30)
        spy = None
        if args.profile:
            spy_cmd = ["py-spy", "record", "--format", "speedscope", "-o", args.profile, "-r", "200",
                       "-p", str(procs["kvops"].pid)]  # fmt: skip
            spy = subprocess.Popen(spy_cmd, stdout=subprocess.DEVNULL)
            time.sleep(1)
        latency: dict[str, list[float]] = {n: [] for n in ports}
        cpu0 = {n: sum(psutil.Process(p.pid).cpu_times()[:2]) for n, p in procs.items()}
        faults0 = {n: minor_faults(p.pid) for n, p in procs.items()}
        sizes: dict[str, int] = {}
        last: dict[str, float] = {}
        for _ in range(args.scrapes):
            for name, port in ports.items():
                if name != "naive":  # a fresh round each scrape, as a 15 s scrape interval gets
                    wait = last.get(name, 0.0) + FRESH_ROUND_SECONDS - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                    last[name] = time.monotonic()
                t0 = time.perf_counter()
                resp = session.get(f"http://127.0.0.1:{port}/metrics", timeout=30)
                latency[name].append(time.perf_counter() - t0)
                sizes[name] = len(resp.content)
                assert resp.status_code == 200
        cpu = {
            n: (sum(psutil.Process(p.pid).cpu_times()[:2]) - cpu0[n]) / args.scrapes for n, p in procs.items()
        }
        faults = {n: (minor_faults(p.pid) - faults0[n]) / args.scrapes for n, p in procs.items()}
        if spy is not None:
            spy.send_signal(2)
            spy.wait(timeout=60)
        text = session.get(f"http://127.0.0.1:{ports['kvops']}/metrics", timeout=30).text
        up = text.count("kvops_target_up{") and sum(
            1 for line in text.splitlines() if line.startswith("kvops_target_up{") and line.endswith(" 1.0")
        )
        gpus = sum(1 for line in text.splitlines() if line.startswith("kvops_gpu_memory_total_bytes{"))
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(timeout=10)
        targets.stop()

    print(f"{args.targets} simulated vLLM targets ({up} up), {gpus} stub GPUs, {args.scrapes} scrapes each; "
          f"python {platform.python_version()}, {os.cpu_count()} cores")  # fmt: skip
    trees = {"kvops": ROOT, "before": args.before, "floor": ROOT}
    print("; ".join(f"{name}: {c_parts(trees[name])}" for name in procs if trees.get(name)))
    heads = ("p50 ms", 8), ("p99 ms", 8), ("CPU ms/scrape", 14), ("faults/scrape", 14), ("bytes", 8)
    print(f"{'exporter':8} " + " ".join(f"{text:>{width}}" for text, width in heads))
    for name in ports:
        lat = latency[name]
        print(f"{name:8} {statistics.median(lat) * 1e3:8.1f} {percentile(lat, 0.99) * 1e3:8.1f} "
              f"{cpu[name] * 1e3:14.1f} {faults[name]:14.1f} {sizes[name]:8d}")  # fmt: skip
    k = latency["kvops"]
    for other in [n for n in ports if n != "kvops"]:
        o = latency[other]
        print(
            f"{other}/kvops: p50 {statistics.median(o) / statistics.median(k):.1f}x, "
            f"p99 {percentile(o, 0.99) / percentile(k, 0.99):.1f}x, CPU {ratio(cpu[other], cpu['kvops'])}"
        )
    if "floor" in ports:  # the ratio kvops would reach if its work per wanted line cost nothing
        f, n = latency["floor"], latency["naive"]
        print(
            f"naive/floor: p99 {percentile(n, 0.99) / percentile(f, 0.99):.1f}x, "
            f"CPU {ratio(cpu['naive'], cpu['floor'])}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
