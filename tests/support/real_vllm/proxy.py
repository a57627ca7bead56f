"""A loopback HTTP proxy that records every GET it forwards: the pages a client really read."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Exchange:
    path: str
    status: int
    body: bytes


class RecordingProxy:
    """Forwards GETs to `upstream` (a base URL) and keeps each (path, status, body); .url, .stop()."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.exchanges: list[Exchange] = []
        lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                try:
                    with urllib.request.urlopen(proxy.upstream + self.path, timeout=30) as resp:
                        status, body, ctype = resp.status, resp.read(), resp.headers.get("Content-Type", "")
                except urllib.error.HTTPError as exc:
                    status, body, ctype = exc.code, exc.read(), "text/plain"
                with lock:
                    proxy.exchanges.append(Exchange(self.path, status, body))
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def pages(self, prefix: str = "/metrics") -> list[Exchange]:
        return [e for e in self.exchanges if e.path.startswith(prefix)]

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
