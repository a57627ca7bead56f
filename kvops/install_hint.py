"""The command that installs an optional extra (nvidia, amd, bench) into *this* kvops.

kvops is not on PyPI, so `pip install 'kvops[nvidia]'` fails; the right command depends on how
this copy was installed, which pip records (PEP 610's direct_url.json in the dist-info):
from a clone, editable or not, the clone's path with the extra; under pipx, `pipx inject`
(pip would install into another environment); otherwise, the extra's packages themselves.
"""

from __future__ import annotations

import json
import sys
from importlib import metadata
from urllib.parse import unquote, urlparse

# Keep in step with pyproject.toml's [project.optional-dependencies] (tests/test_install_hint.py).
EXTRA_PACKAGES: dict[str, str] = {"nvidia": "nvidia-ml-py", "amd": "amdsmi", "bench": "torch"}


def _direct_url() -> dict | None:
    # Several records can be on sys.path (a clone's kvops.egg-info beside the installed one's
    # dist-info): the first that says where it came from.
    for dist in metadata.distributions(name="kvops"):
        text = dist.read_text("direct_url.json")
        try:
            return json.loads(text) if text else None
        except ValueError:
            continue
    return None


def install_command(extra: str) -> str:
    packages = EXTRA_PACKAGES[extra]
    if "/pipx/venvs/" in sys.prefix.replace("\\", "/") + "/":
        return f"pipx inject kvops {packages}"
    origin = _direct_url() or {}
    url = urlparse(origin.get("url", ""))
    if url.scheme == "file" and "dir_info" in origin:  # installed from a directory: the clone
        editable = "-e " if origin["dir_info"].get("editable") else ""
        return f"pip install {editable}'{unquote(url.path)}[{extra}]'"
    return f"pip install {packages}"
