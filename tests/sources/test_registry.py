"""The engine registry is the one list of engines: every engine module is in it, each one's
fixtures exist and read as that engine, and no two engines read the same name."""

from __future__ import annotations

import importlib
import itertools
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import kvops.engines
from kvops.collectors import registry as collectors
from kvops.engines.registry import ENGINES, normalise
from kvops.exposition.parser import parse

FIXTURES = Path(__file__).parent.parent / "fixtures"


def test_every_engine_module_is_registered() -> None:
    declared = set()
    for info in pkgutil.iter_modules(kvops.engines.__path__):
        engine = getattr(importlib.import_module(f"kvops.engines.{info.name}"), "ENGINE", None)
        if engine is not None:
            declared.add(engine)
    assert declared == set(ENGINES)


def test_no_name_is_read_by_two_engines() -> None:
    for a, b in itertools.combinations(ENGINES, 2):
        assert not a.families & b.families, (a.title, b.title)


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.title)
def test_fixture_pages_read_as_their_engine(engine) -> None:
    folder = FIXTURES / engine.fixtures
    assert (folder / "README.md").is_file()
    pages = sorted(folder.rglob("*.prom"))
    assert pages
    for page in pages:
        result = parse(page.read_text(), engine.families)
        sample = normalise(result, "http://10.0.0.9:8000")
        kinds = {e.engine_kind for e in sample.engines} | {s.engine_kind for s in sample.lmcache}
        assert sample.up and engine.kind in kinds, page
        found = engine.page_format(result)
        assert found is None or sample.vllm_format == found


def test_no_collector_choices_are_the_registry() -> None:
    assert collectors.NAMES == ("host", "nvidia", "amd")
    made = collectors.default_collectors(disabled=["nvidia"])
    assert [c.name for c in made] == ["host", "amd"]
    for collector in made:
        collector.close()
    run = subprocess.run(
        [sys.executable, "-m", "kvops.cli", "exporter", "--no-collector", "gpu"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "choose from 'host', 'nvidia', 'amd'" in run.stderr
