"""Scanning a large vLLM log with `kvops doctor --log`: throughput and memory, vs a naive scan.

    python benchmarks/doctor_log_scan.py [--mb 200]
    python benchmarks/doctor_log_scan.py --mb 1024 --before DIR [--rounds 3] [--no-naive]

Writes a log of realistic vLLM noise (periodic stats lines, KV transfer lines, request logs,
each with vLLM's `(APIServer pid=1) INFO ... [file:line]` prefix) of the given size with one
AITER GEMM traceback at the end, then times:
- kvops: logs.scan_file (substring pre-filter, then the playbooks' regexes on candidates);
- baseline: every playbook's signature regexes on every line (what a straightforward scanner does).
Both must find the same failure. Peak RSS growth is reported to show the scan streams.

`--before DIR` compares this tree's scan with another checkout's (`git archive <commit> | tar -x
-C DIR`) on the same log: each scan runs in a fresh process importing its own tree's kvops, the
two alternating `--rounds` times, and the CPU time of `logs.scan_file` is compared (median of the
rounds and the range of the per-round ratios). `--no-naive` leaves the naive baseline out (it
takes about ten times as long as the scan).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kvops.doctor.judging import catalog, logs

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "doctor" / "logs"
FAILURE = LOGS / "rocm-aiter-ck-moe-gemm-unsupported.log"
NOISE = [
    "(APIServer pid=1) INFO 10-14 17:01:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput:"
    " 1479.5 tokens/s, Avg generation throughput: 834.0 tokens/s, Running: 39 reqs, Waiting: 0 reqs,"
    " GPU KV cache usage: 75.8%,"
    " Prefix cache hit rate: 42.4%, External prefix cache hit rate: 18.0%",
    "(APIServer pid=1) INFO 10-14 17:01:{s:02d} [metrics.py:120] KV Transfer metrics:"
    " vllm:kv_offload_store_bytes=1073741824, vllm:kv_offload_store_time=0.041,"
    " vllm:kv_offload_load_bytes=52428800",
    '(APIServer pid=1) INFO:     10.0.0.{s}:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "(APIServer pid=1) INFO 10-14 17:01:{s:02d} [logger.py:41] Received request chatcmpl-{s}abcdef: prompt:"
    " '<|begin_of_text|>Summarise the following document for an operator...', params: SamplingParams(n=1)",
]


def write_log(path: Path, megabytes: int) -> int:
    target = megabytes << 20
    written = 0
    with path.open("w", encoding="utf-8") as out:
        i = 0
        while written < target:
            line = NOISE[i % len(NOISE)].format(s=i % 60) + "\n"
            out.write(line)
            written += len(line)
            i += 1
        tail = FAILURE.read_text()
        out.write(tail)
        written += len(tail)
    return written


def naive(path: Path, books: list[catalog.Playbook]) -> set[str]:
    found = set()
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            for pb in books:
                if any(s.search(line) for s in pb.signatures):
                    found.add(pb.id)
    return found


def scan_cpu_seconds(path: str) -> float:
    """CPU seconds of one logs.scan_file of `path` with the kvops this process imported."""
    books = list(catalog.load().failures)
    t0 = time.process_time()
    result = logs.scan_file(path, books)
    spent = time.process_time() - t0
    assert "aiter-gemm-unsupported" in result.hits, "the scan must find the failure"
    return spent


def scan_in(tree: Path, path: Path) -> float:
    """scan_cpu_seconds in a fresh process importing `tree`'s kvops."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, __file__, "--scan-only", str(path)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.split()[-1])


def compare(path: Path, before: Path, rounds: int) -> None:
    mine, theirs = [], []
    for i in range(rounds):  # alternating, so a busy minute weighs on both alike
        mine.append(scan_in(ROOT, path))
        theirs.append(scan_in(before, path))
        ratio = mine[-1] / theirs[-1]
        print(f"round {i + 1}: this tree {mine[-1]:.2f} s CPU, before {theirs[-1]:.2f} s ({ratio:.3f}x)")
    ratios = [m / b for m, b in zip(mine, theirs, strict=True)]
    print(
        f"median: this tree {statistics.median(mine):.2f} s, before {statistics.median(theirs):.2f} s;"
        f" this tree / before {statistics.median(ratios):.3f}x (range {min(ratios):.3f}-{max(ratios):.3f})"
    )


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--scan-only":  # a child of --before
        print(f"{scan_cpu_seconds(sys.argv[2]):.6f}")
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="size of the generated log in MiB")
    parser.add_argument("--before", type=Path, metavar="DIR", help="another checkout's scan, alternating")
    parser.add_argument("--rounds", type=int, default=3, help="with --before: alternating rounds")
    parser.add_argument("--no-naive", action="store_true", help="with --before: leave the naive scan out")
    args = parser.parse_args()
    if args.before is not None:
        if not (args.before / "kvops" / "doctor").is_dir():
            parser.error(f"--before {args.before}: not a kvops checkout")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "vllm.log"
            size = write_log(path, args.mb)
            print(f"log {size / 2**20:.0f} MiB; logs.scan_file CPU time, each in a fresh process")
            compare(path, args.before, args.rounds)
            if args.no_naive:
                return 0
    books = list(catalog.load().failures)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "vllm.log"
        size = write_log(path, args.mb)
        lines = sum(1 for _ in path.open("rb"))
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        result = logs.scan_file(str(path), books)
        kvops_s = time.perf_counter() - t0
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        baseline = naive(path, books)
        naive_s = time.perf_counter() - t0
    assert "aiter-gemm-unsupported" in result.hits and "aiter-gemm-unsupported" in baseline, (
        "both must find it"
    )
    assert set(result.hits) <= baseline
    mib = size / 2**20
    print(f"python {platform.python_version()} on {platform.machine()}, log {mib:.0f} MiB, {lines:,} lines")
    print(f"kvops scan:    {kvops_s:6.2f} s  {mib / kvops_s:7.1f} MiB/s  {lines / kvops_s:,.0f} lines/s")
    print(f"naive regexes: {naive_s:6.2f} s  {mib / naive_s:7.1f} MiB/s  {lines / naive_s:,.0f} lines/s")
    grew = (rss1 - rss0) / 1024
    print(f"speed-up {naive_s / kvops_s:.1f}x; peak RSS grew {grew:.1f} MiB during the kvops scan")
    print(f"a 2 GiB log at this rate: {2048 / (mib / kvops_s):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
