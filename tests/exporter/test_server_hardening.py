"""The exporter's HTTP server against hostile or careless clients (issue 17, items 4, 5, 7, 11).

Raw sockets over loopback, so each test says exactly what the client sent."""

from __future__ import annotations

import logging
import os
import socket
import ssl
import struct
import threading
import time
from pathlib import Path

import pytest
import requests

import kvops
from kvops.exporter import server as server_module
from kvops.exporter.webconfig import load
from support.upstream import Upstream, body, hang

PAGE = b'vllm:num_requests_running{model_name="m",engine="0"} 3\n'


def connect(url: str) -> socket.socket:
    host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=5)


def read_responses(sock: socket.socket, settle: float = 0.5) -> bytes:
    """Everything the server sends until it is quiet for `settle` seconds or closes."""
    sock.settimeout(settle)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return data
        if not chunk:
            return data
        data += chunk


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_head_is_served_with_headers_and_no_body(upstream: Upstream, make_exporter):
    exp = make_exporter([upstream.route("ok", body(PAGE))])
    head = requests.head(exp.url, timeout=10)
    get = requests.get(exp.url, timeout=10)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["Content-Type"] == get.headers["Content-Type"]
    assert int(head.headers["Content-Length"]) > 0


def test_server_header_names_kvops_and_no_python_version(make_exporter):
    exp = make_exporter([])
    resp = requests.get(exp.url, timeout=10)
    assert resp.headers["Server"] == f"kvops/{kvops.__version__}"
    sock = connect(exp.url)
    sock.sendall(b"BREW / HTTP/1.1\r\nHost: x\r\n\r\n")  # http.server's own error page path
    reply = read_responses(sock)
    sock.close()
    assert reply.startswith(b"HTTP/1.1 501") and b"Python" not in reply
    assert f"Server: kvops/{kvops.__version__}\r\n".encode() in reply


def test_a_get_body_is_consumed_not_parsed_as_a_second_request(make_exporter):
    """A body smuggling a second request (a desync behind a proxy) is read and dropped."""
    exp = make_exporter([])
    smuggled = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
    sock = connect(exp.url)
    sock.sendall(
        b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(smuggled) + smuggled
    )
    first = read_responses(sock)
    assert first.count(b"HTTP/1.1 ") == 1 and first.startswith(b"HTTP/1.1 200"), first
    sock.sendall(b"GET /-/ready HTTP/1.1\r\nHost: x\r\n\r\n")  # the connection is still in step
    second = read_responses(sock)
    sock.close()
    assert second.startswith(b"HTTP/1.1 200") and b"404" not in second


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        (b"Content-Length: 10000000\r\n", b"413"),
        (b"Transfer-Encoding: chunked\r\n", b"400"),
        (b"Content-Length: 5\r\nContent-Length: 7\r\n", b"400"),
        (b"Content-Length: -1\r\n", b"400"),
    ],
)
def test_a_large_chunked_or_ambiguous_body_is_refused_and_closed(make_exporter, headers, status):
    exp = make_exporter([])
    sock = connect(exp.url)
    sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n")
    reply = read_responses(sock, settle=2)
    sock.close()
    assert reply.startswith(b"HTTP/1.1 " + status), reply[:80]
    assert b"Connection: close" in reply


def test_a_client_that_went_away_is_one_debug_line_not_a_traceback(upstream, make_exporter, capfd, caplog):
    exp = make_exporter([upstream.route("slow", hang(0.4))])
    caplog.set_level(logging.DEBUG, logger="kvops")
    for _ in range(5):
        sock = connect(exp.url)
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # a reset while the scrape runs: the answer has nowhere to go
    time.sleep(1.5)
    assert requests.get(exp.url, timeout=10).status_code == 200  # still serving
    err = capfd.readouterr().err
    assert "Traceback" not in err
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]
    gone = [r for r in caplog.records if "ended:" in r.getMessage()]
    assert gone and all(r.levelno == logging.DEBUG for r in gone)


def assert_scrapes_answer_and_held_are_closed(exp, held: list[socket.socket], after: float) -> None:
    """With `held` connections each holding part of a request, a scrape still answers within a
    second; `after` seconds on, each held one was closed by the server, unanswered."""
    began = time.monotonic()
    assert requests.get(exp.url, timeout=5).status_code == 200
    assert time.monotonic() - began < 1.0
    time.sleep(after)
    for sock in held:
        assert read_responses(sock, settle=0.1) == b""  # closed by the server, nothing sent
        sock.close()
    assert exp.server.open_connections <= 1


def test_partial_requests_hold_no_worker_and_are_closed_at_their_deadline(make_exporter, monkeypatch):
    """A slowloris: more half-sent request heads than workers; scrapes still answer at once,
    and the half-sent connections are closed when their head deadline passes."""
    monkeypatch.setattr(server_module, "HEAD_TIMEOUT", 1.0)
    exp = make_exporter([])
    loris = []
    for _ in range(3 * server_module.WORKERS):
        sock = connect(exp.url)
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # no blank line: never complete
        loris.append(sock)
    assert_scrapes_answer_and_held_are_closed(exp, loris, after=2.0)


def test_trickled_request_bodies_hold_no_worker_and_are_closed_at_their_deadline(make_exporter, monkeypatch):
    """More clients than workers send a whole head announcing a small body, then its bytes one
    at a time: scrapes still answer at once (a worker reading the body waited BODY_TIMEOUT for
    each byte), and each trickler is closed at its request's deadline, unanswered."""
    monkeypatch.setattr(server_module, "HEAD_TIMEOUT", 1.5)
    exp = make_exporter([])
    tricklers = []
    for _ in range(2 * server_module.WORKERS):
        sock = connect(exp.url)
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nx")
        tricklers.append(sock)
    time.sleep(0.2)
    for sock in tricklers:
        sock.sendall(b"y")  # still coming, never whole
    assert_scrapes_answer_and_held_are_closed(exp, tricklers, after=2.5)


