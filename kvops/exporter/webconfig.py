"""The Prometheus exporter-toolkit web-config file: TLS and basic auth for `kvops exporter`.

Same format as node_exporter's --web.config.file, so one file serves a whole fleet:

    tls_server_config:
      cert_file: server.crt
      key_file: server.key
      client_auth_type: RequireAndVerifyClientCert   # optional; needs client_ca_file
      client_ca_file: ca.crt
      min_version: TLS12                              # optional: TLS12 | TLS13
      max_version: TLS13                              # optional
    basic_auth_users:
      prometheus: $2y$10$...                          # bcrypt hash (htpasswd -nBC 10)

Relative paths are resolved against the file's folder, as exporter-toolkit does. As there
(yaml.UnmarshalStrict), every key is checked at start: a misspelt or unsupported key is an
error, not a setting silently ignored. Hashes and certificate files are loaded at start too.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import ssl
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bcrypt

from kvops.errors import UsageError, one_line
from kvops.operator_files import check_file, kind, load_yaml_mapping
from kvops.termsafe import visible

_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "RequireAnyClientCert": ssl.CERT_REQUIRED,  # Python cannot skip verification of a required cert
    "RequireClientCert": ssl.CERT_REQUIRED,  # exporter-toolkit's older name for the same
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
_TOP_KEYS = {"tls_server_config", "basic_auth_users", "http_server_config"}
_TLS_KEYS = {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version", "max_version"}
# exporter-toolkit keys kvops does not implement: an error, since ignoring them would weaken
# what the operator asked for (a SAN allow-list, a cipher list, a rate limit).
_UNSUPPORTED = {
    "rate_limit", "cert", "key", "client_ca", "cipher_suites", "curve_preferences",
    "prefer_server_cipher_suites", "client_allowed_sans", "headers",
}  # fmt: skip
_HTTP_KEYS = {"http2"}  # accepted and ignored: kvops serves HTTP/1.1

# exporter-toolkit caches this many verified (user, password) outcomes; so does kvops.
AUTH_CACHE_SIZE = 128
# bcrypt is CPU-bound by design: at most this many run at once, so a flood of wrong passwords
# costs one core, not every worker (exporter-toolkit holds a mutex: one at a time).
MAX_CONCURRENT_BCRYPT = 1


@dataclass
class WebConfig:
    ssl_context: ssl.SSLContext | None = None
    users: dict[str, bytes] = field(default_factory=dict)  # user -> bcrypt hash
    # Checked for unknown users, so that they cost the same bcrypt as a wrong password.
    dummy_hash: bytes = b""
    _cache: OrderedDict[bytes, bool] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _bcrypt: threading.BoundedSemaphore = field(
        default_factory=lambda: threading.BoundedSemaphore(MAX_CONCURRENT_BCRYPT)
    )

    def check_basic_auth(self, header: str | None) -> bool:
        """True when no users are configured or the Authorization header matches one."""
        if not self.users:
            return True
        if not header or not header.startswith("Basic "):
            return False
        try:
            raw = base64.b64decode(header[6:], validate=True)
        except ValueError:
            return False
        user_bytes, sep, password = raw.partition(b":")
        if not sep:
            return False
        user = user_bytes.decode("utf-8", "replace")
        known = user in self.users
        hashed = self.users[user] if known else self.dummy_hash
        # Keyed by a digest, never the password itself; unknown users are cached like wrong
        # passwords, so a cached answer says nothing about which users exist either.
        key = hashlib.sha256(b"\0".join((user_bytes, hashed, password))).digest()
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
        with self._bcrypt:
            try:
                ok = bcrypt.checkpw(password, hashed) and known
            except ValueError:  # a password bcrypt refuses (a NUL byte, say)
                ok = False
        with self._lock:
            self._cache[key] = ok
            while len(self._cache) > AUTH_CACHE_SIZE:
                self._cache.popitem(last=False)
        return ok


def load(path: str) -> WebConfig:
    doc = load_yaml_mapping(path, "--web-config")
    base = Path(path).parent
    where = f"--web-config {path}"
    _check_keys(doc, _TOP_KEYS, where, "")
    config = WebConfig()
    tls = doc.get("tls_server_config")
    if tls is not None:
        if not isinstance(tls, dict):
            raise UsageError(f"{where}: tls_server_config must be a mapping, got {kind(tls)}")
        _check_keys(tls, _TLS_KEYS, where, "tls_server_config.")
        if tls:
            config.ssl_context = _ssl_context(tls, base, where)
    http = doc.get("http_server_config")
    if http is not None:
        if not isinstance(http, dict):
            raise UsageError(f"{where}: http_server_config must be a mapping, got {kind(http)}")
        _check_keys(http, _HTTP_KEYS, where, "http_server_config.")
    users = doc.get("basic_auth_users")
    if users is None:
        users = {}
    if not isinstance(users, dict):
        raise UsageError(f"{where}: basic_auth_users must map user names to bcrypt hashes")
    costs = []
    for user, hashed in users.items():
        shown = visible(str(user))
        if not isinstance(user, str) or ":" in user:
            raise UsageError(f"{where}: user name {shown!r} must be text without ':'")
        if not isinstance(hashed, str):
            raise UsageError(f"{where}: the password of {shown!r} is not a bcrypt hash")
        config.users[user] = hashed.encode("utf-8", "replace")
        costs.append(_bcrypt_cost(config.users[user], shown, where))
    if costs:
        # As costly as the dearest real hash: an unknown user takes as long as a wrong password.
        config.dummy_hash = bcrypt.hashpw(secrets.token_bytes(16), bcrypt.gensalt(rounds=max(costs)))
    return config


def _check_keys(doc: dict[Any, Any], known: set[str], where: str, prefix: str) -> None:
    for key in doc:
        name = visible(str(key))
        if key in _UNSUPPORTED:
            raise UsageError(f"{where}: '{prefix}{name}' is not supported by kvops")
        if key not in known:
            raise UsageError(f"{where}: unknown key '{prefix}{name}'")


def _bcrypt_cost(hashed: bytes, user: str, where: str) -> int:
    """The hash's cost, after checking bcrypt itself accepts it (a truncated or mistyped hash
    would otherwise refuse every scrape with no word at start)."""
    try:
        if not hashed.startswith((b"$2a$", b"$2b$", b"$2y$")):
            raise ValueError("prefix")
        bcrypt.checkpw(b"", hashed)
        return int(hashed[4:6])
    except ValueError:
        raise UsageError(f"{where}: the password of {user!r} is not a bcrypt hash") from None


def _path(tls: dict[str, Any], key: str, base: Path, where: str) -> str:
    value = tls[key]
    if not isinstance(value, str) or not value:
        raise UsageError(f"{where}: tls_server_config.{key} must be a file path, got {kind(value)}")
    return check_file(str(base / value), f"{where}: cannot load {key}")


def _version(tls: dict[str, Any], key: str, default: str, where: str) -> ssl.TLSVersion:
    value = tls.get(key, default)
    if value not in _VERSIONS:
        raise UsageError(f"{where}: {key} {visible(str(value))!r} is not one of TLS12, TLS13")
    return _VERSIONS[value]


def _ssl_context(tls: dict[str, Any], base: Path, where: str) -> ssl.SSLContext:
    if not tls.get("cert_file") or not tls.get("key_file"):
        raise UsageError(f"{where}: tls_server_config needs cert_file and key_file")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = _version(tls, "min_version", "TLS12", where)
    ctx.maximum_version = _version(tls, "max_version", "TLS13", where)
    if ctx.minimum_version > ctx.maximum_version:
        raise UsageError(f"{where}: min_version is above max_version")
    cert, key = _path(tls, "cert_file", base, where), _path(tls, "key_file", base, where)
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"{where}: cannot load cert_file/key_file: {one_line(exc, 160)}") from None
    auth = tls.get("client_auth_type", "NoClientCert")
    if auth not in _CLIENT_AUTH:
        raise UsageError(f"{where}: unknown client_auth_type {visible(str(auth))!r}")
    ctx.verify_mode = _CLIENT_AUTH[auth]
    if tls.get("client_ca_file") is not None:
        if ctx.verify_mode == ssl.CERT_NONE:
            # exporter-toolkit: "client CA's have been configured without a Client Auth Policy"
            raise UsageError(f"{where}: client_ca_file is set but client_auth_type is {auth}")
        ca = _path(tls, "client_ca_file", base, where)
        try:
            ctx.load_verify_locations(ca)
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise UsageError(f"{where}: cannot load client_ca_file: {one_line(exc, 160)}") from None
        if not ctx.get_ca_certs():
            raise UsageError(f"{where}: client_ca_file {ca} holds no CA certificate")
    elif ctx.verify_mode != ssl.CERT_NONE:
        raise UsageError(f"{where}: client_auth_type {auth} needs client_ca_file")
    return ctx
