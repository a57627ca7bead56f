"""`kvops top --once --json --group-by` on a replayed fleet equals the output recorded before
grouping moved onto typed frames (tests/fixtures/top-groups/README.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kvops.cli import main
from support.paths import FIXTURES

GROUPS = FIXTURES / "top-groups"
CASES: dict[str, list[str]] = json.loads((GROUPS / "cases.json").read_text())


def _holds(got: Any, recorded: Any, path: str = "") -> None:
    """Every value recorded is there, unchanged; a field added to the document since is not a
    change of behaviour (engines gain figures) and is let through."""
    if isinstance(recorded, dict):
        assert isinstance(got, dict), path
        for key, value in recorded.items():
            assert key in got, f"{path}/{key} is gone"
            _holds(got[key], value, f"{path}/{key}")
    elif isinstance(recorded, list):
        assert isinstance(got, list) and len(got) == len(recorded), path
        for i, (a, b) in enumerate(zip(got, recorded, strict=True)):
            _holds(a, b, f"{path}[{i}]")
    else:
        assert got == recorded, f"{path}: {got!r}, recorded {recorded!r}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_grouped_once_json_is_what_it_was(capsys, name):
    assert main(["top", "--once", "--json", "--replay", str(GROUPS / "fleet-t1.prom"),
                 str(GROUPS / "fleet-t2.prom"), *CASES[name]]) == 0  # fmt: skip
    got = json.loads(capsys.readouterr().out)
    recorded = json.loads((GROUPS / "expected" / f"{name}.json").read_text())
    assert got["groups"] == recorded["groups"]  # the groups exactly: every key, every value
    _holds(got, recorded)  # the rest: every recorded value (the engine rows may gain fields)
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


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_text_frame_groups_what_the_json_groups(capsys, name):
    """The text frame's group lines name the groups and engine counts of `--json`'s, with the
    same --filter (the text frame grouped every engine whatever the filter)."""
    files = [str(GROUPS / "fleet-t1.prom"), str(GROUPS / "fleet-t2.prom")]
    expected = json.loads((GROUPS / "expected" / f"{name}.json").read_text())["groups"]
    assert main(["top", "--once", "--replay", *files, *CASES[name]]) == 0
    text = capsys.readouterr().out.split("\n\n", 1)[1]
    lines = text.splitlines()[1:]  # under the header: the groups, then "Interval: ..." (no GPU, host)
    end = next(i for i, line in enumerate(lines) if line.startswith("Interval"))
    groups = [line.split() for line in lines[:end]]
    shown = [(words[0], int(words[1]), int(words[2])) for words in groups]
    assert shown == [(g["group"] or "-", g["engines"], g["engines_down"]) for g in expected]
