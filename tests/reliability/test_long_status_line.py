"""A target whose status line is 200 KB long (issue 41, low item): libcurl fails it on a multi
handle without a message, and the target showed as "down: str" (the type's name). The reason
now names libcurl's error code, and what is shown of any libcurl message is bounded."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pycurl
import pytest

from kvops.transport.http import MAX_REASON_CHARS, FetchError, HttpClient, curl_code_text


@pytest.fixture
def long_status_target() -> Iterator[str]:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                try:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 200 " + b"A" * 200_000 + b"\r\nContent-Length: 2\r\n\r\nok")
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(timeout=5)
    listener.close()


def test_kvops_top_names_libcurls_error_for_a_200_kb_status_line(long_status_target):
    proc = subprocess.run(
        [sys.executable, "-m", "kvops.cli", "top", "--once", "--json", "--interval", "0.2",
         long_status_target],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # every target down (docs/DESIGN.md); the JSON still comes
    [row] = json.loads(proc.stdout)["targets"]
    assert row["up"] is False
    assert row["error"] != "str", row
    if pycurl.version_info()[2] >= 0x080600:  # libcurl 8.6+ fails a header over its cap with code 100
        assert row["error"] == "libcurl error 100 (CURLE_TOO_LARGE)", row
    assert len(row["error"]) <= 300


def test_the_blocking_fetch_says_libcurls_words_bounded(long_status_target):
    with pytest.raises(FetchError) as info:
        HttpClient().fetch_text(long_status_target + "/metrics", time.monotonic() + 5)
    assert str(info.value) and str(info.value) != "str" and len(str(info.value)) <= 300


def test_an_error_without_a_message_names_its_code():
    client = HttpClient()
    try:
        reason = client._reason(pycurl.error(100, ""), _empty_body())
        assert reason == "libcurl error 100 (CURLE_TOO_LARGE)"
        assert (
            client._reason(pycurl.error(56, "  "), _empty_body())
            == "connection broken: libcurl error 56 (CURLE_RECV_ERROR)"
        )
        assert client._reason(pycurl.error(4242, ""), _empty_body()) == "libcurl error 4242"
        long = client._reason(pycurl.error(8, "Weird " + "x" * 200_000), _empty_body())
        assert len(long) <= MAX_REASON_CHARS + 40
    finally:
        client.close()
    assert curl_code_text(None) == "libcurl error without a code"


def _empty_body():
    from kvops.transport.http import _Body

    return _Body(1024)
