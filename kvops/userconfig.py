"""Defaults a user keeps in $XDG_CONFIG_HOME/kvops/ (else ~/.config/kvops/), as the XDG base
directory specification says; flags on the command line always win.

  exporter.yml  read as `kvops exporter --config` when no --config is given (same keys)
  top.yml       defaults for `kvops top`:

    targets: [http://10.0.0.5:8000, http://10.0.0.6:8000]   # or prometheus: http://prom:9090
    interval: 2
    sort: external-hit
    window: 1m
    group_by: model
    filter: llama
    top: 20

A source in top.yml (targets or prometheus) is used only when the command line names none.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from kvops.errors import UsageError
from kvops.termsafe import visible


def config_dir() -> Path | None:
    """$XDG_CONFIG_HOME/kvops, else ~/.config/kvops; None without either (a bare container)."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    if os.path.isabs(base):  # the spec: a relative value is invalid and ignored
        return Path(base) / "kvops"
    home = os.environ.get("HOME", "")
    return Path(home) / ".config" / "kvops" if os.path.isabs(home) else None


def find(name: str) -> Path | None:
    directory = config_dir()
    path = directory / name if directory else None
    return path if path is not None and path.is_file() else None


def exporter_defaults() -> dict[str, Any]:
    """exporter.yml as the default --config: an explicit --config replaces it."""
    path = find("exporter.yml")
    return {"config": str(path)} if path else {}


def top_defaults(sort_keys: tuple[str, ...], windows: tuple[str, ...]) -> dict[str, Any]:
    """top.yml's values under the names of top's flags (argparse defaults: a flag given wins)."""
    path = find("top.yml")
    if path is None:
        return {}
    from kvops.operator_files import kind, load_yaml_mapping

    doc = load_yaml_mapping(str(path), "config file")
    where = str(path)

    def text(key: str) -> str:
        value = doc[key]
        if not isinstance(value, str) or not value:
            raise UsageError(f"{where}: {key}: expected text, got {kind(value)}")
        return value

    def choice(key: str, allowed: tuple[str, ...]) -> str:
        value = text(key)
        if value not in allowed:
            raise UsageError(f"{where}: {key} {visible(value[:40])!r}: expected one of {', '.join(allowed)}")
        return value

    out: dict[str, Any] = {}
    for key in doc:
        if key == "targets":
            urls = doc[key]
            if not isinstance(urls, list) or not urls or not all(isinstance(u, str) and u for u in urls):
                raise UsageError(f"{where}: targets: expected a list of URLs, got {kind(urls)}")
            out["config_targets"] = urls
        elif key == "prometheus":
            out["config_prometheus"] = text(key)
        elif key == "interval":
            value = doc[key]
            ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
            if not ok or value <= 0:
                raise UsageError(f"{where}: interval: expected seconds above 0, got {kind(value)}")
            out["interval"] = str(value)
        elif key == "sort":
            out["sort"] = choice(key, sort_keys)
        elif key == "window":
            out["window"] = choice(key, windows)
        elif key == "group_by":
            out["group_by"] = choice(key, ("model", "instance", "kind"))
        elif key == "filter":
            out["filter"] = text(key)
        elif key == "top":
            value = doc[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise UsageError(f"{where}: top: expected a whole number from 1, got {kind(value)}")
            out["top"] = value
        else:
            raise UsageError(f"{where}: unknown key {visible(str(key)[:40])!r}")
    if "config_targets" in out and "config_prometheus" in out:
        raise UsageError(f"{where}: give targets or prometheus, not both")
    return out
