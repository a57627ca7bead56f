"""HTTP(S) server for `kvops exporter`: /metrics, a landing page, TLS and basic auth.

prometheus_client's start_http_server has TLS but no basic auth and no per-request scrape
timeout, and http.server gives every connection a thread for as long as it stays open
(~250 idle connections exhausted a 256-fd limit and every scrape timed out). So:

- One thread waits on all connections with a selector. An idle keep-alive connection costs
  a file descriptor, no thread; it is closed after IDLE_TIMEOUT, and the oldest idle one is
  closed first when the connection cap (from the fd limit) is reached. A worker done with a
  connection registers it in the selector itself (epoll sees it), so an answered scrape does
  not wake the selector thread.
- A connection goes to a worker (a bounded pool, kvops.workers) only when it has
  sent a whole request head, and the small body it announces; a client trickling its headers
  (slowloris), its body or its TLS handshake holds no worker and is closed at its deadline.
- Request parsing and replies are http.server's BaseHTTPRequestHandler, driven one request
  at a time over our buffer. Request bodies are consumed up to a small size or refused.
- An answer is written without waiting: what the socket cannot take yet stays with the
  connection, which waits in the selector to be writable, so a client that asks and never
  reads holds no worker (twenty such clients held all of them for 30 s each). The unsent
  answer is dropped at the scrape's deadline (X-Prometheus-Scrape-Timeout-Seconds, else
  WRITE_TIMEOUT), and a run of pipelined requests is cut at MAX_PIPELINED answers.
- Every socket is closed explicitly on every path, TLS included; a client that went away is
  one debug line, never a traceback.

The /metrics handler reads X-Prometheus-Scrape-Timeout-Seconds and keeps the whole scrape
under it, then renders with kvops.exporter.encode (byte-equal to prometheus_client's
generate_latest, a third of its cost).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import math
import re
import resource
import selectors
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kvops import __version__
from kvops.errors import UsageError, one_line
from kvops.exporter.compress import accepts_gzip
from kvops.exporter.encode import Exposition, encode
from kvops.exporter.webconfig import WebConfig
from kvops.termsafe import visible
from kvops.workers import Workers

log = logging.getLogger(__name__)

# Leave Prometheus this much of its scrape timeout to receive and store the answer.
SCRAPE_TIMEOUT_MARGIN = 0.5
BACKLOG = 128  # http.server's 5 made a burst of scrapers wait ~1 s for a retransmitted SYN
WORKERS = 16  # requests served at once; more queue (their scrapes share one round anyway)
IDLE_TIMEOUT = 120.0  # a keep-alive connection with no request for this long is closed
# Workers kept however long a scraper stays away (kvops.workers): a Prometheus scraping every
# 15 or 60 s then finds one waiting; the others end 5 s after a flood, back to that one.
WORKERS_KEPT = 1
HEAD_TIMEOUT = 10.0  # from a request's first byte (or a TLS connection's accept) to its whole head and body
BODY_TIMEOUT = 10.0  # to read an accepted request body
WRITE_TIMEOUT = 30.0  # to send a whole answer when the request names no scrape timeout
MAX_PIPELINED = 8  # answers in a row to requests sent before the previous answer; then close
MAX_HEAD_BYTES = 64 * 1024
MAX_REQUEST_BODY = 64 * 1024  # a GET body is read and dropped up to this size, refused above
FD_RESERVE = 64  # descriptors kept for upstream fetches, logs and collectors
MAX_CONNECTIONS = 10_000
# The loop sleeps until its next deadline; these bound one wait (shutdown, and a hand-back with an
# earlier deadline, wake it).
_MIN_WAIT = 0.001
_MAX_WAIT = 60.0
_MAX_GATHER = 64  # pieces a sendmsg is given at most (IOV_MAX is 1024 on Linux)
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_CONTENT_LENGTH = re.compile(rb"^content-length:[ \t]*([0-9]{1,7})[ \t]*\r?$", re.IGNORECASE | re.MULTILINE)


def _request_buffered(buffer: bytearray) -> bool:
    """True when `buffer` begins with a whole request: its head, then the body its one
    Content-Length announces (up to MAX_REQUEST_BODY). A body the handler refuses unread
    (too large, chunked, two lengths, not a number) needs nothing more. A worker reading a
    body could wait BODY_TIMEOUT for each of its bytes: sixteen clients trickling bodies
    held every worker, so a body is gathered here, under the request's head deadline."""
    end = _HEAD_END.search(buffer)
    if end is None:
        return False
    lengths = {int(n) for n in _CONTENT_LENGTH.findall(buffer, 0, end.end())}
    if len(lengths) != 1 or (size := lengths.pop()) > MAX_REQUEST_BODY:
        return True
    return len(buffer) >= end.end() + size


