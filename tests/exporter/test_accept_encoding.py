"""Accept-Encoding's weights are honoured (RFC 9110 §12.5.3; issue 41, low item): the exporter
answered `gzip;q=0` with gzip, as it looked only for the word."""

from __future__ import annotations

import gzip
import socket

import pytest

from kvops.exporter.compress import accepts_gzip
from kvops.exporter.encode import Exposition
from kvops.exporter.server import ExporterServer

PAGE = b"kvops_x 1.0\n"


@pytest.mark.parametrize(
    ("header", "gzip_sent"),
    [
        ("gzip", True),  # what Prometheus sends
        ("GZIP", True),
        ("x-gzip", True),
        ("gzip, deflate, br", True),
        ("gzip;q=1.0, identity;q=0.5", True),
        ("*", True),
        ("gzip;q=0", False),
        ("gzip; Q=0.000", False),
        ("gzip;q=0, *", False),  # the named entry wins over *
        ("identity;q=1, gzip;q=0.5", False),  # identity's weight is higher
        ("deflate, br", False),
        ("*;q=0", False),  # nothing acceptable: identity anyway
        ("gzip;q=0.001, identity;q=0", True),
        ("gzip;q=2", False),  # a weight above 1 is malformed: the entry is ignored
        ("gzip;q=nan", False),
        ("gzip;q=", False),
        ("", False),
        (None, False),
        ("nogzip", False),  # the old test looked for the substring
        (" , ;q=1, gzip ; q=0.5", True),
    ],
)
def test_accepts_gzip(header, gzip_sent):
    assert accepts_gzip(header) is gzip_sent


def _get(server: ExporterServer, header: str) -> bytes:
    with socket.create_connection(server.server_address[:2], timeout=5) as sock:
        sock.sendall(
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + header.encode() + b"\r\n\r\n"
        )
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return reply


def test_the_server_answers_gzip_q0_without_gzip_and_gzip_with_it():
    exposition = Exposition(PAGE)
    server = ExporterServer(("127.0.0.1", 0), lambda timeout: exposition, None)
    server.serve_in_thread()
    try:
        refused = _get(server, "Accept-Encoding: gzip;q=0")
        head, _, body = refused.partition(b"\r\n\r\n")
        assert b"Content-Encoding" not in head and body == PAGE
        asked = _get(server, "Accept-Encoding: gzip")
        head, _, body = asked.partition(b"\r\n\r\n")
        assert b"Content-Encoding: gzip" in head and gzip.decompress(body) == PAGE
        split = _get(server, "Accept-Encoding: identity;q=0\r\nAccept-Encoding: gzip;q=0.5")  # two fields
        assert b"Content-Encoding: gzip" in split.partition(b"\r\n\r\n")[0]
    finally:
        server.shutdown()
        server.server_close()
