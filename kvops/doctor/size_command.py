"""`kvops size`: KV bytes per token for a model and a --kv-offloading-size for this host."""

from __future__ import annotations

import argparse

MAX_FLAG_INT = (1 << 31) - 1  # tokens, sequences, GPUs: vLLM takes each as an int32
MAX_ANSWER_GIB = 1 << 30  # an exbibyte: no host's RAM or /dev/shm


def _positive(text: str) -> int:
    from kvops.termsafe import visible

    shown = repr(visible(text[:24])) + ("..." if len(text) > 24 else "")
    try:
        value = int(text) if len(text) <= 32 else None  # (a 400-digit number is no count of anything)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {shown}") from None
    if value is None or not 1 <= value <= MAX_FLAG_INT:
        raise argparse.ArgumentTypeError(f"expected a positive integer up to 2^31-1, got {shown}")
    return value


EXAMPLES = """\
examples:
  kvops size --model ./Llama-3.1-8B-Instruct
  kvops size --model ./Llama-3.1-405B --max-model-len 32768 --concurrency 4 --tensor-parallel-size 8
  kvops size --model ./config.json --host-ram 512G --shm 256G    # judge another machine
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        required=True,
        metavar="DIR|config.json",
        help="model directory or config.json, or a Hugging Face id kvops ships (DeepSeek-V3*, Qwen3-Next)",
    )
    parser.add_argument(
        "--kv-cache-dtype",
        default="auto",
        choices=["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16", "float32"],
        help="KV cache dtype as vllm serve takes it (auto = the model's dtype)",
    )
    parser.add_argument(
        "--max-model-len",
        type=_positive,
        metavar="TOKENS",
        help="tokens per sequence (default: the config's max_position_embeddings)",
    )
    parser.add_argument(
        "--concurrency",
        type=_positive,
        default=1,
        metavar="N",
        help="sequences to keep offloaded (default 1)",
    )
    parser.add_argument(
        "--tensor-parallel-size",
        type=_positive,
        default=1,
        metavar="N",
        help="GPUs the KV heads are split over, as vllm serve takes it (default 1)",
    )
    # As doctor takes them: the machine that will serve, when it is not this one.
    parser.add_argument(
        "--host-ram", metavar="SIZE", help="the serving host's memory (e.g. 512G); default: this host's"
    )
    parser.add_argument(
        "--shm", metavar="SIZE", help="the serving host's /dev/shm free (e.g. 256G); default: this host's"
    )
    parser.add_argument("--json", action="store_true", help="print only JSON on stdout")


def run(args: argparse.Namespace) -> int:
    import json

    from kvops.doctor.command import _size_arg
    from kvops.doctor.judging.sizing import SizeReport
    from kvops.doctor.reading import modelcfg
    from kvops.doctor.reading.platform import probe
    from kvops.errors import UsageError

    host_ram = _size_arg("--host-ram", args.host_ram)  # bad sizes are named before any work
    shm = _size_arg("--shm", args.shm)
    from pathlib import Path

    from kvops.doctor.reading.known_models import shipped_config_for

    # A Hugging Face id kvops ships the config of (deepseek-ai/DeepSeek-V3.2) works as doctor's does.
    shipped = None if Path(args.model).exists() else shipped_config_for(args.model)
    model = shipped or modelcfg.load(args.model)
    max_len = args.max_model_len or model.max_position_embeddings
    if not max_len:
        raise UsageError("the config has no max_position_embeddings; pass --max-model-len")
    platform = probe(query_gpu_library=False)
    if host_ram is not None:  # another machine's RAM: this host's cgroup limit says nothing of it
        platform.host_ram_bytes, platform.memory_limit_bytes = host_ram, None
    if shm is not None:
        platform.shm_free_bytes = platform.shm_total_bytes = shm
    report = SizeReport(
        model=model,
        kv_cache_dtype=args.kv_cache_dtype,
        max_model_len=max_len,
        concurrency=args.concurrency,
        tensor_parallel_size=args.tensor_parallel_size,
        platform=platform,
    )
    if report.recommended_gib > MAX_ANSWER_GIB:  # int32-sized inputs can still multiply past any host
        raise UsageError(
            f"the buffer comes to {float(report.recommended_gib):.3g} GiB, more than any host holds"
            f" (over {MAX_ANSWER_GIB:,} GiB): check --max-model-len, --concurrency and the config's sizes"
        )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.to_text())
    return 0
