"""The address a target URL points at."""

from __future__ import annotations

from urllib.parse import urlsplit


def default_port(scheme: str) -> int:
    return 443 if scheme.lower() == "https" else 80


def host_port(url: str) -> tuple[str, int] | None:
    """(host, port) a URL or bare `host:port` points at, the scheme's port filled in; None if it has none.

    The one place kvops reads an address out of a target (normalise_target, the process finder).
    """
    try:
        parts = urlsplit(url if "//" in url else f"http://{url}")
        host, port = parts.hostname, parts.port
    except ValueError:  # an unbalanced [ or ] around an IPv6 host, or a port out of range
        return None
    if not host:
        return None
    return host, default_port(parts.scheme) if port is None else port
