"""Exporter settings from flags and the optional --config YAML file (flags win).

targets:
  - url: http://10.0.0.5:8000
    bearer_token_file: /run/secrets/vllm-token   # sent as Authorization: Bearer
    ca_file: /etc/kvops/vllm-ca.pem               # verify https targets against this CA
  - http://10.0.0.6:8000                         # a plain URL works too
listen: 0.0.0.0:9435
timeout: 5
max_body_bytes: 16777216
max_samples_per_target: 50000
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kvops.errors import UsageError
from kvops.sources.http import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_SAMPLES, FetchOptions, normalise_target

DEFAULT_TIMEOUT = 5.0

log = logging.getLogger(__name__)


@dataclass
class TargetConfig:
    url: str
    options: FetchOptions


@dataclass
class ExporterConfig:
    targets: list[TargetConfig] = field(default_factory=list)
    listen: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_samples: int = DEFAULT_MAX_SAMPLES
    disabled_collectors: set[str] = field(default_factory=set)


def _read_yaml(path: str) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise UsageError(f"--config {path}: {exc.strerror or exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise UsageError(f"--config {path}: not valid YAML ({type(exc).__name__})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"--config {path}: expected a mapping at the top level")
    unknown = set(doc) - {"targets", "listen", "timeout", "max_body_bytes", "max_samples_per_target"}
    if unknown:
        raise UsageError(f"--config {path}: unknown key {sorted(unknown)[0]!r}")
    return doc


def _secret_file(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise UsageError(f"{what} {path}: {exc.strerror or exc}") from None


def load_config(args: argparse.Namespace) -> ExporterConfig:
    doc = _read_yaml(args.config) if args.config else {}
    config = ExporterConfig()
    config.listen = args.listen or doc.get("listen")
    timeout = args.timeout if args.timeout is not None else doc.get("timeout", DEFAULT_TIMEOUT)
    max_body = args.max_body_bytes if args.max_body_bytes is not None else doc.get("max_body_bytes")
    try:
        config.timeout = float(timeout)
        config.max_body_bytes = int(max_body) if max_body is not None else DEFAULT_MAX_BODY_BYTES
    except (TypeError, ValueError):
        raise UsageError("timeout must be seconds and max_body_bytes a whole number") from None
    if not 0 < config.timeout <= 600:
        raise UsageError(f"--timeout {config.timeout:g}: expected seconds in (0, 600]")
    if config.max_body_bytes < 1024:
        raise UsageError(f"--max-body-bytes {config.max_body_bytes}: expected at least 1024")
    max_samples = getattr(args, "max_samples_per_target", None)
    max_samples = (
        max_samples if max_samples is not None else doc.get("max_samples_per_target", DEFAULT_MAX_SAMPLES)
    )
    if isinstance(max_samples, bool) or not isinstance(max_samples, int) or not 1 <= max_samples <= 10**9:
        raise UsageError(f"max_samples_per_target {str(max_samples)[:40]}: expected a whole number from 1")
    config.max_samples = max_samples
    config.disabled_collectors = set(getattr(args, "no_collector", []) or [])

    listed = doc.get("targets") or []
    if not isinstance(listed, list):
        raise UsageError(f"--config: targets must be a list, got {type(listed).__name__}")
    entries: list[Any] = listed + list(args.target)
    seen: set[str] = set()
    for entry in entries:
        if isinstance(entry, str):
            entry = {"url": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
            raise UsageError(f"--config: each target needs a url, got {entry!r}"[:200])
        target = normalise_target(entry["url"])
        if target in seen:
            continue  # the same target twice would double every series
        seen.add(target)
        options = FetchOptions(
            max_body_bytes=config.max_body_bytes, max_samples=config.max_samples, ca_file=entry.get("ca_file")
        )
        if entry.get("bearer_token_file"):
            options.bearer_token = _secret_file(entry["bearer_token_file"], "bearer_token_file")
        if options.bearer_token and target.startswith("http://"):
            log.warning("target %s: its bearer token is sent unencrypted over http", target)
        if options.ca_file and not Path(options.ca_file).is_file():
            raise UsageError(f"ca_file {options.ca_file}: no such file")
        config.targets.append(TargetConfig(entry["url"], options))
    return config
