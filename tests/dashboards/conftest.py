"""Fixtures for the dashboard tests: the generator (dashboards/generate.py, a script outside
the kvops package) and the dashboards it builds."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def generator() -> ModuleType:
    name = "kvops_dashboard_generator"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "dashboards" / "generate.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while executing it
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="session")
def dashboards(generator: ModuleType) -> dict[str, dict[str, Any]]:
    """file name -> dashboard model, as committed (the --check test pins them equal to build())."""
    import json

    return {name: json.loads((ROOT / "dashboards" / name).read_text()) for name in generator.build()}
