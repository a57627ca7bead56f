"""Which kvops a benchmark runs: whether a checkout's C line finder and joiner are built.

kvops.exposition._linescan and kvops.exporter._lines are optional (setup.py); a checkout
installed without a compiler, or an older tree given to --before, does that work in Python
instead, and the figures differ by that. The benchmarks print it beside their numbers.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_ASK = (
    "from kvops.exposition import parser; print(getattr(parser, 'Finder', None) is not None)\n"
    "try:\n from kvops.exporter.line_text import _c_join; print(_c_join is not None)\n"
    "except ImportError:\n print(False)"
)


def c_parts(tree: Path | str) -> str:
    """Which of the C line finder and joiner the kvops that `python -m kvops.cli` runs from
    `tree` has (with the tree first on sys.path, as the benchmarks start it)."""
    tree = str(Path(tree).resolve())
    proc = subprocess.run(
        [sys.executable, "-c", _ASK],
        capture_output=True, text=True, timeout=60, cwd=tree, env={"PYTHONPATH": tree},
    )  # fmt: skip
    finder, joiner = ([*proc.stdout.split(), "False", "False"])[:2]
    return ", ".join(
        [
            "C line finder built" if finder == "True" else "no C line finder",
            "C line joiner built" if joiner == "True" else "no C line joiner",
        ]
    )
