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


def test_groups_are_read_by_attribute_so_a_misspelt_figure_raises():
    from kvops.frames.replay import ReplaySource
    from kvops.top import fleet
    from kvops.top.board import Board

    source = ReplaySource([str(GROUPS / "fleet-t1.prom"), str(GROUPS / "fleet-t2.prom")], 1.0)
    board = Board()
    board.update(source.next())
    board.update(source.next())
    assert board.interval is not None
    groups = {g.group: g for g in fleet.group(board.interval.targets, "kind", 1.0)}
    assert (groups["vllm"].engines, groups["vllm"].engines_down) == (3, 1)
    assert groups["vllm"].sort_value("local_hit_rate") == groups["vllm"].local_hit_rate
    with pytest.raises(AttributeError):
        groups["vllm"].sort_value("local_hit_rat")  # was None: an unknown "–" on the screen
    with pytest.raises(AttributeError):
        fleet.group(board.interval.targets[:1], "kind", 1.0)[0].local_hit_rat  # noqa: B018
