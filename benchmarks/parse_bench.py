"""Parsing a vLLM 0.33 exposition: kvops's parser vs prometheus_client's, same values.

    python benchmarks/parse_bench.py [--repeat N]

Two inputs: the real 0.33.0 fixture (offload-t2.prom, ~740 lines) and a 10x larger one made
from it (10 models x engines with LoRA-style labels: what a busy multi-model node serves).
A third, a label explosion (200k label sets of one wanted family, ~13 MB, issue 17), is read
with the exporter's default --max-samples-per-target: kvops's time to find it over the cap
against prometheus_client reading it (once: seconds).
kvops keeps only the families it needs (kvops.engines.registry.WANTED); the baseline,
prometheus_client.parser.text_string_to_metric_families, parses everything, which is all
it can do. Both are checked to give the same values for the kept samples before timing.
"""

from __future__ import annotations

import argparse
import platform
import re
import statistics
import sys
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from kvops.engines.registry import WANTED
from kvops.exposition import parser as exposition_parser
from kvops.exposition.parser import parse
from kvops.transport.http import DEFAULT_MAX_SAMPLES

FIXTURE = Path(__file__).resolve().parents[1] / "tests/fixtures/vllm/0.33.0/offload-t2.prom"


def enlarge(text: str, copies: int = 10) -> str:
    """Each sample line repeated for `copies` (model, engine) pairs; HELP/TYPE once."""
    out: list[str] = []
    for line in text.splitlines():
        if line.startswith("#") or 'model_name="' not in line:
            out.append(line)
            continue
        for i in range(copies):
            out.append(
                re.sub(r'engine="0"', f'engine="{i % 4}"', line).replace(
                    'model_name="meta-llama/Llama-3.1-8B-Instruct"',
                    f'model_name="org/model-{i // 4}-lora-adapter-{i}"',
                )
            )
    return "\n".join(out) + "\n"


def explosion(series: int = 200_000) -> str:
    lines = ["# TYPE vllm:num_requests_running gauge"]
    lines += [
        f'vllm:num_requests_running{{model_name="org/m-{i:07d}",engine="{i % 8}"}} 1' for i in range(series)
    ]
    return "\n".join(lines) + "\n"


def reference_values(text: str) -> dict:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name in WANTED
    }


def kvops_values(text: str) -> dict:
    r = parse(text, WANTED)
    return {(n, tuple(sorted(lb.items()))): v for n, ss in r.samples.items() for lb, v in ss}


def best_of(fn, text: str, repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(text)
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    base = FIXTURE.read_text()
    inputs = {"vLLM 0.33 fixture": base, "10x (10 models/engines, LoRA labels)": enlarge(base)}
    finder = "C line finder built" if exposition_parser.Finder is not None else "no C line finder"
    print(f"python {platform.python_version()} on {platform.machine()}, {args.repeat} runs each, median ms")
    print(finder)
    print(f"{'input':40} {'lines':>7} {'kvops':>9} {'prometheus_client':>18} {'ratio':>7}")
    for name, text in inputs.items():
        assert kvops_values(text) == reference_values(text), f"values differ on {name}"
        _, ours = best_of(lambda t: parse(t, WANTED), text, args.repeat)
        _, theirs = best_of(lambda t: list(text_string_to_metric_families(t)), text, max(3, args.repeat // 3))
        lines = text.count("\n")
        print(f"{name:40} {lines:7d} {ours * 1e3:9.3f} {theirs * 1e3:18.3f} {theirs / ours:6.1f}x")
    text = explosion()
    assert parse(text, WANTED, max_samples=DEFAULT_MAX_SAMPLES).over_limit
    _, ours = best_of(lambda t: parse(t, WANTED, max_samples=DEFAULT_MAX_SAMPLES), text, 5)
    _, theirs = best_of(lambda t: list(text_string_to_metric_families(t)), text, 1)
    name = f"200k label sets, {len(text) / 1e6:.1f} MB, cap {DEFAULT_MAX_SAMPLES}"
    print(f"{name:40} {text.count(chr(10)):7d} {ours * 1e3:9.3f} {theirs * 1e3:18.3f} {theirs / ours:6.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
