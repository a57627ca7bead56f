"""`kvops top --once --json --group-by` on a replayed fleet equals the output recorded before
grouping moved onto typed frames (tests/fixtures/top-groups/README.md)."""

from __future__ import annotations

import json

import pytest

from kvops.cli import main
from support.paths import FIXTURES

GROUPS = FIXTURES / "top-groups"
CASES: dict[str, list[str]] = json.loads((GROUPS / "cases.json").read_text())


@pytest.mark.parametrize("name", sorted(CASES))
def test_grouped_once_json_is_what_it_was(capsys, name):
    assert main(["top", "--once", "--json", "--replay", str(GROUPS / "fleet-t1.prom"),
                 str(GROUPS / "fleet-t2.prom"), *CASES[name]]) == 0  # fmt: skip
    got = json.loads(capsys.readouterr().out)
    assert got == json.loads((GROUPS / "expected" / f"{name}.json").read_text())
    assert got["groups"] and got["schema_version"] >= 3
