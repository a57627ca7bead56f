"""`kvops completion bash|zsh`: the shell completion script, generated from kvops's own parser.

shtab reads the argparse parser, so every command, flag and choice completes as `--help` lists
it, and a new flag needs no second list to keep in step.
"""

from __future__ import annotations

import argparse

SHELLS = ("bash", "zsh")

EXAMPLES = """\
examples:
  mkdir -p ~/.local/share/bash-completion/completions
  kvops completion bash > ~/.local/share/bash-completion/completions/kvops
  mkdir -p ~/.zfunc && kvops completion zsh > ~/.zfunc/_kvops   # fpath+=(~/.zfunc) before compinit
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=SHELLS, help="the shell to print the completion script for")


def run(args: argparse.Namespace) -> int:
    import shtab

    from kvops.cli import build_parser

    print(shtab.complete(build_parser(), shell=args.shell))
    return 0