def test_a_body_sent_in_pieces_within_the_deadline_is_read_whole(make_exporter):
    """Gathering a body before a worker takes it keeps the connection in step: the request
    after a body that came in three pieces is answered as a request of its own."""
    exp = make_exporter([])
    smuggled = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
    sock = connect(exp.url)
    sock.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(smuggled))
    for piece in (smuggled[:5], smuggled[5:20], smuggled[20:]):
        time.sleep(0.2)
        sock.sendall(piece)
    first = read_responses(sock)
    assert first.count(b"HTTP/1.1 ") == 1 and first.startswith(b"HTTP/1.1 200"), first
    sock.sendall(b"GET /-/ready HTTP/1.1\r\nHost: x\r\n\r\n")
    second = read_responses(sock)
    sock.close()
    assert second.startswith(b"HTTP/1.1 200") and b"404" not in second


def test_tls_connections_that_stop_mid_handshake_release_their_descriptors(pki: Path, make_exporter):
    """Partial and abandoned TLS handshakes, and overlapping TLS requests: every socket is
    closed by the server itself, not left in CLOSE_WAIT until a garbage collection."""
    cfg = pki / "web-tls.yml"
    cfg.write_text("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n")
    exp = make_exporter([], web=load(str(cfg)))
    ca = str(pki / "ca.crt")
    assert requests.get(exp.url, verify=ca, timeout=10).status_code == 200
    time.sleep(0.3)
    baseline = open_fds()
    clients = []
    for i in range(60):
        sock = connect(exp.url)
        if i % 3 == 0:
            sock.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a ClientHello cut short
        elif i % 3 == 1:
            ctx = ssl.create_default_context(cafile=ca)
            sock = ctx.wrap_socket(sock, server_hostname="127.0.0.1")
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # a request cut short
        clients.append(sock)
    threads = [
        threading.Thread(target=lambda: requests.get(exp.url, verify=ca, timeout=10)) for _ in range(10)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for sock in clients:
        sock.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (exp.server.open_connections or open_fds() > baseline):
        time.sleep(0.1)
    assert exp.server.open_connections == 0
    assert open_fds() <= baseline


def test_idle_connections_over_the_cap_make_room_for_a_scrape(make_exporter):
    """At the connection cap, the longest-idle connection is closed so a scrape gets in."""
    exp = make_exporter([])
    exp.server.max_connections = 20
    idle = [connect(exp.url) for _ in range(40)]
    time.sleep(0.3)
    began = time.monotonic()
    assert requests.get(exp.url, timeout=5).status_code == 200
    assert time.monotonic() - began < 1.0
    assert exp.server.open_connections <= 20
    for sock in idle:
        sock.close()


def test_connection_threads_return_to_baseline(make_exporter):
    exp = make_exporter([])
    workers = exp.server._workers
    workers.idle_exit = 0.5
    with requests.Session() as session:
        threads = [threading.Thread(target=session.get, args=(exp.url,)) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert 0 < workers.threads <= workers.size
    time.sleep(1.5)
    assert workers.threads == workers.keep  # those kept for the next scrape


def test_a_small_gzipped_answer_is_not_held_for_the_clients_delayed_ack():
    """Head and body were two writes (over TLS they still are); with Nagle on, the body waited
    for the client's delayed ACK, ~40 ms on Linux, on every keep-alive scrape of a gzipped page
    (Prometheus asks for gzip). Twenty scrapes of a tiny page on one connection take far less
    than 20 × 40 ms."""
    from kvops.exporter.encode import Exposition
    from kvops.exporter.server import ExporterServer

    exposition = Exposition(b"kvops_x 1.0\n")
    server = ExporterServer(("127.0.0.1", 0), lambda timeout: exposition, None)
    server.serve_in_thread()
    try:
        with requests.Session() as session:
            session.get(server.url + "/metrics", timeout=10)
            started = time.monotonic()
            for _ in range(20):
                answer = session.get(server.url + "/metrics", headers={"Accept-Encoding": "gzip"}, timeout=10)
                assert answer.headers["Content-Encoding"] == "gzip" and answer.content == b"kvops_x 1.0\n"
            assert time.monotonic() - started < 0.4  # Nagle's stall alone was 20 × 40 ms
    finally:
        server.shutdown()
        server.server_close()


def test_an_idle_exporter_sleeps_until_a_deadline(make_exporter):
    """With a keep-alive connection waiting (its idle deadline 120 s away) and nothing sent, the
    serving loop does not wake: each wake is CPU a cold machine pays for (a 0.5 s poll was two
    wakes a second). A deadline still wakes it: the slowloris tests close connections on time."""
    exp = make_exporter([])
    sock = connect(exp.url)
    sock.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
    assert read_responses(sock, settle=0.3).startswith(b"HTTP/1.1 200")
    selector = exp.server._selector
    calls: list[float | None] = []
    real_select = selector.select

    def counted(timeout: float | None = None):  # type: ignore[no-untyped-def]
        calls.append(timeout)
        return real_select(timeout)

    selector.select = counted
    try:
        time.sleep(1.6)
    finally:
        del selector.select
    assert len(calls) <= 1, calls
    sock.close()
