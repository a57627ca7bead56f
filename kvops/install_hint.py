"""The pip command that adds one of kvops's extras to the kvops that is running, as it was
installed: from PyPI (`kvops[repro]`), from a clone (`'/path/to/clone[repro]'`, with -e when it
was installed editable), or a checkout run without installing. pip records which in the
distribution's direct_url.json (PEP 610)."""

from __future__ import annotations

import json
import shlex
import sys
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse


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


def pip_install(extra: str) -> str:
    """e.g. `/venv/bin/python -m pip install '/src/kvops[repro]'` (this interpreter's pip, so the
    extra lands where this kvops runs)."""
    pip = f"{shlex.quote(sys.executable)} -m pip install"
    tree = _source_tree()
    if tree is not None:  # running from a checkout: editable unless pip says it copied it
        copied = any(
            _local_path(info) == tree and not (info.get("dir_info") or {}).get("editable")
            for _, info in _direct_urls()
        )
        return f"{pip} {'' if copied else '-e '}{shlex.quote(f'{tree}[{extra}]')}"
    here = Path(__file__).resolve()
    for dist, info in _direct_urls():
        if Path(str(dist.locate_file("kvops/install_hint.py"))).resolve() != here:
            continue  # another kvops, not the one running
        path = _local_path(info)
        if path is None:
            break  # from an index
        if path.is_dir():
            return f"{pip} {shlex.quote(f'{path}[{extra}]')}"
        return f"{pip} {shlex.quote(f'.[{extra}]')} (from your kvops clone)"
    return f"{pip} {shlex.quote(f'kvops[{extra}]')}"
