"""Every `--help`: examples in the epilog, help text on every option, one version placeholder."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from kvops.cli import COMMANDS, build_parser


def _commands() -> dict[str, argparse.ArgumentParser]:
    """`kvops`, each command and each nested command (kvops bench dma), by their prog."""
    found: dict[str, argparse.ArgumentParser] = {}
    todo = [build_parser()]
    while todo:
        parser = todo.pop()
        found[parser.prog] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    return found


PARSERS = _commands()


def test_every_command_is_reached() -> None:
    assert {f"kvops {name}" for name in COMMANDS} <= set(PARSERS)


@pytest.mark.parametrize("prog", sorted(p for p in PARSERS if p != "kvops bench"))
def test_help_has_examples_of_this_command(prog: str) -> None:
    epilog = PARSERS[prog].epilog or ""
    assert epilog.startswith("examples:"), prog
    assert f"  {prog}" in epilog, f"{prog}: no example runs the command itself"


@pytest.mark.parametrize("prog", sorted(PARSERS))
def test_every_option_has_help(prog: str) -> None:
    for action in PARSERS[prog]._actions:
        if isinstance(action, argparse._HelpAction | argparse._VersionAction):
            continue
        assert action.help and action.help.strip(), f"{prog} {action.option_strings or action.dest}"


@pytest.mark.parametrize("prog", sorted(PARSERS))
def test_one_placeholder_for_a_vllm_version(prog: str) -> None:
    for action in PARSERS[prog]._actions:
        if "--vllm-version" in action.option_strings:
            assert action.metavar == "X.Y.Z", prog


def test_help_prints_the_examples_verbatim() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kvops.cli", "doctor", "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0
    assert "examples:\n  kvops doctor --log vllm.log\n" in out.stdout
