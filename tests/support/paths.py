"""Where the shared fixtures are (../shared beside the repo, or $KVOPS_SHARED)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("KVOPS_SHARED", ROOT.parent / "shared"))
VLLM_FIXTURES = SHARED / "fixtures" / "vllm"
