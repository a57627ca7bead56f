""".ci/run: the README's test command, one step a line, and any failing step fails CI.

The steps are run with stand-ins for apt-get, pip, python and ruff first on PATH (the edge of the
machine: they record their call and exit as told), so these tests install nothing and run no
nested test suite; git is the real one, and so is the clone into a directory with nothing beside it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CI = ROOT / ".ci" / "run"
REAL_BASH = shutil.which("bash") or "/bin/bash"  # before PATH has the stand-ins: .ci/run's `bash` is one


def readme_first_block() -> list[str]:
    """The README's opening sh block: a venv line, the demo, the test command (comments cut)."""
    block = re.search(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block, "the README opens with a sh block"
    lines = [ln.split("   #")[0].strip() for ln in block.group(1).splitlines() if ln.strip()]
    assert len(lines) == 3, lines
    return lines


def readme_test_command() -> list[str]:
    """The third line's steps, with `sudo sh -c '...'` (root for the whole apt part) opened up:
    CI runs as root, so it runs those steps as they are."""
    line = readme_first_block()[2]
    rooted = re.fullmatch(r"sudo sh -c '([^']*)' && (.*)", line)
    assert rooted, f"the apt part runs as root as a whole: {line}"
    as_root = [step.strip() for step in rooted.group(1).split("&&")]
    rest = [step.strip() for step in rooted.group(2).split("&&")]
    assert all(s.startswith("apt-get ") for s in as_root) and not any("apt-get" in s for s in rest)
    return as_root + rest


def test_the_readme_opens_with_a_venv_then_the_demo_then_the_tests() -> None:
    venv, demo, _ = readme_first_block()
    assert re.fullmatch(r"python3 -m venv (\S+) && \. \1/bin/activate", venv), venv
    assert demo == "pip install . && kvops demo"


def ci_steps() -> list[str]:
    text = CI.read_text()
    body = text.split("# The README's test command, one step a line:\n", 1)[1]
    return body.split("\n\n", 1)[0].strip().splitlines()


def test_ci_runs_the_readme_test_command_step_by_step() -> None:
    assert ci_steps() == readme_test_command()
    assert "set -euo pipefail" in CI.read_text()
    assert "&&" not in "\n".join(ci_steps())


def _run_ci(tmp_path: Path, fail: dict[str, int]) -> tuple[int, list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.log"
    for tool in ("apt-get", "pip", "python", "ruff", "lint-imports", "bash"):
        stand_in = bin_dir / tool
        stand_in.write_text(f'#!/bin/sh\necho "{tool} $*" >> "{calls}"\nexit {fail.get(tool, 0)}\n')
        stand_in.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "TMPDIR": str(tmp_path)}
    proc = subprocess.run([REAL_BASH, str(CI)], env=env, capture_output=True, text=True, timeout=120)
    return proc.returncode, calls.read_text().splitlines() if calls.exists() else []


@pytest.mark.parametrize(
    ("failing", "code", "not_reached"),
    [("apt-get", 100, "pip"), ("pip", 1, "python"), ("python", 1, "ruff")],
)
def test_a_failing_step_fails_ci(tmp_path: Path, failing: str, code: int, not_reached: str) -> None:
    rc, calls = _run_ci(tmp_path, {failing: code})
    assert rc == code
    assert any(c.startswith(failing) for c in calls)
    assert not any(c.startswith(not_reached) for c in calls), calls


def test_all_steps_run_in_order_on_a_clone_with_nothing_beside_it(tmp_path: Path) -> None:
    rc, calls = _run_ci(tmp_path, {})
    assert rc == 0
    assert [c.split()[0] for c in calls] == [
        "apt-get", "apt-get", "pip", "python", "python", "python", "python",
        "apt-get", "python", "python",
        "ruff", "ruff", "python", "lint-imports", "bash",
    ]  # fmt: skip
    assert calls[12] == "python -m mypy"  # issue 27: types and layers
    assert calls[-1] == "bash .ci/container"  # the image built and kvops run in it (docs/container.md)
    assert calls[3] == "python -m pytest"
    assert calls[4].startswith("python -m pytest -m vllm_release")  # doctor --repro on real vLLM code
    assert calls[5] == "python tests/support/real_vllm/install.py"  # its own step, own time limit
    assert calls[6].startswith("python -m pytest -m real_vllm")  # a real vLLM server
    # a real Mooncake store (issue 42): its library, its venv and its tests, each a step of its own
    assert calls[7] == "apt-get install -y libibverbs1"
    assert calls[8] == "python tests/support/real_mooncake/install.py"
    assert calls[9].startswith("python -m pytest -m real_mooncake")
    # the clone went to a fresh temporary directory, which is gone afterwards
    assert not any(p.name.startswith("tmp") for p in tmp_path.iterdir() if p.is_dir() and p.name != "bin")


def steps_after_the_test_command() -> list[str]:
    """.ci/run's command lines after the README's test command (comments and blank lines cut)."""
    body = CI.read_text().split("# The README's test command, one step a line:\n", 1)[1]
    rest = body.split("\n\n", 1)[1]
    return [ln.strip() for ln in rest.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def step_name(line: str) -> str:
    """What a reader of docs/ci.md knows a step by: a pytest marker, a module, a script, a tool."""
    words = line.split()
    if words[0] == "timeout":  # `timeout SECONDS command ...`
        words = words[2:]
    if words[:3] == ["python", "-m", "pytest"]:
        return words[words.index("-m", 3) + 1]
    if words[:2] == ["python", "-m"]:
        return words[2]
    if words[0] in ("python", "bash"):
        return words[1]
    return " ".join(words[:2]) if words[0] == "ruff" else words[0]


def test_docs_ci_names_every_step_after_the_test_command() -> None:
    page = (ROOT / "docs" / "ci.md").read_text()
    steps = [step_name(line) for line in steps_after_the_test_command()]
    assert {"vllm_release", "real_vllm", "mypy", "lint-imports", ".ci/container"} <= set(steps), steps
    assert [s for s in steps if s not in page] == []
