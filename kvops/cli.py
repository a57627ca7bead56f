"""`kvops` command line: one sub-command per module, each with configure(parser) and run(args).

Command modules import only the standard library at module level, so `kvops --help` and a
bad flag answer fast; each imports what it needs inside run().
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from kvops import __version__
from kvops.errors import UsageError

# name -> (module, one-line help). The module defines configure(parser) and run(args) -> int.
COMMANDS: dict[str, tuple[str, str]] = {
    "exporter": ("kvops.exporter.command", "serve normalised kvops_* metrics for Prometheus"),
    "top": ("kvops.top.command", "live terminal dashboard of hit rates and transfer bandwidth"),
    "doctor": ("kvops.doctor.command", "recognise known failures in a model, command line, log"),
    "size": ("kvops.doctor.size_command", "KV bytes per token and a --kv-offloading-size for this host"),
    "sim": ("kvops.sim.command", "serve a simulated vLLM /metrics (no GPU needed)"),
    "demo": ("kvops.demo", "run the simulator and the dashboard on it"),
    "bench": ("kvops.bench.command", "measure host<->GPU copy bandwidth"),
}


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse prints the whole usage on a bad flag; print one line and exit 2 instead."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(
        prog="kvops", description="Operations toolkit for vLLM KV-cache offloading."
    )
    parser.add_argument("--version", action="version", version=f"kvops {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineArgumentParser)
    for name, (module_name, help_text) in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            # Not built yet in this checkout: the command says so rather than vanishing.
            cmd.set_defaults(_module=None, _missing=module_name)
            continue
        module.configure(cmd)
        cmd.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    if args._module is None:
        print(f"kvops {args.command}: not available in this build ({args._missing})", file=sys.stderr)
        return 2
    try:
        return int(args._module.run(args) or 0)
    except UsageError as exc:
        print(f"kvops {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
