"""The path of an answer out of the exporter: its pieces handed to the kernel together, and the
connection handed back to the selector by the worker that served it, the loop woken only when
it must see an earlier deadline.

A fake socket stands where the kernel is (the edge of the machine): it takes a set number of
bytes per call and records the calls; the served bytes are checked, not the calls alone."""

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from kvops.exporter import server as server_module
from kvops.exporter.server import ExporterServer, _Connection
from kvops.workers import Workers


class ShortWrites:
    """A non-blocking socket that takes at most `per_call` bytes a call."""

    def __init__(self, per_call: int) -> None:
        self.per_call = per_call
        self.received = bytearray()
        self.calls: list[str] = []

    def setblocking(self, flag: bool) -> None:
        pass

    def send(self, data: memoryview) -> int:
        self.calls.append("send")
        taken = bytes(data[: self.per_call])
        self.received += taken
        return len(taken)

    def sendmsg(self, buffers: list[memoryview]) -> int:
        self.calls.append("sendmsg")
        taken = b"".join(bytes(b) for b in buffers)[: self.per_call]
        self.received += taken
        return len(taken)


def connection(sock: ShortWrites, tls: bool = False) -> _Connection:
    return _Connection(sock, ("127.0.0.1", 1), tls)  # type: ignore[arg-type]


def test_head_and_body_go_to_the_kernel_in_one_call() -> None:
    sock = ShortWrites(per_call=1 << 20)
    conn = connection(sock)
    conn.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
    conn.write(b"hello")
    assert conn.send_pending()
    assert sock.calls == ["sendmsg"]
    assert bytes(sock.received) == b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"


@pytest.mark.parametrize("per_call", [1, 3, 7, 38, 40, 41, 1000])
def test_a_short_gathered_write_resumes_where_the_kernel_stopped(per_call: int) -> None:
    """Partial writes that end inside a piece, on a piece's boundary and past it."""
    pieces = [b"A" * 38, b"B" * 2, b"C" * 17, b"D"]
    sock = ShortWrites(per_call)
    conn = connection(sock)
    for piece in pieces:
        conn.write(piece)
    for _ in range(200):
        if conn.send_pending():
            break
    assert bytes(sock.received) == b"".join(pieces)
    assert not conn.outgoing


def test_tls_sends_piece_by_piece() -> None:
    """An SSLSocket has no sendmsg: a TLS connection sends each piece."""
    sock = ShortWrites(per_call=1 << 20)
    conn = connection(sock, tls=True)
    conn.write(b"head")
    conn.write(b"body")
    assert conn.send_pending()
    assert sock.calls == ["send", "send"]
    assert bytes(sock.received) == b"headbody"


@pytest.fixture
def idle_server() -> Iterator[ExporterServer]:
    server = ExporterServer(("127.0.0.1", 0), lambda timeout: [], None)
    yield server
    server.server_close()


def parked(server: ExporterServer, head_deadline: float | None) -> tuple[bool, socket.socket]:
    ours, theirs = socket.socketpair()
    conn = _Connection(ours, ("127.0.0.1", 1), False)
    conn.head_deadline = head_deadline
    return server._park(conn), theirs


def test_a_connection_handed_back_idle_does_not_wake_the_loop(idle_server: ExporterServer) -> None:
    """The loop waits until its next deadline (here in 60 s); a keep-alive connection idles for
    IDLE_TIMEOUT (120 s), so epoll is told of it and nothing else happens."""
    assert idle_server._live_register  # Linux: epoll
    idle_server._wake_at = time.monotonic() + 60
    wake, peer = parked(idle_server, None)
    assert wake is False
    assert len(idle_server._parked) == 1
    peer.close()


def test_a_deadline_before_the_loops_wakes_it(idle_server: ExporterServer) -> None:
    idle_server._wake_at = time.monotonic() + 60
    wake, peer = parked(idle_server, time.monotonic() + server_module.HEAD_TIMEOUT)
    assert wake is True
    peer.close()


def test_a_selector_without_live_registration_is_always_woken(idle_server: ExporterServer) -> None:
    """poll() and select() wait on the descriptors they were called with."""
    idle_server._live_register = False
    idle_server._wake_at = math.inf
    wake, peer = parked(idle_server, None)
    assert wake is True
    peer.close()


def test_a_connection_handed_back_after_close_is_closed(idle_server: ExporterServer) -> None:
    idle_server.server_close()
    wake, peer = parked(idle_server, None)
    assert wake is False
    assert not idle_server._parked
    peer.settimeout(2)
    assert peer.recv(1) == b""  # our end was closed
    peer.close()


def test_an_http_worker_outlives_a_scrape_interval() -> None:
    """A worker that ended between two scrapes 15 or 60 s apart made each scrape start a thread."""
    server = ExporterServer(("127.0.0.1", 0), lambda timeout: [], None)
    try:
        assert server._workers.keep >= 1
    finally:
        server.server_close()


def test_kept_workers_stay_and_the_rest_end_when_idle() -> None:
    workers = Workers(8, "test", idle_exit=0.05, keep=1)
    release = threading.Event()
    for _ in range(4):  # four at once: four threads
        workers.submit(lambda _: release.wait(5), None)
    deadline = time.monotonic() + 5
    while workers.threads < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert workers.threads == 4
    release.set()
    time.sleep(0.5)  # ten idle_exits
    assert workers.threads == 1  # the kept one; the others ended
    done = threading.Event()
    workers.submit(lambda _: done.set(), None)
    assert done.wait(2)  # the kept worker still serves
    assert workers.threads == 1
    workers.stop()
