"""Scanning a large vLLM log with `kvops doctor --log`: throughput and memory, vs a naive scan.

    python benchmarks/doctor_log_scan.py [--mb 200]

Writes a log of realistic vLLM noise (periodic stats lines, KV transfer lines, request logs,
each with vLLM's `(APIServer pid=1) INFO ... [file:line]` prefix) of the given size with one
AITER GEMM traceback at the end, then times:
- kvops: logs.scan_file (substring pre-filter, then the playbooks' regexes on candidates);
- baseline: every playbook's signature regexes on every line (what a straightforward scanner does).
Both must find the same failure. Peak RSS growth is reported to show the scan streams.
"""

from __future__ import annotations

import argparse
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

from kvops.doctor.judging import catalog, logs

LOGS = Path(__file__).resolve().parents[1] / "tests" / "doctor" / "logs"
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="size of the generated log in MiB")
    args = parser.parse_args()
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
