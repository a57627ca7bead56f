"""A loopback HTTP server that plays a vLLM /metrics endpoint, well or badly.

Tests point kvops at it: it serves fixture files and the faults a real target shows
(refusing is just a closed port). Behaviour is chosen per request path, so one server
serves many targets: /<name>/metrics.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Behaviour = Callable[[BaseHTTPRequestHandler], None]


def body(data: bytes | str, status: int = 200) -> Behaviour:
    raw = data.encode() if isinstance(data, str) else data

    def handle(h: BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        h.send_header("Content-Type", "text/plain; version=0.0.4")
        h.send_header("Content-Length", str(len(raw)))
        h.end_headers()
        with contextlib.suppress(OSError):  # the client gave up (a timeout under test): expected
            h.wfile.write(raw)

    return handle


def hang(seconds: float) -> Behaviour:
    def handle(h: BaseHTTPRequestHandler) -> None:
        time.sleep(seconds)
        body("vllm:num_requests_running 1\n")(h)

    return handle


def trickle(data: str, byte_delay: float, total_seconds: float) -> Behaviour:
    """Sends one byte every byte_delay seconds for up to total_seconds."""

    def handle(h: BaseHTTPRequestHandler) -> None:
        raw = data.encode()
        h.send_response(200)
        h.send_header("Content-Length", str(len(raw)))
        h.end_headers()
        end = time.monotonic() + total_seconds
        for i in range(len(raw)):
            if time.monotonic() > end:
                break
            try:
                h.wfile.write(raw[i : i + 1])
                h.wfile.flush()
            except OSError:
                return
            time.sleep(byte_delay)

    return handle


def huge(total_bytes: int, declare_length: bool) -> Behaviour:
    """A body of total_bytes of valid exposition lines, with or without Content-Length."""

    def handle(h: BaseHTTPRequestHandler) -> None:
        line = b'vllm:num_requests_running{model_name="m",engine="0"} 1.0\n'
        h.send_response(200)
        if declare_length:
            h.send_header("Content-Length", str(total_bytes))
        else:
            h.send_header("Connection", "close")
        h.end_headers()
        sent = 0
        chunk = line * (65536 // len(line))
        try:
            while sent < total_bytes:
                piece = chunk[: total_bytes - sent]
                h.wfile.write(piece)
                sent += len(piece)
        except OSError:
            return

    return handle


class Upstream(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        self.routes: dict[str, Behaviour] = {}
        self.hits: dict[str, int] = {}
        # GETs with a name[] filter: the scraper's probe of a filtered page (page_filter.py)
        self.filtered_hits: dict[str, int] = {}
        super().__init__(("127.0.0.1", 0), _Handler)
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def route(self, name: str, behaviour: Behaviour) -> str:
        """Serve behaviour at /<name>/metrics; returns the target URL (its base)."""
        self.routes[f"/{name}/metrics"] = behaviour
        return f"{self.base}/{name}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: Upstream
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]  # like most servers, routes ignore the query
        self.server.hits[path] = self.server.hits.get(path, 0) + 1
        if "name[]=" in self.path:
            self.server.filtered_hits[path] = self.server.filtered_hits.get(path, 0) + 1
        behaviour = self.server.routes.get(path)
        if behaviour is None:
            body("not found\n", 404)(self)
            return
        behaviour(self)

    def log_message(self, format: str, *args: Any) -> None:
        pass
