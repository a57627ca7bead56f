"""Fixtures for the alert and runbook tests: rule files, promtool, the dashboard generator's
PromQL name reader (one reader for dashboards and rules)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "alerts"


def load_script(path: Path, module_name: str) -> ModuleType:
    """Import a repo script that is not part of the kvops package (dashboards/, alerts/)."""
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses look their module up while executing it
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def generator() -> ModuleType:
    return load_script(ROOT / "dashboards" / "generate.py", "kvops_dashboard_generator")


@pytest.fixture(scope="session")
def runbook_base() -> ModuleType:
    return load_script(ALERTS / "set_runbook_base.py", "kvops_set_runbook_base")


@pytest.fixture(scope="session")
def promtool() -> str:
    """promtool from Debian's `prometheus` package; CI installs it, so missing is a failure."""
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool not found: apt-get install -y prometheus")
    return path


def rules(kind: str) -> list[dict[str, Any]]:
    """Every rule of `kind` ("alert" or "record") in alerts/*.yml, in file order."""
    out: list[dict[str, Any]] = []
    for path in sorted(ALERTS.glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            out += [r for r in group["rules"] if kind in r]
    return out


@pytest.fixture(scope="session")
def alerts() -> list[dict[str, Any]]:
    return rules("alert")


@pytest.fixture(scope="session")
def recording_rules() -> list[dict[str, Any]]:
    return rules("record")
