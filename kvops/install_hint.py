"""The command that adds one of kvops's extras (nvidia, amd, bench, repro) to *this* kvops.

kvops is not on PyPI, so `pip install 'kvops[nvidia]'` fails; the right command depends on how
this copy was installed, which pip records (PEP 610's direct_url.json in the dist-info): run from
a checkout, or installed from a clone (editable or not), the clone's path with the extra; under
pipx, `pipx inject` (pip would install into another environment); otherwise (a wheel), the
extra's packages themselves. The interpreter's own pip, so the extra lands where kvops runs.
"""

from __future__ import annotations

import json
import shlex
import sys
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

# Keep in step with pyproject.toml's [project.optional-dependencies] (tests/test_install_hint.py).
EXTRA_PACKAGES: dict[str, str] = {
    "nvidia": "nvidia-ml-py",
    "amd": "amdsmi",
    "bench": "torch",
    "repro": "torch numpy packaging pydantic regex requests",
}


def _source_tree() -> Path | None:
    """The checkout this kvops is imported from, when it is one (a pyproject.toml above kvops/)."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / "pyproject.toml").is_file() else None


def _direct_urls() -> list[tuple[metadata.Distribution, dict[str, Any]]]:
    """Every installed kvops distribution with its direct_url.json ({} when from an index). Several
    can be visible (a venv over system site-packages, an egg-info in the working directory)."""
    out = []
    for dist in metadata.distributions():
        if (dist.metadata["Name"] or "").lower() != "kvops":
            continue
        try:
            info = json.loads(dist.read_text("direct_url.json") or "{}")
        except ValueError:
            info = {}
        out.append((dist, info if isinstance(info, dict) else {}))
    return out


def _local_path(info: dict[str, Any]) -> Path | None:
    url = str(info.get("url", ""))
    return Path(unquote(urlparse(url).path)) if url.startswith("file://") else None


def _editable(info: dict[str, Any]) -> bool:
    return bool((info.get("dir_info") or {}).get("editable"))


def install_command(extra: str) -> str:
    """e.g. `/venv/bin/python -m pip install -e '/src/kvops[repro]'`."""
    packages = EXTRA_PACKAGES[extra]
    if (Path(sys.prefix) / "pipx_metadata.json").is_file():  # pipx's record in each venv it makes
        return f"pipx inject kvops {packages}"
    pip = f"{shlex.quote(sys.executable)} -m pip install"
    tree = _source_tree()
    if tree is not None:  # running from a checkout: editable unless pip says it copied it
        copied = any(_local_path(info) == tree and not _editable(info) for _, info in _direct_urls())
        return f"{pip} {'' if copied else '-e '}{shlex.quote(f'{tree}[{extra}]')}"
    here = Path(__file__).resolve()
    for dist, info in _direct_urls():
        if Path(str(dist.locate_file("kvops/install_hint.py"))).resolve() != here:
            continue  # another kvops, not the one running
        path = _local_path(info)
        if path is not None and "dir_info" in info:  # installed from a directory: the clone
            if path.is_dir():
                return f"{pip} {'-e ' if _editable(info) else ''}{shlex.quote(f'{path}[{extra}]')}"
            return f"{pip} {shlex.quote(f'.[{extra}]')} (from your kvops clone)"
        break  # a wheel or an index: the packages themselves
    return f"{pip} {packages}"