LANDING = b"""<html><head><title>kvops exporter</title></head><body>
<h1>kvops exporter</h1><p>vLLM KV-cache offloading metrics.</p>
<p><a href="/metrics">Metrics</a></p></body></html>
"""


def parse_listen(value: str) -> tuple[str, int]:
    """HOST:PORT, :PORT (all interfaces) or [v6]:PORT."""
    host, sep, port = value.rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()) or not 0 <= int(port) <= 65535:
        raise UsageError(f"--listen {visible(value)!r}: expected HOST:PORT, e.g. 0.0.0.0:19435")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


# What Prometheus sends (strconv.FormatFloat of a duration's seconds): ASCII digits only, as
# float() would also take "١٠", "1_0", "inf" and "nan".
_TIMEOUT_HEADER_RE = re.compile(r"[ \t]*+([0-9]++(?:\.[0-9]*+)?+(?:[eE][+-]?+[0-9]++)?+)[ \t]*+")


def scrape_timeout(header: str | None) -> float | None:
    """The scrape budget from X-Prometheus-Scrape-Timeout-Seconds, less a margin for the
    answer's trip; None (no budget) for a missing or unreadable header."""
    m = _TIMEOUT_HEADER_RE.fullmatch(header or "")
    if m is None:
        return None
    seconds = float(m.group(1))
    if not math.isfinite(seconds):  # 1e400
        return None
    return max(0.1, seconds - SCRAPE_TIMEOUT_MARGIN)


def send_budget(header: str | None) -> float:
    """Seconds from a request to the last byte of its answer: the scraper's own timeout (it
    has hung up by then), else WRITE_TIMEOUT; at least 1 s, at most WRITE_TIMEOUT."""
    m = _TIMEOUT_HEADER_RE.fullmatch(header or "")
    if m is None:
        return WRITE_TIMEOUT
    seconds = float(m.group(1))
    return max(1.0, min(seconds, WRITE_TIMEOUT)) if math.isfinite(seconds) else WRITE_TIMEOUT


