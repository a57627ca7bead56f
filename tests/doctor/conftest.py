"""Doctor test helpers: model configs and constructed logs beside these tests, a CLI runner."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kvops.cli import main

HERE = Path(__file__).parent
MODELS = HERE / "models"
LOGS = HERE / "logs"


@pytest.fixture(scope="session")
def failures(research_dir: Path) -> list[dict]:
    return json.loads((research_dir / "failures.json").read_text())


@pytest.fixture
def kvops(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run the real CLI in-process: (exit code, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse errors
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return run
