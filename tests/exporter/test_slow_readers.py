"""Clients that ask for /metrics and never read the answer (issue 41, item 6).

Twenty connections that pipelined GET /metrics and never read held the exporter's workers in a
blocking send for 30 s each; a well-behaved scraper with a 10 s timeout then failed 2-5 of 10
scrapes. Now a worker never waits on a reader: an answer the socket cannot take is parked in the
selector until the scrape's own deadline, and a connection answers a bounded run of pipelined
requests. Raw sockets on loopback, the real server."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
import requests

from kvops.exporter import server as server_module
from kvops.exporter.encode import Exposition
from kvops.exporter.server import ExporterServer

# Larger than the kernel's socket buffers on both sides (loopback autotunes to a few MiB), so
# an answer nobody reads cannot all be handed to the kernel.
BIG = Exposition(b"".join(b'kvops_filler{i="%07d"} 1.0\n' % i for i in range(300_000)))
REQUEST = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.fixture
def big_server() -> Iterator[ExporterServer]:
    server = ExporterServer(("127.0.0.1", 0), lambda timeout: BIG, None)
    server.serve_in_thread()
    yield server
    server.shutdown()
    server.server_close()


def non_reader(server: ExporterServer, requests_sent: int, extra: bytes = b"") -> socket.socket:
    host, port = server.server_address[:2]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fills at once
    sock.connect((host, port))
    request = REQUEST.replace(b"\r\n\r\n", b"\r\n" + extra + b"\r\n") if extra else REQUEST
    sock.sendall(request * requests_sent)
    return sock


def cut_short(sock: socket.socket, after: float) -> bool:
    """Whether the server had closed the connection `after` seconds without reading, before the
    whole answer was sent: what it did send is drained, then its end is expected."""
    time.sleep(after)
    sock.settimeout(2.0)
    received = 0
    try:
        while chunk := sock.recv(1 << 20):
            received += len(chunk)
    except ConnectionResetError:
        pass
    except TimeoutError:
        return False  # still open
    return received < len(BIG.plain)


def test_non_reading_clients_do_not_delay_a_well_behaved_scraper(big_server):
    hostile = [non_reader(big_server, 3) for _ in range(20)]  # more than the 16 workers
    try:
        time.sleep(1.0)  # every hostile request has been answered into a full socket
        for _ in range(10):
            began = time.monotonic()
            answer = requests.get(big_server.url + "/metrics", timeout=10,
                                  headers={"X-Prometheus-Scrape-Timeout-Seconds": "10"})  # fmt: skip
            assert answer.status_code == 200 and answer.content == BIG.plain
            assert time.monotonic() - began < 2.0
    finally:
        for sock in hostile:
            sock.close()


def test_an_unread_answer_is_dropped_at_the_scrapes_deadline(big_server):
    """The scrape's own budget (X-Prometheus-Scrape-Timeout-Seconds) bounds the send: Prometheus
    has given up by then."""
    sock = non_reader(big_server, 1, b"X-Prometheus-Scrape-Timeout-Seconds: 1\r\n")
    time.sleep(0.5)
    assert big_server.open_connections == 1
    assert cut_short(sock, after=1.5)
    sock.close()


def test_without_a_budget_the_send_is_bounded_by_the_write_timeout(big_server, monkeypatch):
    monkeypatch.setattr(server_module, "WRITE_TIMEOUT", 1.0)
    sock = non_reader(big_server, 1)
    assert cut_short(sock, after=1.5)
    sock.close()
    deadline = time.monotonic() + 2
    while big_server.open_connections and time.monotonic() < deadline:
        time.sleep(0.05)
    assert big_server.open_connections == 0


def test_a_run_of_pipelined_requests_is_capped_and_the_last_answer_says_close():
    small = Exposition(b"kvops_x 1.0\n")
    served = []
    server = ExporterServer(("127.0.0.1", 0), lambda timeout: served.append(1) or small, None)
    server.serve_in_thread()
    try:
        sock = socket.create_connection(server.server_address[:2], timeout=5)
        sock.sendall(REQUEST * 1000)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
        sock.close()
    finally:
        server.shutdown()
        server.server_close()
    cap = server_module.MAX_PIPELINED
    assert reply.count(b"HTTP/1.1 200 OK\r\n") == cap == len(served)
    assert reply.count(b"Connection: close\r\n") == 1
    assert reply.rindex(b"Connection: close\r\n") > reply.rindex(b"HTTP/1.1 200 OK\r\n")


def test_requests_one_after_another_on_a_keep_alive_connection_are_not_capped():
    small = Exposition(b"kvops_x 1.0\n")
    server = ExporterServer(("127.0.0.1", 0), lambda timeout: small, None)
    server.serve_in_thread()
    try:
        with requests.Session() as session:
            for _ in range(3 * server_module.MAX_PIPELINED):
                answer = session.get(server.url + "/metrics", timeout=10)
                assert answer.status_code == 200 and "close" not in answer.headers.get("Connection", "")
        assert server.open_connections <= 1
    finally:
        server.shutdown()
        server.server_close()


def test_a_large_answer_over_tls_arrives_whole(pki):
    """The unblocking send over TLS: partial writes and want-write retries keep the bytes whole."""
    from kvops.exporter.webconfig import load

    cfg = pki / "web-tls-big.yml"
    cfg.write_text("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n")
    server = ExporterServer(("127.0.0.1", 0), lambda timeout: BIG, load(str(cfg)))
    server.serve_in_thread()
    try:
        with requests.Session() as session:
            for _ in range(3):
                answer = session.get(server.url + "/metrics", verify=str(pki / "ca.crt"), timeout=10)
                assert answer.status_code == 200 and answer.content == BIG.plain
    finally:
        server.shutdown()
        server.server_close()
