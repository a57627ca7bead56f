"""Exporter settings from flags and the optional --config YAML file (flags win).

targets:
  - url: http://10.0.0.5:8000
    bearer_token_file: /run/secrets/vllm-token   # sent as Authorization: Bearer
    ca_file: /etc/kvops/vllm-ca.pem               # verify https targets against this CA
  - http://10.0.0.6:8000                         # a plain URL works too
listen: 0.0.0.0:19435
timeout: 5
max_body_bytes: 16777216
max_samples_per_target: 50000
"""

from __future__ import annotations

import argparse
import logging
import ssl
from dataclasses import dataclass, field
from typing import Any

from kvops.errors import UsageError, one_line
from kvops.operator_files import check_file, kind, load_yaml_mapping, read_secret
from kvops.scrape.runner import DEFAULT_TIMEOUT
from kvops.termsafe import visible
from kvops.transport.http import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_SAMPLES, FetchOptions, normalise_target

log = logging.getLogger(__name__)

MIN_BODY_BYTES = 1024
MAX_BODY_BYTES = 1024**3  # a page is held in memory whole; the largest vLLM pages are ~1 MiB


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
    doc = load_yaml_mapping(path, "--config")
    unknown = set(doc) - {"targets", "listen", "timeout", "max_body_bytes", "max_samples_per_target"}
    if unknown:
        raise UsageError(f"--config {path}: unknown key {visible(sorted(map(str, unknown))[0])!r}")
    return doc


def _number(value: object, what: str, whole: bool = False) -> float:
    """A YAML or flag number; bool is refused although Python counts it as an int."""
    ok = isinstance(value, int) if whole else isinstance(value, int | float)
    if not ok or isinstance(value, bool):
        raise UsageError(f"{what}: expected {'a whole number' if whole else 'seconds'}, got {kind(value)}")
    return value  # type: ignore[return-value]


def load_config(args: argparse.Namespace) -> ExporterConfig:
    doc = _read_yaml(args.config) if args.config else {}
    config = ExporterConfig()
    listen = args.listen if args.listen else doc.get("listen")
    if listen is not None and not isinstance(listen, str):
        # `listen: 20035` parses as a number; say how to write it rather than guess a host.
        raise UsageError(f'--config listen: expected "HOST:PORT" (e.g. "0.0.0.0:19435"), got {kind(listen)}')
    config.listen = listen
    timeout = args.timeout if args.timeout is not None else doc.get("timeout", DEFAULT_TIMEOUT)
    max_body = args.max_body_bytes if args.max_body_bytes is not None else doc.get("max_body_bytes")
    config.timeout = float(_number(timeout, "timeout"))
    if max_body is not None:
        config.max_body_bytes = int(_number(max_body, "max_body_bytes", whole=True))
    if not 0 < config.timeout <= 600:
        raise UsageError(f"--timeout {config.timeout:g}: expected seconds in (0, 600]")
    if not MIN_BODY_BYTES <= config.max_body_bytes <= MAX_BODY_BYTES:
        # libcurl's size limit is a signed 64-bit number: 2**63 failed every target
        raise UsageError(
            f"--max-body-bytes {str(config.max_body_bytes)[:40]}: expected bytes from {MIN_BODY_BYTES} "
            f"to {MAX_BODY_BYTES} (1 GiB)"
        )
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
        raise UsageError(f"--config: targets must be a list, got {kind(listed)}")
    entries: list[Any] = listed + list(args.target)
    seen: set[str] = set()
    for entry in entries:
        if isinstance(entry, str):
            entry = {"url": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
            shown = entry.get("url") if isinstance(entry, dict) else entry
            raise UsageError(f"--config: each target needs a url string, got {kind(shown)}")
        unknown = set(entry) - _TARGET_KEYS
        if unknown:
            raise UsageError(f"--config: unknown target key {visible(sorted(map(str, unknown))[0])!r}")
        target = normalise_target(entry["url"])
        if target in seen:
            continue  # the same target twice would double every series
        seen.add(target)
        options = FetchOptions(max_body_bytes=config.max_body_bytes, max_samples=config.max_samples)
        if entry.get("ca_file") is not None:
            options.ca_file = _ca_file(entry["ca_file"])
        if entry.get("bearer_token_file") is not None:
            options.bearer_token = read_secret(entry["bearer_token_file"], "bearer_token_file")
        if options.bearer_token and target.startswith("http://"):
            log.warning("target %s: its bearer token is sent unencrypted over http", visible(target))
        config.targets.append(TargetConfig(entry["url"], options))
    return config


_TARGET_KEYS = {"url", "bearer_token_file", "ca_file"}


def _ca_file(path: object) -> str:
    """A CA bundle that OpenSSL can load, checked now rather than failing every scrape."""
    checked = check_file(path, "ca_file")
    try:
        ssl.create_default_context(cafile=checked)
    except (ssl.SSLError, ValueError) as exc:
        raise UsageError(f"ca_file {checked}: not a PEM certificate bundle ({one_line(exc, 120)})") from None
    return checked
