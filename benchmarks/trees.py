"""Which kvops a benchmark runs: whether a checkout's C line finder is built.

kvops.exposition._linescan is optional (setup.py); a checkout installed without a compiler,
or an older tree given to --before, parses with the regular expression instead, and the
figures differ by that. The benchmarks print it beside their numbers.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_ASK = "from kvops.exposition import parser; print(getattr(parser, 'Finder', None) is not None)"


def finder_built(tree: Path | str) -> str:
    """ "C line finder built" or "no C line finder" for the kvops that `python -m kvops.cli`
    runs from `tree` (with the tree first on sys.path, as the benchmarks start it)."""
    tree = str(Path(tree).resolve())
    proc = subprocess.run(
        [sys.executable, "-c", _ASK],
        capture_output=True, text=True, timeout=60, cwd=tree, env={"PYTHONPATH": tree},
    )  # fmt: skip
    return "C line finder built" if proc.stdout.strip() == "True" else "no C line finder"