def connection_cap() -> int:
    """Open client connections allowed: the fd limit less a reserve for everything else."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(8, min(MAX_CONNECTIONS, soft - FD_RESERVE))


class _Connection:
    """One client connection and what has been read from it but not yet parsed."""

    def __init__(self, sock: socket.socket, address: Any, tls: bool) -> None:
        self.sock = sock
        self.address = address
        self.buffer = bytearray()
        self.handshake_done = not tls
        self.idle_since = time.monotonic()
        # Set when a request (or a TLS handshake) has begun and must be complete by then.
        self.head_deadline: float | None = time.monotonic() + HEAD_TIMEOUT if tls else None
        self.handler: _Handler | None = None
        self.closed = False
        self.outgoing: deque[memoryview] = deque()  # answer bytes the socket has not taken yet
        self.send_deadline = 0.0  # when the unsent answer is given up (with the connection)
        self.wants = selectors.EVENT_READ  # what the selector waits for: bytes in, or room out
        self.close_after_send = False
        self.pipelined = 0  # answers in a row whose next request was already buffered
        self.gathers = not tls  # an SSLSocket has no sendmsg

    @property
    def who(self) -> str:
        host = self.address[0] if isinstance(self.address, tuple) else self.address
        return visible(str(host))

    def pending(self) -> bool:
        """Bytes already read (or decrypted) that the selector would not report."""
        if self.buffer:
            return True
        return isinstance(self.sock, ssl.SSLSocket) and self.sock.pending() > 0

    def gather(self) -> str:
        """Read what the socket has without waiting, until a whole request is buffered (its
        head, and the body its Content-Length announces where a worker would read one):
        'complete', 'wait' (nothing more yet), 'eof' or 'too large'."""
        self.sock.setblocking(False)
        while not _request_buffered(self.buffer):
            if len(self.buffer) > MAX_HEAD_BYTES + MAX_REQUEST_BODY:
                return "too large"
            if len(self.buffer) > MAX_HEAD_BYTES and not _HEAD_END.search(self.buffer):
                return "too large"
            try:
                data = self.sock.recv(65536)
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return "wait"
            if not data:
                return "eof"
            if not self.buffer and self.head_deadline is None:
                self.head_deadline = time.monotonic() + HEAD_TIMEOUT
            self.buffer += data
        return "complete"

    # The file-like side BaseHTTPRequestHandler reads and writes through.
    def readline(self, limit: int = -1) -> bytes:
        while True:
            end = self.buffer.find(b"\n", 0, limit if limit > 0 else None)
            if end >= 0:
                return self._take(end + 1)
            if 0 < limit <= len(self.buffer):
                return self._take(limit)
            if not self._fill():
                return self._take(len(self.buffer))

    def read(self, size: int) -> bytes:
        while len(self.buffer) < size and self._fill():
            pass
        return self._take(min(size, len(self.buffer)))

    def _take(self, n: int) -> bytes:
        data = bytes(self.buffer[:n])
        del self.buffer[:n]
        return data

    def _fill(self) -> bool:
        self.sock.settimeout(BODY_TIMEOUT)
        data = self.sock.recv(65536)
        self.buffer += data
        return bool(data)

    def write(self, data: bytes) -> None:
        if data:
            self.outgoing.append(memoryview(data))

    def send_pending(self) -> bool:
        """Hand the kernel what it takes of the unsent answer without waiting; True when all
        of it is sent, else `wants` says which event lets it go on. Over plain TCP the pieces
        (an answer's head, its body) go in one sendmsg: one trip through loopback's TCP
        stack, and one segment for the client to wake for, instead of one a piece."""
        self.sock.setblocking(False)
        outgoing = self.outgoing
        while outgoing:
            try:
                if self.gathers and len(outgoing) > 1:
                    sent = self.sock.sendmsg(list(itertools.islice(outgoing, _MAX_GATHER)))
                else:
                    sent = self.sock.send(outgoing[0])
            except (BlockingIOError, ssl.SSLWantWriteError):
                self.wants = selectors.EVENT_WRITE
                return False
            except ssl.SSLWantReadError:  # TLS needs the peer's bytes first
                self.wants = selectors.EVENT_READ
                return False
            while sent:  # drop what was sent: whole pieces, then the front of a piece
                head = outgoing[0]
                if sent < len(head):
                    outgoing[0] = head[sent:]
                    break
                sent -= len(head)
                outgoing.popleft()
        self.wants = selectors.EVENT_READ
        return True

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(OSError):
                self.sock.close()


class ExporterServer:
    """Serves until shutdown(); server_close() then releases every socket."""

    def __init__(
        self,
        address: tuple[str, int],
        scrape: Callable[[float | None], list[Any] | Exposition],
        web: WebConfig | None = None,
        workers: int = WORKERS,
        max_connections: int | None = None,
    ) -> None:
        self.scrape = scrape
        self.web = web or WebConfig()
        self.max_connections = max_connections or connection_cap()
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        shown = visible(f"{address[0]}:{address[1]}")  # --listen is shown back in a terminal
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(address)
            listener.listen(BACKLOG)
        except OSError as exc:
            listener.close()
            raise UsageError(f"cannot listen on {shown}: {exc.strerror or exc}") from None
        except OverflowError:  # a port above 65535 that bypassed parse_listen
            listener.close()
            raise UsageError(f"cannot listen on {shown}: bad port") from None
        except (TypeError, UnicodeError):  # a host name IDNA cannot encode (a bidi override)
            listener.close()
            raise UsageError(f"cannot listen on {shown}: not a host name") from None
        listener.setblocking(False)
        self._listener = listener
        self.server_address = listener.getsockname()
        self._workers = Workers(workers, "kvops-http", keep=WORKERS_KEPT)
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._parked: dict[_Connection, None] = {}  # waited on, oldest first
        self._lock = threading.Lock()  # the open-connection count
        # The selector's registrations, _parked, _next_sweep and _wake_at, changed by the loop
        # and by workers handing a connection back (_park).
        self._park_lock = threading.Lock()
        # epoll sees a registration made while the loop waits in it: a worker parks a
        # connection itself and wakes the loop only for a deadline before the loop's own
        # (poll and select wait on the set they were called with: always woken).
        self._live_register = isinstance(self._selector, selectors.EpollSelector)
        self._wake_at = math.inf  # when the loop's current wait ends at the latest
        self._open = 0
        self._stopping = False
        self._stopped = threading.Event()
        self._serving = False
        self._closed = False
        self._listener_paused_until = 0.0
        self._next_sweep = math.inf  # the earliest deadline of a waiting connection (_expiry)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        scheme = "https" if self.web.ssl_context else "http"
        shown = f"[{host}]" if ":" in str(host) else host
        return f"{scheme}://{shown}:{port}"

    @property
    def open_connections(self) -> int:
        return self._open

    def serve_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="kvops-exporter", daemon=True)
        thread.start()
        return thread

    def serve_forever(self) -> None:
        if self._stopping:
            return
        self._serving = True
        sel = self._selector
        sel.register(self._listener, selectors.EVENT_READ, "listen")
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        listening = True
        try:
            while not self._stopping:
                now = time.monotonic()
                if not listening and now >= self._listener_paused_until:
                    sel.register(self._listener, selectors.EVENT_READ, "listen")
                    listening = True
                # Woken by a socket, the wake pipe (shutdown, a hand-back due sooner), or the
                # earliest deadline of a waiting connection: an idle exporter does not poll.
                with self._park_lock:
                    wake_at = min(self._next_sweep, math.inf if listening else self._listener_paused_until)
                    wait = min(max(wake_at - now, _MIN_WAIT), _MAX_WAIT)
                    self._wake_at = now + wait
                for key, _ in sel.select(timeout=wait):
                    if key.data == "listen":
                        if not self._accept():
                            sel.unregister(self._listener)
                            listening = False
                    elif key.data == "wake":
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(4096)
                    else:
                        self._dispatch(key.data)
                now = time.monotonic()
                if now >= self._next_sweep:  # a pass over every connection: not per event
                    self._sweep(now)
        finally:
            self._stopped.set()

    def _accept(self) -> bool:
        """Accept what is waiting. False when out of descriptors with nothing to evict: the
        listener then rests briefly (else it stays readable and the loop spins a core)."""
        for _ in range(256):  # then let the other sockets have a turn
            try:
                sock, address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return True
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    if self._evict_oldest():
                        continue
                    log.warning("out of file descriptors with every connection busy: %s", exc.strerror)
                    self._listener_paused_until = time.monotonic() + 0.1
                    return False
                log.debug("accept: %s", one_line(exc))  # ECONNABORTED and the like
                continue
            with self._lock:
                self._open += 1
                over = self._open > self.max_connections
            if over and not self._evict_oldest():
                log.debug("connection cap %d reached; refusing %s", self.max_connections, address)
                sock.close()
                self._count_closed()
                continue
            # Over TLS the head and the body are two writes (and a large answer several over
            # TCP): without TCP_NODELAY, Nagle holds the second until the client's delayed
            # ACK, 40 ms on Linux, every scrape.
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tls = self.web.ssl_context is not None
            if tls:
                assert self.web.ssl_context is not None
                try:
                    sock = self.web.ssl_context.wrap_socket(
                        sock, server_side=True, do_handshake_on_connect=False
                    )
                except (OSError, ValueError) as exc:
                    log.debug("TLS with %s: %s", address, one_line(exc))
                    sock.close()
                    self._count_closed()
                    continue
            sock.setblocking(False)
            self._park(_Connection(sock, address, tls))
        return True

    def _count_closed(self) -> None:
        with self._lock:
            self._open -= 1

    def _close(self, conn: _Connection) -> None:
        if not conn.closed:
            conn.close()
            self._count_closed()

    def _park(self, conn: _Connection) -> bool:
        """Wait (in the selector) for the connection's next bytes, or for room to send: from
        the loop, or from the worker that served it. True when the loop must be woken to
        see its deadline: one before the end of the loop's current wait."""
        with self._park_lock:
            if not (self._closed or self._stopping):
                try:
                    self._selector.register(conn.sock, conn.wants, conn)
                except (OSError, ValueError) as exc:  # closed under us
                    log.debug("connection from %s: %s", conn.who, one_line(exc))
                else:
                    self._parked[conn] = None
                    expiry = _expiry(conn)
                    self._next_sweep = min(self._next_sweep, expiry)
                    return not self._live_register or expiry < self._wake_at
        self._close(conn)
        return False

    def _unpark(self, conn: _Connection) -> None:
        with self._park_lock:
            self._unpark_locked(conn)

    def _unpark_locked(self, conn: _Connection) -> None:
        self._parked.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(conn.sock)

    def _dispatch(self, conn: _Connection) -> None:
        self._unpark(conn)
        self._workers.submit(self._work, conn)

    def _evict_oldest(self) -> bool:
        """Close the connection that has waited longest for its next bytes (no worker holds it)."""
        with self._park_lock:
            conn = next(iter(self._parked), None)  # insertion order: the longest-waiting first
            if conn is None:
                return False
            self._unpark_locked(conn)
        log.debug("closing idle connection from %s to make room", conn.who)
        self._close(conn)
        return True

    def _sweep(self, now: float) -> None:
        with self._park_lock:
            expired = [c for c in self._parked if _expiry(c) <= now]
            for conn in expired:
                self._unpark_locked(conn)
            self._next_sweep = min((_expiry(c) for c in self._parked), default=math.inf)
        for conn in expired:
            log.debug("closing connection from %s: timed out", conn.who)
            self._close(conn)

    def _hand_back(self, conn: _Connection) -> None:
        """From a worker: the connection waits in the loop's selector again. Registered here,
        not passed to the loop through the wake pipe: a scrape's answer then costs no wake of
        the loop (a syscall each side, a thread switch, a pass of the loop)."""
        if self._park(conn):
            with contextlib.suppress(OSError):  # a full wake pipe already means "look"
                self._wake_w.send(b"x")

    def _work(self, conn: _Connection) -> None:
        """A worker's turn with a ready connection: finish the TLS handshake, go on with an
        unsent answer, serve every whole request buffered, then hand the connection back (to
        wait for bytes in, or for room to send) or close it."""
        try:
            if not conn.handshake_done and not self._handshake(conn):
                self._hand_back(conn)
                return
            if conn.outgoing and not conn.send_pending():
                self._hand_back(conn)
                return
            if conn.close_after_send:
                self._close(conn)
                return
            while True:
                state = conn.gather()
                if state == "wait":
                    self._hand_back(conn)
                    return
                if state != "complete":
                    if state == "too large":  # one try: the connection closes either way
                        conn.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                                   b"Connection: close\r\nContent-Length: 0\r\n\r\n")  # fmt: skip
                        conn.send_pending()
                    break
                handler = conn.handler or _Handler(conn, self)
                conn.handler = handler
                handler.last_in_run = conn.pipelined + 1 >= MAX_PIPELINED
                began = time.monotonic()
                handler.handle_one_request()
                conn.idle_since = time.monotonic()
                headers = getattr(handler, "headers", None)
                conn.send_deadline = began + send_budget(
                    headers.get("X-Prometheus-Scrape-Timeout-Seconds") if headers is not None else None
                )
                # A pipelined request already begun must be whole by its own deadline.
                conn.head_deadline = conn.idle_since + HEAD_TIMEOUT if conn.buffer else None
                conn.pipelined = conn.pipelined + 1 if conn.buffer else 0
                sent = conn.send_pending()
                if handler.close_connection:
                    if sent:
                        break
                    conn.close_after_send = True
                    self._hand_back(conn)
                    return
                if not sent or not conn.pending():
                    self._hand_back(conn)
                    return
        except OSError as exc:  # reset, broken pipe, timeout, TLS alert: the client went away
            log.debug("connection from %s ended: %s", conn.who, one_line(exc))
        except Exception:
            log.exception("serving %s failed", conn.who)
        self._close(conn)

    def _handshake(self, conn: _Connection) -> bool:
        """One step of a non-blocking TLS handshake; False while it needs more bytes."""
        assert isinstance(conn.sock, ssl.SSLSocket)
        conn.sock.setblocking(False)
        try:
            conn.sock.do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return False
        conn.handshake_done = True
        conn.head_deadline = None
        conn.idle_since = time.monotonic()
        return True

    def shutdown(self) -> None:
        """Stop serving; returns when the serving loop has ended (at once if it never ran)."""
        self._stopping = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._serving:
            self._stopped.wait(timeout=5)

    def server_close(self) -> None:
        self.shutdown()
        with self._park_lock:  # a worker parking from now on closes its connection instead
            self._closed = True
            parked = list(self._parked)
            for conn in parked:
                self._unpark_locked(conn)
        for conn in self._workers.stop():
            self._close(conn)
        for conn in parked:
            self._close(conn)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(self._listener)
        self._listener.close()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()


