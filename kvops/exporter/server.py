"""HTTP(S) server for `kvops exporter`: /metrics, a landing page, TLS and basic auth.

prometheus_client's start_http_server has TLS but no basic auth and no per-request scrape
timeout, so the handler is ours: it reads X-Prometheus-Scrape-Timeout-Seconds and keeps
the whole scrape under it, then renders with kvops.exporter.encode (byte-equal to
prometheus_client's generate_latest, a third of its cost).
"""

from __future__ import annotations

import gzip
import logging
import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kvops.errors import UsageError
from kvops.exporter.encode import encode
from kvops.exporter.webconfig import WebConfig

log = logging.getLogger(__name__)

# Leave Prometheus this much of its scrape timeout to receive and store the answer.
SCRAPE_TIMEOUT_MARGIN = 0.5
_HANDSHAKE_TIMEOUT = 10.0

LANDING = b"""<html><head><title>kvops exporter</title></head><body>
<h1>kvops exporter</h1><p>vLLM KV-cache offloading metrics.</p>
<p><a href="/metrics">Metrics</a></p></body></html>
"""


def parse_listen(value: str) -> tuple[str, int]:
    """HOST:PORT, :PORT (all interfaces) or [v6]:PORT."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--listen {value!r}: expected HOST:PORT, e.g. 0.0.0.0:9435")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


class ExporterServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        scrape: Callable[[float | None], list[Any]],
        web: WebConfig | None = None,
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.scrape = scrape
        self.web = web or WebConfig()
        try:
            super().__init__(address, _Handler)
        except OSError as exc:
            raise UsageError(f"cannot listen on {address[0]}:{address[1]}: {exc.strerror or exc}") from None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        scheme = "https" if self.web.ssl_context else "http"
        shown = f"[{host}]" if ":" in str(host) else host
        return f"{scheme}://{shown}:{port}"

    def finish_request(self, request: Any, client_address: Any) -> None:
        # TLS handshake in the worker thread: a slow client must not block accept().
        if self.web.ssl_context is not None:
            request.settimeout(_HANDSHAKE_TIMEOUT)
            try:
                request = self.web.ssl_context.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError) as exc:
                log.debug("TLS handshake with %s failed: %s", client_address, exc)
                return
        super().finish_request(request, client_address)

    def serve_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="kvops-exporter", daemon=True)
        thread.start()
        return thread


class _Handler(BaseHTTPRequestHandler):
    server: ExporterServer
    server_version = "kvops"
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if not self.server.web.check_basic_auth(self.headers.get("Authorization")):
            self._send(401, b"Unauthorized\n", "text/plain", {"WWW-Authenticate": 'Basic realm="kvops"'})
            return
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._metrics()
        elif path == "/":
            self._send(200, LANDING, "text/html; charset=utf-8")
        elif path in ("/-/healthy", "/-/ready"):
            self._send(200, b"OK\n", "text/plain")
        else:
            self._send(404, b"Not found\n", "text/plain")

    def _metrics(self) -> None:
        timeout = None
        header = self.headers.get("X-Prometheus-Scrape-Timeout-Seconds")
        if header:
            try:
                timeout = max(0.1, float(header) - SCRAPE_TIMEOUT_MARGIN)
            except ValueError:
                timeout = None
        try:
            body = encode(self.server.scrape(timeout))
        except Exception:
            # Every source has its own boundary; reaching here is a kvops bug. Say so plainly.
            log.exception("rendering /metrics failed")
            self._send(500, b"kvops: internal error rendering metrics\n", "text/plain")
            return
        headers = {}
        if "gzip" in (self.headers.get("Accept-Encoding") or ""):
            body = gzip.compress(body, compresslevel=1)
            headers["Content-Encoding"] = "gzip"
        self._send(200, body, CONTENT_TYPE_LATEST, headers)

    def _send(self, code: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)
