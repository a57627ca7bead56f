"""Serve a simulated vLLM's /metrics over HTTP, advancing the engine only when asked.

The engine is advanced lazily, to the wall-clock time of each scrape, so an idle simulator
costs nothing: sixteen of them fit on a two-core laptop. After a long pause the engine
catches up at most MAX_CATCHUP_S of simulated time; the rest of the gap is skipped (the
counters do not jump, they just did not grow while nobody looked).
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from prometheus_client import CONTENT_TYPE_LATEST

from kvops.errors import UsageError, one_line
from kvops.sim import limits
from kvops.sim.engine import Engine, SimConfig
from kvops.sim.render import Renderer, VllmVersion, histogram_bounds, parse_version
from kvops.sim.workload import PRESETS, Workload, scaled
from kvops.termsafe import visible

MAX_CATCHUP_S = 60.0
_CONFIG_FIELDS = {f.name for f in fields(SimConfig)}


def build_engine(
    seed: int = 0, workload: str = "chat", rate: float = 1.0, length: float = 1.0, **config: Any
) -> Engine:
    """An Engine from plain options (SimConfig fields plus the workload's name and scales)."""
    unknown = set(config) - _CONFIG_FIELDS
    if unknown:
        raise UsageError(f"unknown simulator option(s): {', '.join(sorted(unknown))}")
    if workload not in PRESETS:
        raise UsageError(f"--workload {workload!r}: choose one of {', '.join(PRESETS)}")
    limits.in_range("--rate", rate, 0.0, limits.MAX_RATE)
    limits.in_range("--length", length, 0.0, limits.MAX_LENGTH)
    cfg = SimConfig(**config)
    limits.offload_size("--kv-offloading-size", cfg.kv_offloading_size_gib)
    if cfg.num_gpu_blocks < 1:
        raise UsageError("GPU blocks must be >= 1")
    return Engine(cfg, Workload(scaled(PRESETS[workload], rate, length)), seed, histogram_bounds())


class Sim:
    """One simulated vLLM: engine, renderer, and the mapping from wall clock to engine clock."""

    def __init__(
        self,
        vllm_version: str | VllmVersion = "0.33.0",
        seed: int = 0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        data_parallel_size: int = 1,
        honour_name_filter: bool = False,
        **options: Any,
    ) -> None:
        # A real vLLM's /metrics ignores `?name[]=` (docs/dev/real-vllm-harness.md: prometheus-fastapi-
        # instrumentator's route answers before the make_asgi_app Mount that would honour it), so
        # the simulator serves whole pages too unless asked to behave as that Mount would.
        self.honour_name_filter = honour_name_filter
        self.version = vllm_version if isinstance(vllm_version, VllmVersion) else parse_version(vllm_version)
        if not 1 <= data_parallel_size <= 64:
            raise UsageError("--data-parallel-size must be between 1 and 64")
        # One engine per data-parallel rank, each with its own stream of sessions; rank 0 is
        # the same run as a single-engine simulator with this seed.
        self.engines = [
            build_engine(seed=seed + 1009 * rank, **options) for rank in range(data_parallel_size)
        ]
        self.engine = self.engines[0]
        self.clock = clock
        self.started = clock()
        self.skipped = 0.0
        info = {
            "vllm_version": self.version.text,
            "seed": str(seed),
            "workload": str(options.get("workload", "chat")),
        }
        self.renderer = Renderer(self.engines, self.version, wall(), info)
        self.lock = threading.Lock()

    def advance(self) -> None:
        with self.lock:
            self._advance()

    def _advance(self) -> None:
        target = self.clock() - self.started - self.skipped
        behind = target - self.engine.clock
        if behind > MAX_CATCHUP_S:
            self.skipped += behind - MAX_CATCHUP_S
            target = self.engine.clock + MAX_CATCHUP_S
        for engine in self.engines:
            engine.advance_to(target)

    def metrics(self, names: list[str] | None = None) -> bytes:
        """The page; only the samples `names` names if this simulator honours the filter."""
        with self.lock:
            self._advance()
            return self.renderer.render(names if self.honour_name_filter else None)


class _Handler(BaseHTTPRequestHandler):
    server: _SimHTTPServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        if path == "/metrics":
            names = parse_qs(query).get("name[]")  # whole page unless Sim.honour_name_filter
            self._reply(200, self.server.sim.metrics(names), CONTENT_TYPE_LATEST)
        elif path in ("/health", "/"):
            body = b"" if path == "/health" else b"kvops sim: a simulated vLLM. Metrics at /metrics\n"
            self._reply(200, body, "text/plain; charset=utf-8")
        else:
            self._reply(404, b"not found\n", "text/plain; charset=utf-8")

    def _reply(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a scrape every second would drown stderr


log = logging.getLogger(__name__)


class _SimHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    sim: Sim

    def handle_error(self, request: Any, client_address: Any) -> None:
        """socketserver prints a traceback to stderr for every failed request. A scraper that
        gave up mid-answer (its timeout) is routine: ~1.5 KB of traceback each, enough to fill a
        stderr pipe nobody reads and block the sim (a CI run's sim did not stop on SIGTERM)."""
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError):
            log.debug("a client went away: %s", exc)
            return
        log.warning("request from %s failed: %s", client_address[0], one_line(exc, typed=True))


class _SimHTTPServer6(_SimHTTPServer):
    address_family = socket.AF_INET6


class SimServer:
    """A running simulator: .url, .metrics_url, .sim, .stop()."""

    def __init__(self, httpd: _SimHTTPServer, thread: threading.Thread) -> None:
        self._httpd = httpd
        self._thread = thread
        self.sim = httpd.sim
        host, port = httpd.server_address[:2]
        shown = str(host)
        shown = f"[{shown}]" if ":" in shown else shown
        self.url = f"http://{shown}:{port}"
        self.metrics_url = f"{self.url}/metrics"

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> SimServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start(
    host: str = "127.0.0.1", port: int = 0, vllm_version: str = "0.33.0", seed: int = 0, **model_options: Any
) -> SimServer:
    """Serve a simulated vLLM from a daemon thread; port 0 picks a free port."""
    sim = Sim(vllm_version=vllm_version, seed=seed, **model_options)
    server_cls = _SimHTTPServer6 if ":" in host else _SimHTTPServer
    try:
        httpd = server_cls((host, port), _Handler)
    except OSError as exc:
        raise UsageError(f"cannot listen on {visible(host)}:{port}: {exc.strerror or exc}") from None
    except (TypeError, UnicodeError):  # a host name IDNA cannot encode (a bidi override)
        raise UsageError(f"cannot listen on {visible(host)}:{port}: not a host name") from None
    httpd.sim = sim
    thread = threading.Thread(target=httpd.serve_forever, name=f"kvops-sim:{port}", daemon=True)
    thread.start()
    return SimServer(httpd, thread)
