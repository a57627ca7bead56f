"""docs/exporter.md's metric table (moved there from the README) lists every engine and LMCache
family kvops exports (names.py is the source; a family added there without a row fails here)."""

from __future__ import annotations

import fnmatch
import itertools
import re
from pathlib import Path

from kvops import names

README = Path(__file__).resolve().parents[1] / "docs" / "exporter.md"


def expand(pattern: str) -> list[str]:
    """`a_{x,y}_b` -> a_x_b, a_y_b (several groups multiply)."""
    parts = re.split(r"\{([^}]*)\}", pattern)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def table_patterns() -> list[str]:
    rows = [line for line in README.read_text().splitlines() if line.startswith("| `kvops_")]
    first_cells = [row.split("|")[1] for row in rows]
    return [p for cell in first_cells for raw in re.findall(r"`([^`]+)`", cell) for p in expand(raw)]


def test_every_engine_family_has_a_row():
    patterns = table_patterns()
    missing = [
        spec.name
        for spec in [*names.bound("engine"), *names.bound("lmcache")]
        if not any(fnmatch.fnmatchcase(spec.name, p) for p in patterns)
    ]
    assert missing == []


def test_expand_multiplies_groups():
    assert expand("a_{x,y}_{1,2}") == ["a_x_1", "a_x_2", "a_y_1", "a_y_2"]
