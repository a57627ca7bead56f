"""The exporter's per-page work with the caches emptied first, as a fresh round meets it.

    python benchmarks/round_cold.py [--targets 16] [--calls 40] [--before DIR] [--pairs 3]

A round every 0.6 s (every 15 s behind Prometheus) finds the exporter's objects out of the CPU
caches: the 16 simulated vLLMs and everything else on the machine ran in between
(docs/performance.md, "A round starts cold"). A tight loop measures the pieces warm and
overstates what a change saves. Here each call is preceded by touching a 96 MB buffer (more
than this machine's 32 MB L3), and its thread CPU time is taken, for the pieces of a round that
are Python over many objects:

- `parse`: the simulated pages parsed (kvops.exposition.parser, the C finder where built);
- `readers`: the parsed pages normalised (kvops.engines.registry);
- `write`: the exposition written from the snapshot (kvops.exporter.text_sink), no GPUs.

The same pieces warm (no buffer touched) are printed beside them. `--before DIR` runs the same
measurement from another checkout (`git archive <commit> | tar -x -C DIR`, C parts built) in
alternating pairs, each in a process of its own, and prints each pair and their medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from cli_args import checkout, positive  # noqa: E402  (benchmarks/cli_args.py)
from trees import c_parts  # noqa: E402  (benchmarks/trees.py)

_FLUSH_BYTES = 96 << 20
PIECES = ("parse", "readers", "write")


def measure(targets: int, calls: int) -> dict[str, dict[str, float]]:
    """µs a call for each piece, warm and cold, in this process (the kvops first on sys.path)."""
    from kvops.engines import registry
    from kvops.exporter import text_sink
    from kvops.exposition import parser
    from kvops.sim.server import Sim
    from kvops.snapshot import Snapshot

    pages = [Sim(seed=i).metrics().decode() for i in range(targets)]
    parsed = [parser.parse(page, registry.WANTED) for page in pages]
    # again: the label sets are known from here on, as from a target's second scrape
    parsed = [parser.parse(page, registry.WANTED) for page in pages]
    urls = [f"http://h:{8000 + i}" for i in range(targets)]
    snap = Snapshot(time=0, targets=[registry.normalise(r, url) for r, url in zip(parsed, urls, strict=True)])
    text_sink.write(snap)
    junk = bytearray(_FLUSH_BYTES)
    stride = range(0, len(junk), 64)
    ones = b"\x01" * len(stride)

    def flush() -> None:
        junk[::64] = ones  # a write to every cache line of the buffer

    work = {
        "parse": lambda: [parser.parse(page, registry.WANTED) for page in pages],
        "readers": lambda: [registry.normalise(r, url) for r, url in zip(parsed, urls, strict=True)],
        "write": lambda: text_sink.write(snap),
    }
    out: dict[str, dict[str, float]] = {}
    for name in PIECES:
        out[name] = {}
        for state in ("warm", "cold"):
            spent = []
            for _ in range(calls):
                if state == "cold":
                    flush()
                start = time.thread_time_ns()
                work[name]()
                spent.append(time.thread_time_ns() - start)
            out[name][state] = statistics.median(spent) / 1000
    return out


class TreeFailed(Exception):
    """measure() failed in a checkout's process: its last line of stderr says why."""


def run_in(tree: Path, targets: int, calls: int) -> dict[str, dict[str, float]]:
    """measure() in a process of its own, with `tree`'s kvops first on sys.path; TreeFailed
    when it does not end with its figures (a checkout too old for it, say)."""
    code = f"import json, sys; sys.path[:0] = [{str(tree)!r}, {str(ROOT / 'benchmarks')!r}]\n"
    code += f"import round_cold; print(json.dumps(round_cold.measure({targets}, {calls})))"
    command = [sys.executable, "-c", code]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=str(tree))
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        said = proc.stderr.strip().splitlines()
        raise TreeFailed(f"{tree}: {said[-1] if said else f'exit status {proc.returncode}'}")
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", type=positive(int), default=16)
    ap.add_argument("--calls", type=positive(int), default=40, help="calls a piece and state (median taken)")
    ap.add_argument("--before", metavar="DIR", type=checkout, help="also measure this checkout, alternating")
    ap.add_argument("--pairs", type=positive(int), default=3, help="alternating runs with --before")
    args = ap.parse_args()
    trees = {"kvops": ROOT, **({"before": Path(args.before).resolve()} if args.before else {})}
    for name, tree in trees.items():
        print(f"{name}: {c_parts(tree)}")
    runs: dict[str, list[dict[str, dict[str, float]]]] = {name: [] for name in trees}
    try:
        for _ in range(args.pairs if args.before else 1):
            for name, tree in trees.items():
                runs[name].append(run_in(tree, args.targets, args.calls))
    except TreeFailed as exc:
        print(f"round_cold.py: measuring {exc}", file=sys.stderr)
        return 2
    print(f"{args.targets} simulated vLLM pages; median µs a call of {args.calls}, "
          "caches emptied before each cold one")  # fmt: skip
    print(f"{'piece':8} {'tree':7} {'warm':>8} {'cold':>8}   runs (cold)")
    for piece in PIECES:
        for name in trees:
            warm = statistics.median(r[piece]["warm"] for r in runs[name])
            cold = [r[piece]["cold"] for r in runs[name]]
            each = " ".join(f"{c:.0f}" for c in cold)
            print(f"{piece:8} {name:7} {warm:8.0f} {statistics.median(cold):8.0f}   {each}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
