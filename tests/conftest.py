"""Shared test fixtures: where ../shared is, and the vLLM expositions in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.paths import ROOT, SHARED, VLLM_FIXTURES  # noqa: F401 (re-exported for tests)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"../shared not found at {SHARED}; set KVOPS_SHARED")
    return SHARED


@pytest.fixture(scope="session")
def vllm_fixtures(shared_dir: Path) -> Path:
    return shared_dir / "fixtures" / "vllm"
