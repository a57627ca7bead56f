"""The Prometheus exporter-toolkit web-config file: TLS and basic auth for `kvops exporter`.

Same format as node_exporter's --web.config.file, so one file serves a whole fleet:

    tls_server_config:
      cert_file: server.crt
      key_file: server.key
      client_auth_type: RequireAndVerifyClientCert   # optional; needs client_ca_file
      client_ca_file: ca.crt
      min_version: TLS12                              # optional: TLS12 | TLS13
    basic_auth_users:
      prometheus: $2y$10$...                          # bcrypt hash (htpasswd -nBC 10)

Relative paths are resolved against the file's folder, as exporter-toolkit does.
"""

from __future__ import annotations

import base64
import hashlib
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kvops.errors import UsageError

_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "RequireAnyClientCert": ssl.CERT_REQUIRED,  # Python cannot skip verification of a required cert
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_MIN_VERSION = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}


@dataclass
class WebConfig:
    ssl_context: ssl.SSLContext | None = None
    users: dict[str, bytes] = field(default_factory=dict)  # user -> bcrypt hash
    _ok_cache: set[tuple[str, bytes]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def check_basic_auth(self, header: str | None) -> bool:
        """True when no users are configured or the Authorization header matches one."""
        if not self.users:
            return True
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode("utf-8").partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        hashed = self.users.get(user)
        if hashed is None:
            return False
        # bcrypt costs ~0.1 s by design; cache successes (keyed by a digest, not the password)
        # as exporter-toolkit does, so a 1 s scrape interval does not burn a core.
        digest = hashlib.sha256(password.encode() + b"\0" + hashed).digest()
        with self._lock:
            if (user, digest) in self._ok_cache:
                return True
        import bcrypt

        try:
            ok = bcrypt.checkpw(password.encode("utf-8"), hashed)
        except ValueError:
            return False
        if ok:
            with self._lock:
                self._ok_cache.add((user, digest))
        return ok


def load(path: str) -> WebConfig:
    file = Path(path)
    try:
        doc: Any = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise UsageError(f"--web-config {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"--web-config {path}: not valid YAML ({_yaml_where(exc)})") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"--web-config {path}: not UTF-8 text (byte {exc.start})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"--web-config {path}: expected a mapping at the top level")
    unknown = set(doc) - {"tls_server_config", "basic_auth_users", "http_server_config"}
    if unknown:
        raise UsageError(f"--web-config {path}: unknown key {sorted(unknown)[0]!r}")
    config = WebConfig()
    tls = doc.get("tls_server_config")
    if tls:
        config.ssl_context = _ssl_context(tls, file.parent, path)
    users = doc.get("basic_auth_users") or {}
    if not isinstance(users, dict):
        raise UsageError(f"--web-config {path}: basic_auth_users must map user names to bcrypt hashes")
    for user, hashed in users.items():
        if not isinstance(hashed, str) or not hashed.startswith(("$2a$", "$2b$", "$2y$")):
            raise UsageError(f"--web-config {path}: the password of {user!r} is not a bcrypt hash")
        config.users[str(user)] = hashed.encode()
    return config


def _ssl_context(tls: Any, base: Path, path: str) -> ssl.SSLContext:
    if not isinstance(tls, dict) or not tls.get("cert_file") or not tls.get("key_file"):
        raise UsageError(f"--web-config {path}: tls_server_config needs cert_file and key_file")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    min_version = str(tls.get("min_version", "TLS12"))
    if min_version not in _MIN_VERSION:
        raise UsageError(f"--web-config {path}: min_version {min_version!r} is not one of TLS12, TLS13")
    ctx.minimum_version = _MIN_VERSION[min_version]
    try:
        ctx.load_cert_chain(base / tls["cert_file"], base / tls["key_file"])
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"--web-config {path}: cannot load cert_file/key_file: {exc}") from None
    auth = str(tls.get("client_auth_type", "NoClientCert"))
    if auth not in _CLIENT_AUTH:
        raise UsageError(f"--web-config {path}: unknown client_auth_type {auth!r}")
    ctx.verify_mode = _CLIENT_AUTH[auth]
    if tls.get("client_ca_file"):
        try:
            ctx.load_verify_locations(base / tls["client_ca_file"])
        except (OSError, ssl.SSLError) as exc:
            raise UsageError(f"--web-config {path}: cannot load client_ca_file: {exc}") from None
    elif ctx.verify_mode != ssl.CERT_NONE:
        raise UsageError(f"--web-config {path}: client_auth_type {auth} needs client_ca_file")
    return ctx


def _yaml_where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    return f"line {mark.line + 1}" if mark is not None else "parse error"
