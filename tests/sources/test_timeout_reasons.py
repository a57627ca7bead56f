"""A timed-out fetch says which phase timed out (issue 25 item 5).

libcurl reports a connect time of 0 on a connection kept alive from an earlier fetch, so a
target that answered once and then stopped answering on that connection was logged "connect
timed out", and `top --prometheus` against a slow store said the same. Raw loopback servers,
so each test controls exactly where the exchange stops."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from kvops.cli import main
from kvops.scrape.target import TargetScraper
from kvops.transport.http import FetchError, HttpClient

PAGE = b'vllm:num_requests_running{model_name="m",engine="0"} 3\n'


def _answer(conn: socket.socket, body: bytes, content_type: bytes = b"text/plain") -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: " + content_type
                 + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)  # fmt: skip


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return b""
        data += chunk
    return data


class RawServer:
    """Accepts connections and runs `serve(conn, request_number)` for each request on each."""

    def __init__(self, serve: Callable[[socket.socket, int, bytes], bool]) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.serve = serve
        self.requests = 0
        self.connections = 0
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn: socket.socket) -> None:
        with conn:
            while not self.stopped.is_set():
                request = _read_request(conn)
                if not request:
                    return
                self.requests += 1
                if not self.serve(conn, self.requests, request):
                    self.stopped.wait(30)  # hold the connection open, answer nothing more
                    return

    def stop(self) -> None:
        self.stopped.set()
        self.sock.close()


@pytest.fixture
def raw() -> Iterator[Callable[..., RawServer]]:
    made: list[RawServer] = []

    def make(serve: Callable[[socket.socket, int, bytes], bool]) -> RawServer:
        made.append(RawServer(serve))
        return made[-1]

    yield make
    for server in made:
        server.stop()


def _fetch_error(client: HttpClient, url: str, seconds: float) -> str:
    with pytest.raises(FetchError) as err:
        client.fetch_text(url, time.monotonic() + seconds)
    return str(err.value)


def test_a_kept_alive_connection_that_stops_answering_is_not_a_connect_timeout(raw):
    def once_then_silent(conn: socket.socket, n: int, _request: bytes) -> bool:
        if n == 1:
            _answer(conn, PAGE)
            return True
        return False

    server = raw(once_then_silent)
    scraper = TargetScraper(server.url)
    try:
        assert scraper.scrape(time.monotonic() + 2).up
        sample = scraper.scrape(time.monotonic() + 0.5)
        assert server.connections == 1  # the same connection: libcurl kept it alive
        assert not sample.up
        assert sample.error is not None and sample.error.startswith("timed out: no response within 0."), (
            sample.error
        )
        assert sample.error.endswith("on a kept-alive connection")
    finally:
        scraper.close()


def test_a_new_connection_without_an_answer_and_a_stalled_body(raw):
    silent = raw(lambda conn, n, request: False)
    client = HttpClient()
    try:
        reason = _fetch_error(client, silent.url + "/metrics", 0.5)
        assert reason.startswith("timed out: no response within 0.") and "kept-alive" not in reason, reason
    finally:
        client.close()

    def half_a_body(conn: socket.socket, n: int, _request: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10)
        return False

    stalled = raw(half_a_body)
    client = HttpClient()
    try:
        reason = _fetch_error(client, stalled.url + "/metrics", 0.5)
        assert reason.startswith("timed out: body stalled at 10 bytes after 0."), reason
    finally:
        client.close()


def test_a_connect_that_never_completes_is_a_connect_timeout():
    """A listener whose accept queue is full: Linux drops the SYN, the connect hangs."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    address = listener.getsockname()
    fillers = []
    try:
        for _ in range(8):  # fill the queue (its length is backlog + 1, give or take)
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(address)
            fillers.append(filler)
        time.sleep(0.2)
        client = HttpClient()
        try:
            reason = _fetch_error(client, f"http://127.0.0.1:{address[1]}/metrics", 0.5)
        finally:
            client.close()
        assert reason.startswith("connect timed out after 0."), reason
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def _store_then_silent(conn: socket.socket, n: int, _request: bytes) -> bool:
    """A Prometheus query API that answers the newest-sample queries (no kvops_* series, a
    vllm:* one), then nothing: the next query waits on the kept-alive connection."""
    if n > 2:
        return False
    result = [] if n == 1 else [{"metric": {}, "value": [100, "100"]}]
    doc = {"status": "success", "data": {"resultType": "vector", "result": result}}
    _answer(conn, json.dumps(doc).encode(), b"application/json")
    return True


def test_a_slow_store_is_reported_with_the_phase_that_timed_out(raw, capsys, monkeypatch):
    from kvops.frames import prometheus

    monkeypatch.setattr(prometheus, "ONE_SHOT_SECONDS", 1.0)  # --once's 30 s for a store
    server = raw(_store_then_silent)
    code = main(["top", "--once", "--json", "--prometheus", server.url])
    captured = capsys.readouterr()
    assert server.connections <= 3  # the two newest-sample queries at once, then the interval's
    assert "connect timed out" not in captured.err + captured.out
    assert "no response within" in captured.err + captured.out, (code, captured.err, captured.out)
