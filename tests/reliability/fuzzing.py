"""Hypothesis settings for the fuzz tests: bounded in CI, longer on request.

KVOPS_FUZZ_PROFILE=long python -m pytest tests/reliability -k fuzz   (5,000 examples per test)
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_PROFILES = {
    "ci": settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]),
    "long": settings(max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow]),
}

# Applied per test (not load_profile) so other areas' hypothesis tests keep their own settings.
FUZZ = _PROFILES[os.environ.get("KVOPS_FUZZ_PROFILE", "ci")]
