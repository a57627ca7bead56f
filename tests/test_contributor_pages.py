"""The contributors' pages name what the code defines: read from the code, never typed twice."""

from __future__ import annotations

import dataclasses
import re

import tomllib

from kvops.engines.common import Engine
from support.paths import ROOT


def test_adding_an_engine_names_every_field_of_engine() -> None:
    page = (ROOT / "docs" / "adding-an-engine.md").read_text()
    fields = [f.name for f in dataclasses.fields(Engine)]
    assert "ENGINE = Engine(...)" in page and fields
    assert [name for name in fields if f"`{name}" not in page] == []


def test_the_fast_loop_is_addopts_selection_without_the_slow_tests() -> None:
    """docs/contributing.md's `-m` replaces addopts' one, so it must repeat it whole, plus `not slow`."""
    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    default = re.search(r"-m '([^']+)'", addopts)
    page = (ROOT / "docs" / "contributing.md").read_text()
    fast = re.search(r'```sh\npython -m pytest -q -p no:cacheprovider -m "([^"]+)"\n```', page)
    assert default and fast, (addopts, "the page's fast-loop command")
    assert fast.group(1) == f"not slow and {default.group(1)}"
    for marker in re.findall(r"not (\w+)", default.group(1)):  # each left-out marker is explained
        assert f"`{marker}`" in page, marker
