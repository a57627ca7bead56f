"""docs/container.md's `podman run` lines, read as the image runs them: its ENTRYPOINT, then the
arguments after the image name in place of its CMD (the OCI rule), through kvops's own parser."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from kvops.cli import build_parser
from support.paths import ROOT

IMAGE = "kvops:0.1.0"


def image_config() -> tuple[list[str], list[str]]:
    text = (ROOT / "Containerfile").read_text()
    entrypoint = re.search(r"^ENTRYPOINT (\[.*\])$", text, re.M)
    cmd = re.search(r"^CMD (\[.*\])$", text, re.M)
    assert entrypoint and cmd, "the Containerfile has an ENTRYPOINT and a CMD in exec form"
    return json.loads(entrypoint.group(1)), json.loads(cmd.group(1))


def run_lines() -> list[str]:
    page = (ROOT / "docs" / "container.md").read_text()
    return re.findall(rf"(?:podman|docker) run [^`\n]*?{re.escape(IMAGE)}(?=[ `\n])[^`\n]*", page)


def test_the_page_shows_the_image_run_as_the_exporter_and_as_another_command() -> None:
    lines = run_lines()
    assert len(lines) >= 2, lines


@pytest.mark.parametrize("line", run_lines())
def test_each_run_line_is_a_kvops_command_the_image_accepts(line: str) -> None:
    entrypoint, cmd = image_config()
    assert entrypoint == ["kvops"], entrypoint
    after_image = shlex.split(line.split(IMAGE, 1)[1], comments=True)
    argv = after_image or cmd  # arguments after the image replace CMD, never add to it
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{line!r} runs `kvops {shlex.join(argv)}`, which kvops refuses (exit {exc.code})")