def _expiry(conn: _Connection) -> float:
    """When a waiting connection is closed: its deadline to take its answer, to finish a
    request it began, or to send one at all (idle). Fixed while it waits: only a worker
    changes a connection's deadlines, and no worker holds a waiting one."""
    if conn.outgoing:
        return conn.send_deadline
    if conn.head_deadline is not None:
        return conn.head_deadline
    return conn.idle_since + IDLE_TIMEOUT


class _Handler(BaseHTTPRequestHandler):
    """http.server's request parsing and replies, one request per handle_one_request() call
    over a _Connection (StreamRequestHandler's setup/handle/finish are not used)."""

    server: ExporterServer  # type: ignore[assignment]
    protocol_version = "HTTP/1.1"

    def __init__(self, conn: _Connection, server: ExporterServer) -> None:  # no super(): no handle()
        self.conn = conn
        self.request = conn.sock
        self.client_address = conn.address
        self.server = server
        self.rfile = conn  # type: ignore[assignment]
        self.wfile = conn  # type: ignore[assignment]
        self.close_connection = True
        self._head_only = False
        self.last_in_run = False  # the MAX_PIPELINED-th pipelined answer: it says close

    def version_string(self) -> str:
        return f"kvops/{__version__}"  # not the Python version http.server would add

    def do_GET(self) -> None:
        self._head_only = False
        self._route()

    def do_HEAD(self) -> None:
        self._head_only = True
        self._route()

    def _route(self) -> None:
        if not self._consume_body():
            return
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

    def _consume_body(self) -> bool:
        """Read and drop a small request body so it is not taken for the next request (a
        desync behind a proxy); refuse a large or chunked one and close. False if refused."""
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            self._send(400, b"request bodies are not accepted\n", "text/plain", {"Connection": "close"})
            return False
        lengths = self.headers.get_all("Content-Length") or []
        if not lengths:
            return True
        text = lengths[0].strip()
        if len(set(lengths)) > 1 or not (text.isascii() and text.isdigit()):
            self.close_connection = True
            self._send(400, b"bad Content-Length\n", "text/plain", {"Connection": "close"})
            return False
        size = int(text)
        if size > MAX_REQUEST_BODY:
            self.close_connection = True
            self._send(413, b"request body too large\n", "text/plain", {"Connection": "close"})
            return False
        if len(self.conn.read(size)) < size:
            self.close_connection = True  # the client went away mid-body
            return False
        return True

    def _metrics(self) -> None:
        timeout = scrape_timeout(self.headers.get("X-Prometheus-Scrape-Timeout-Seconds"))
        try:
            answer = self.server.scrape(timeout)
            exposition = answer if isinstance(answer, Exposition) else Exposition(encode(answer))
        except Exception:
            # Every source has its own boundary; reaching here is a kvops bug. Say so plainly.
            log.exception("rendering /metrics failed")
            self._send(500, b"kvops: internal error rendering metrics\n", "text/plain")
            return
        headers = {}
        body = exposition.plain
        if accepts_gzip(", ".join(self.headers.get_all("Accept-Encoding") or [])):
            body = exposition.gzipped()
            headers["Content-Encoding"] = "gzip"
        self._send(200, body, CONTENT_TYPE_LATEST, headers)

    def _send(self, code: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if self.last_in_run and not self.close_connection:
            self.send_header("Connection", "close")  # http.server then closes after this answer
        self.end_headers()
        if not self._head_only:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.conn.who, visible(format % args))
