"""docs/sim.md against the code it describes: the flags of its synopsis and the keyword options of
`server.start()` are read from the parser and SimConfig, never typed twice."""

from __future__ import annotations

import argparse
import dataclasses
import re

from kvops.cli import build_parser
from kvops.sim.engine import SimConfig
from support.paths import ROOT

PAGE = (ROOT / "docs" / "sim.md").read_text()


def sim_options() -> set[str]:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sim = commands.choices["sim"]
    return {flag for action in sim._actions for flag in action.option_strings if flag.startswith("--")}


def test_every_flag_the_page_shows_is_kvops_sims_and_every_flag_is_on_the_page() -> None:
    synopsis = PAGE.split("```\n", 1)[1].split("```", 1)[0]
    shown = set(re.findall(r"--[a-z][a-z-]*", synopsis))
    options = sim_options() - {"--help"}
    assert shown <= options, shown - options
    on_page = set(re.findall(r"--[a-z][a-z-]*", PAGE))
    assert sorted(options - on_page) == []


def test_start_s_keyword_options_are_simconfigs_fields() -> None:
    said = re.search(r"Extra keyword options are `SimConfig` fields\s*\(([^)]*)\)", PAGE)
    assert said, "docs/sim.md names start()'s SimConfig options"
    listed = re.findall(r"`(\w+)`", said.group(1))
    assert listed == [f.name for f in dataclasses.fields(SimConfig)]
