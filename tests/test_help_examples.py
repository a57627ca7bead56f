"""Every example of every `--help` is a command kvops accepts as written (flags, choices, values)."""

from __future__ import annotations

import shlex

import pytest
from test_help import PARSERS

from kvops.cli import build_parser


def examples() -> list[tuple[str, str]]:
    """(prog, command) for each `kvops ...` of each epilog: continuations joined, `#` comments,
    shell redirections and the other commands of an `&&` chain cut."""
    found = []
    for prog, parser in sorted(PARSERS.items()):
        text = (parser.epilog or "").replace("\\\n", " ")
        for line in text.splitlines()[1:]:
            for command in line.split("&&"):
                words = shlex.split(command, comments=True)
                if ">" in words:
                    words = words[: words.index(">")]
                if words[:1] == ["kvops"] and "COMMAND" not in words:  # `kvops COMMAND --help`
                    found.append((prog, shlex.join(words)))
    return found


def test_every_command_has_examples_that_are_read_here() -> None:
    progs = {prog for prog, _ in examples()}
    assert {p for p in PARSERS if p != "kvops bench"} <= progs | {"kvops"}, progs


@pytest.mark.parametrize(("prog", "command"), examples())
def test_each_example_parses(prog: str, command: str) -> None:
    try:
        build_parser().parse_args(shlex.split(command)[1:])
    except SystemExit as exc:
        pytest.fail(f"{prog} --help shows `{command}`, which kvops refuses (exit {exc.code})")
