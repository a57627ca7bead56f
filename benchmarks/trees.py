"""Which kvops a benchmark runs: which of a checkout's optional C parts are built.

kvops.exposition._linescan (the line finder), kvops.exposition._buckets (the histograms'
grouping) and kvops.exporter._lines (the line joiner) are optional (setup.py); a checkout
installed without a compiler, or an older tree given to --before, does that work in Python
instead, and the figures differ by that. The benchmarks print it beside their numbers.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_PARTS = {
    "line finder": "kvops.exposition._linescan",
    "bucket grouping": "kvops.exposition._buckets",
    "line joiner": "kvops.exporter._lines",
}
_ASK = "import importlib.util as u\nfor m in {!r}: print(u.find_spec(m) is not None)"


def c_parts(tree: Path | str) -> str:
    """Which C parts the kvops that `python -m kvops.cli` runs from `tree` has (with the tree
    first on sys.path, as the benchmarks start it)."""
    tree = str(Path(tree).resolve())
    proc = subprocess.run(
        [sys.executable, "-c", _ASK.format(list(_PARTS.values()))],
        capture_output=True, text=True, timeout=60, cwd=tree, env={"PYTHONPATH": tree},
    )  # fmt: skip
    found = [*proc.stdout.split(), *["False"] * len(_PARTS)]
    built = [name for name, yes in zip(_PARTS, found, strict=False) if yes == "True"]
    missing = [name for name in _PARTS if name not in built]
    if not built:
        return "no C parts built"
    return "C " + ", ".join(built) + " built" + (f" (not: {', '.join(missing)})" if missing else "")
