"""`kvops sim`: serve a simulated vLLM's /metrics (or, with --what-if, size a CPU buffer)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from kvops.errors import UsageError
from kvops.sim import limits
from kvops.sim.offload_paths import PATHS
from kvops.termsafe import visible

DEFAULT_LISTEN = "127.0.0.1:8000"


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT, [IPv6]:PORT or :PORT (all interfaces) -> (host, port)."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not (port_text.isascii() and port_text.isdigit()) or int(port_text) > 65535:
        raise UsageError(f"--listen {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8000")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise UsageError(f"--listen {text!r}: write an IPv6 address in brackets, e.g. [::1]:8000")
    return host or "0.0.0.0", int(port_text)


def _size(text: str) -> float | None:
    if text.lower() in ("none", "off"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{visible(text)!r} is not a size in GiB (or 'none')") from None
    if not (math.isfinite(value) and 0 <= value <= limits.MAX_OFFLOAD_GIB):
        raise argparse.ArgumentTypeError(
            f"{value:g}: expected a size in GiB from 0 to {limits.MAX_OFFLOAD_GIB:.15g} (1 PiB), or 'none'"
        )
    return value


def _scale(high: float, what: str) -> Callable[[str], float]:
    """A finite number in (0, high]: `--rate inf` queued sessions without end, NaN passed `<= 0`."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{visible(text)!r} is not a number") from None
        if not (math.isfinite(value) and 0 < value <= high):
            raise argparse.ArgumentTypeError(f"{value:g}: expected {what} above 0 and at most {high:.15g}")
        return value

    return parse


EXAMPLES = """\
examples:
  kvops sim --listen 127.0.0.1:8000 --workload chat
  kvops sim --vllm-version 0.11.2 --data-parallel-size 2
  kvops sim --what-if --model ./config.json --workload rag --sizes 0,16,64,128
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"address to serve /metrics on (default {DEFAULT_LISTEN})",
    )
    parser.add_argument(
        "--vllm-version",
        default="0.33.0",
        metavar="X.Y.Z",
        help="vLLM release whose /metrics format to write, 0.10.0-0.33.x (default 0.33.0)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, metavar="N", help="random seed: same seed, same run (default 0)"
    )
    parser.add_argument(
        "--workload",
        default="rag",
        choices=["chat", "rag", "bursty", "agent"],
        help="workload preset (default rag, as kvops demo)",
    )
    parser.add_argument(
        "--rate",
        type=_scale(limits.MAX_RATE, "a multiplier"),
        default=1.0,
        metavar="X",
        help=f"multiply the preset's arrival rate, up to {limits.MAX_RATE:g} (default 1)",
    )
    parser.add_argument(
        "--length",
        type=_scale(limits.MAX_LENGTH, "a multiplier"),
        default=1.0,
        metavar="X",
        help=f"multiply the preset's token lengths, up to {limits.MAX_LENGTH:g} (default 1)",
    )
    parser.add_argument(
        "--kv-offloading-size",
        type=_size,
        default=64.0,
        metavar="GiB",
        help="CPU offload tier in GiB, as vLLM's flag; 'none' = no offloading (default 64)",
    )
    _offload_path_flag(parser)
    parser.add_argument(
        "--gpu-blocks", type=int, default=None, metavar="N", help="GPU KV blocks (default 8192)"
    )
    parser.add_argument(
        "--model", default=None, metavar="DIR|config.json", help="size KV blocks from a model config"
    )
    parser.add_argument(
        "--served-model-name", default=None, metavar="NAME", help="model_name label (default: the model's)"
    )
    parser.add_argument(
        "--data-parallel-size",
        type=int,
        default=1,
        metavar="N",
        help="engines, labelled engine=0..N-1 (default 1)",
    )
    parser.add_argument(
        "--honour-name-filter",
        action="store_true",
        help="answer /metrics?name[]=... with only the samples named; real vLLM ignores the filter and "
        "serves the whole page, as the simulator does by default (docs/dev/real-vllm-harness.md)",
    )
    _what_if_flags(parser)


def _what_if_flags(parser: argparse.ArgumentParser) -> None:
    what_if = parser.add_argument_group("what-if sizing (no server)")
    what_if.add_argument(
        "--what-if",
        action="store_true",
        help="replay the workload per CPU buffer size and compare (no server)",
    )
    what_if.add_argument(
        "--sizes",
        default="0,16,64,128",
        metavar="GiB,...",
        help="CPU buffer sizes for --what-if (default 0,16,64,128)",
    )
    what_if.add_argument(
        "--duration",
        type=_scale(limits.MAX_DURATION_S, "simulated seconds"),
        default=120.0,
        metavar="S",
        help=f"simulated seconds per size, up to {limits.MAX_DURATION_S:g} (default 120)",
    )
    what_if.add_argument("--json", action="store_true", help="print only JSON to stdout")


def _offload_path_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--offload-path",
        choices=PATHS,
        default="native",
        help="which vLLM connector runs the CPU tier: native (OffloadingConnector, default), simple "
        "(SimpleCPUOffloadConnector, VLLM_USE_SIMPLE_KV_OFFLOAD), tiering (TieringOffloadingSpec: the "
        "CPU primary plus a file-system tier); docs/sim.md",
    )


def model_options(args: argparse.Namespace) -> dict[str, object]:
    """SimConfig options from the shared flags (used by serving and by --what-if)."""
    opts: dict[str, object] = {
        "workload": args.workload,
        "rate": args.rate,
        "length": args.length,
        "kv_offloading_size_gib": args.kv_offloading_size,
        "offload_path": args.offload_path,
    }
    if args.gpu_blocks is not None:
        opts["num_gpu_blocks"] = args.gpu_blocks
    if args.model:
        from kvops.sim.model_options import model_options as from_config

        opts.update(from_config(args.model))
    if args.served_model_name:
        opts["model_name"] = args.served_model_name
    return opts


def run(args: argparse.Namespace) -> int:
    if args.what_if:
        return run_what_if(args)
    if args.json:
        raise UsageError("--json goes with --what-if")
    import signal
    import sys
    import threading

    from kvops.sim import server

    host, port = parse_listen(args.listen)
    sim = server.start(
        host,
        port,
        args.vllm_version,
        args.seed,
        data_parallel_size=args.data_parallel_size,
        honour_name_filter=args.honour_name_filter,
        **model_options(args),
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    print(f"kvops sim: simulated vLLM {sim.sim.version.text} serving {sim.metrics_url}", file=sys.stderr)
    try:
        while not stop.wait(1.0):
            pass
    finally:
        sim.stop()
    return 0


def run_what_if(args: argparse.Namespace) -> int:
    import json
    import sys

    from kvops.sim import whatif

    sizes = whatif.parse_sizes(args.sizes)
    options = model_options(args)
    options.pop("kv_offloading_size_gib")
    results = whatif.run(sizes, args.duration, args.seed, **options)
    if args.json:
        meta = {
            "workload": args.workload,
            "model": args.model,
            "seed": args.seed,
            "duration_s": args.duration,
            "simulated": True,
            **{k: v for k, v in options.items() if k not in ("workload",)},
        }
        sys.stdout.write(json.dumps(whatif.to_json(results, meta), indent=1) + "\n")
        return 0
    print(
        f"kvops sim --what-if: workload {args.workload}, seed {args.seed}, "
        f"{args.duration:g} simulated seconds per size (simulated, not measured)"
    )
    print(whatif.format_table(results))
    print()
    print(whatif.format_plot(results))
    return 0
