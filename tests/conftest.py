"""Shared test fixtures: where ../shared is, and the vLLM expositions in it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("KVOPS_SHARED", ROOT.parent / "shared"))
VLLM_FIXTURES = SHARED / "fixtures" / "vllm"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"../shared not found at {SHARED}; set KVOPS_SHARED")
    return SHARED


@pytest.fixture(scope="session")
def vllm_fixtures(shared_dir: Path) -> Path:
    return shared_dir / "fixtures" / "vllm"
