"""Where the in-repository test data is: fixtures under tests/, research facts under docs/."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
VLLM_FIXTURES = FIXTURES / "vllm"
RESEARCH = ROOT / "docs" / "research"
