"""The contributors' pages name what the code defines: read from the code, never typed twice."""

from __future__ import annotations

import dataclasses

from kvops.engines.common import Engine
from support.paths import ROOT


def test_adding_an_engine_names_every_field_of_engine() -> None:
    page = (ROOT / "docs" / "adding-an-engine.md").read_text()
    fields = [f.name for f in dataclasses.fields(Engine)]
    assert "ENGINE = Engine(...)" in page and fields
    assert [name for name in fields if f"`{name}" not in page] == []
