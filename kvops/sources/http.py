"""Fetching a /metrics body within a deadline and a size bound.

A socket read timeout is per read: a target that trickles a byte a second never trips
it. So the body is read with read1() (whatever has arrived, up to 64 KiB) and the
deadline is checked between reads. Redirects are followed only within the same origin, so
a target cannot send kvops (and its bearer token) to another host.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import certifi
import requests
import urllib3

from kvops.errors import UsageError

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
_READ_CHUNK = 64 * 1024
_MAX_REDIRECTS = 3


class FetchError(Exception):
    """One-line reason a scrape failed (shown in logs and `kvops top`)."""


def normalise_target(url: str) -> str:
    """`scheme://host:port[/path]` for a target as given (DESIGN.md's `target` label).

    Accepts `host:port` without a scheme (http assumed). Raises UsageError on anything that is
    not an http(s) URL with a host.
    """
    raw = url.strip()
    if "://" not in raw:
        raw = "http://" + raw
    try:
        parts = urlsplit(raw)
    except ValueError:  # an unbalanced [ or ] around an IPv6 host
        raise UsageError(f"target {url!r}: not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise UsageError(f"target {url!r}: only http and https URLs can be scraped")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        raise UsageError(f"target {url!r}: bad port") from None
    if not host:
        raise UsageError(f"target {url!r}: no host")
    if parts.username or parts.password:
        raise UsageError(f"target {url!r}: put credentials in --config, not in the URL")
    port = port or (443 if scheme == "https" else 80)
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    path = parts.path.rstrip("/")
    return urlunsplit((scheme, netloc, path, parts.query, ""))


def metrics_url(target: str) -> str:
    """The URL to GET: the target itself if it names /metrics, else base + /metrics."""
    parts = urlsplit(target)
    if parts.path.endswith("/metrics"):
        return target
    return urlunsplit((parts.scheme, parts.netloc, parts.path + "/metrics", parts.query, ""))


@dataclass
class FetchOptions:
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    bearer_token: str | None = None
    ca_file: str | None = None  # verify TLS against this CA bundle (else the system's)


def _same_origin(a: str, b: str) -> bool:
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.scheme, pa.hostname, pa.port) == (pb.scheme, pb.hostname, pb.port)


def _pool(session: Any, url: str, options: FetchOptions) -> urllib3.HTTPConnectionPool:
    """The keep-alive pool for url's origin. A requests.Session lends its urllib3 PoolManager:
    requests' own request machinery costs ~1 ms of CPU per call (prepare, merge settings,
    hooks), as much as parsing a whole exposition (benchmarks/exporter_scrape.py)."""
    manager = session.get_adapter(url).poolmanager if isinstance(session, requests.Session) else session
    kwargs: dict[str, Any] = {"maxsize": 2}
    if url.startswith("https:"):
        kwargs["cert_reqs"] = "CERT_REQUIRED"
        kwargs["ca_certs"] = options.ca_file or certifi.where()
    return manager.connection_from_url(url, pool_kwargs=kwargs)  # type: ignore[no-any-return]


def fetch_text(session: Any, url: str, deadline: float, options: FetchOptions) -> str:
    """GET url and return its body as text, or raise FetchError with a one-line reason.

    `session` is a requests.Session or a urllib3.PoolManager; connections are kept alive."""
    headers = {"Accept": "text/plain;version=0.0.4", "Accept-Encoding": "identity", "User-Agent": "kvops"}
    if options.bearer_token:
        headers["Authorization"] = f"Bearer {options.bearer_token}"
    current = url
    for _ in range(_MAX_REDIRECTS + 1):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise FetchError("timed out before connecting")
        parts = urlsplit(current)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        try:
            resp = _pool(session, current, options).urlopen(
                "GET",
                path,
                headers=headers,
                preload_content=False,
                redirect=False,
                retries=False,
                timeout=urllib3.Timeout(connect=remaining, read=remaining),
            )
        except urllib3.exceptions.SSLError as exc:
            raise FetchError(f"TLS error: {_root_cause(exc)}") from None
        except urllib3.exceptions.ConnectTimeoutError:
            raise FetchError("connect timed out") from None
        except urllib3.exceptions.NewConnectionError as exc:
            raise FetchError(f"connection failed: {_root_cause(exc)}") from None
        except urllib3.exceptions.ReadTimeoutError:
            raise FetchError("timed out waiting for response headers") from None
        except urllib3.exceptions.ProtocolError as exc:
            raise FetchError(f"connection broken: {_root_cause(exc)}") from None
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            raise FetchError(_root_cause(exc)) from None
        try:
            if not 200 <= resp.status < 300:
                _discard(resp)
            if resp.status in (301, 302, 303, 307, 308) and resp.headers.get("Location"):
                location = urljoin(current, resp.headers["Location"])
                if not _same_origin(current, location):
                    raise FetchError(f"HTTP {resp.status} redirect to another host not followed")
                current = location
                continue
            if not 200 <= resp.status < 300:
                raise FetchError(f"HTTP {resp.status} {resp.reason or ''}".strip())
            return _read_body(resp, deadline, options.max_body_bytes)
        finally:
            resp.release_conn()
    raise FetchError("too many redirects")


def _discard(resp: urllib3.BaseHTTPResponse) -> None:
    """Finish an unwanted response so its connection can be reused; close it if it is big."""
    declared = resp.headers.get("Content-Length", "")
    try:
        if declared.isdigit() and int(declared) <= _READ_CHUNK:
            resp.drain_conn()
        else:
            resp.close()
    except Exception:
        resp.close()


def _read_body(resp: urllib3.BaseHTTPResponse, deadline: float, max_bytes: int) -> str:
    declared = resp.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        resp.close()
        raise FetchError(f"body of {int(declared)} bytes is over the limit of {max_bytes}")
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            if time.monotonic() > deadline:
                resp.close()  # the connection is mid-body: not reusable
                raise FetchError(f"timed out reading the body ({size} bytes read)")
            chunk = resp.read1(_READ_CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                resp.close()
                raise FetchError(f"body over the limit of {max_bytes} bytes")
            chunks.append(chunk)
    except FetchError:
        raise
    except Exception as exc:  # urllib3 read errors: timeouts, resets, protocol errors
        resp.close()
        raise FetchError(f"reading the body failed: {_root_cause(exc)}") from None
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FetchError(f"body is not valid UTF-8 (byte {exc.start})") from None


def _root_cause(exc: BaseException) -> str:
    """The innermost reason of a requests/urllib3 error chain ("[Errno 111] Connection refused"),
    not its several lines of wrapper text."""
    reason: BaseException = exc
    while True:
        inner = getattr(reason, "reason", None)
        if isinstance(inner, BaseException) and inner is not reason:
            reason = inner
            continue
        if reason.args and isinstance(reason.args[0], BaseException):
            reason = reason.args[0]
            continue
        break
    text = _first_line(reason)
    marker = "Failed to establish a new connection: "
    return text.split(marker, 1)[1] if marker in text else text


def _first_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]
