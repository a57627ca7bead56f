"""`kvops` command line: one sub-command per module, each with configure(parser) and run(args).

Command modules import only the standard library at module level, so `kvops --help` and a
bad flag answer fast; each imports what it needs inside run().
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from kvops import __version__
from kvops.errors import UsageError
from kvops.termsafe import visible

# name -> (module, one-line help). The module defines configure(parser) and run(args) -> int.
COMMANDS: dict[str, tuple[str, str]] = {
    "exporter": ("kvops.exporter.command", "serve normalised kvops_* metrics for Prometheus"),
    "top": ("kvops.top.command", "live terminal dashboard of hit rates and transfer bandwidth"),
    "doctor": ("kvops.doctor.command", "recognise known failures in a model, command line, log"),
    "size": ("kvops.doctor.size_command", "KV bytes per token and a --kv-offloading-size for this host"),
    "sim": ("kvops.sim.command", "serve a simulated vLLM /metrics (no GPU needed)"),
    "demo": ("kvops.demo", "run the simulator and the dashboard on it"),
    "bench": ("kvops.bench.command", "measure host<->GPU copy bandwidth"),
    "completion": ("kvops.completion", "print the bash or zsh completion script"),
}

EXAMPLES = """\
examples:
  kvops demo                                   # a simulated vLLM and the dashboard on it
  kvops exporter --target http://10.0.0.5:8000
  kvops doctor --log vllm.log
  kvops COMMAND --help                         # each command's flags and examples
"""


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse prints the whole usage on a bad flag; print one line and exit 2 instead."""

    def error(self, message: str) -> None:  # type: ignore[override]
        # argparse quotes the bad value back ("invalid choice: '...'"): a flag can hold escapes.
        self.exit(2, f"{self.prog}: error: {visible(message)} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(
        prog="kvops",
        description="Operations toolkit for vLLM KV-cache offloading.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"kvops {__version__}")
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=OneLineArgumentParser, help="one of:"
    )
    for name, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(module_name)
        cmd = sub.add_parser(
            name,
            help=help_text,
            description=help_text,
            epilog=getattr(module, "EXAMPLES", None),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.configure(cmd)
        cmd.set_defaults(_module=module, _parser=cmd)
    return parser


def _stdout_gone() -> int:
    """The reader of our output went away (`kvops ... | head`): end quietly, as `yes | head` does.

    Later writes, including the interpreter's flush at exit, go to /dev/null instead of raising
    BrokenPipeError again; the exit code is the shell's usual one for SIGPIPE.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + 13  # SIGPIPE


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)  # --help and --version print here
        if args.command is None:
            parser.print_help(sys.stderr)
            return 2
        user_defaults = getattr(args._module, "user_defaults", None)
        found = user_defaults() if user_defaults else {}
        if found:  # $XDG_CONFIG_HOME/kvops/: parsed again over them, so a flag given wins
            args._parser.set_defaults(**found)
            args = parser.parse_args(argv)
        code = int(args._module.run(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except BrokenPipeError:
        return _stdout_gone()
    except UsageError as exc:
        # The message quotes the user's flags and files, which can hold terminal escapes.
        print(f"kvops {args.command}: error: {visible(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
