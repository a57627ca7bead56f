"""Digits that are not ASCII (issue 25, item 6): `"²".isdigit()` is true and `int("²")` raises.

Every place kvops turns outside text into a number checks for ASCII digits first: HTTP headers
(answered 400, before authentication, with no traceback), label values it sorts by (engine,
tp_rank, NVLink link), --listen and the command lines doctor reads."""

from __future__ import annotations

import logging
import socket

import pytest

from kvops.doctor.reading.cmdline import parse as parse_command_line
from kvops.engines.common import rank_of
from kvops.engines.registry import normalise
from kvops.errors import UsageError
from kvops.exporter.server import parse_listen, scrape_timeout
from kvops.exporter.webconfig import WebConfig
from kvops.exposition.parser import parse
from kvops.sim import server as sim_server
from kvops.sim.command import parse_listen as sim_parse_listen
from kvops.transport.kubernetes import pod_target

# Latin-1 superscripts (what an HTTP header byte decodes to) and other scripts' digits.
NON_ASCII_DIGITS = ["\xb2", "\xb9", "\xb3", "1\xb2", "\u0661\u0660", "\uff11"]


def _ask(url: str, header: bytes) -> bytes:
    host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + header + b"\r\n\r\n")
        sock.settimeout(5)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        return data


@pytest.mark.parametrize("byte", [b"\xb2", b"\xb9", b"\xb3", b"1\xb2"])
def test_a_non_ascii_content_length_is_answered_400_without_a_traceback(make_exporter, capfd, caplog, byte):
    # Before authentication: a client without credentials must get 400, not a dropped connection.
    web = WebConfig(users={"u": b"$2b$04$" + b"a" * 53})
    exp = make_exporter([], web=web)
    caplog.set_level(logging.DEBUG, logger="kvops")
    reply = _ask(exp.url, b"Content-Length: " + byte)
    assert reply.startswith(b"HTTP/1.1 400"), reply[:80]
    assert b"Connection: close" in reply
    assert "Traceback" not in capfd.readouterr().err
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize("text", [*NON_ASCII_DIGITS, "inf", "nan", "1e400", "-1", "1_0", "", "2s"])
def test_an_unreadable_scrape_timeout_header_means_no_budget(text: str):
    assert scrape_timeout(text) is None


def test_a_readable_scrape_timeout_header_keeps_its_value():
    assert scrape_timeout("10") == pytest.approx(scrape_timeout("10.0"))
    assert 9 < scrape_timeout(" 10 ") < 10  # type: ignore[operator]
    assert scrape_timeout("0") == 0.1  # the floor: a budget, however small


@pytest.mark.parametrize(
    "header", [b"X-Prometheus-Scrape-Timeout-Seconds: \xb2", b"X-Prometheus-Scrape-Timeout-Seconds: inf"]
)
def test_a_scrape_with_an_unreadable_timeout_header_is_answered(make_exporter, header: bytes):
    exp = make_exporter([])
    assert _ask(exp.url, header + b"\r\nConnection: close").startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize("digits", NON_ASCII_DIGITS)
def test_listen_ports_in_other_digits_are_usage_errors(digits: str):
    with pytest.raises(UsageError):
        parse_listen(f":{digits}")
    with pytest.raises(UsageError):
        sim_parse_listen(f"127.0.0.1:{digits}")


@pytest.mark.parametrize("digits", NON_ASCII_DIGITS)
def test_label_values_in_other_digits_sort_as_text(digits: str):
    page = (
        f'vllm:num_requests_running{{model_name="m",engine="{digits}"}} 3\n'
        'vllm:num_requests_running{model_name="m",engine="0"} 2\n'
    )
    engines = normalise(parse(page), "t").engines
    assert [e.engine for e in engines] == ["0", digits]  # numbers first, then text
    assert rank_of({"tp_rank": digits}) == 1 << 30
    with pytest.raises(ValueError, match="not a port number"):
        pod_target(
            {"status": {"podIP": "10.0.0.1"}, "metadata": {"annotations": {"prometheus.io/port": digits}}}, 80
        )


@pytest.mark.parametrize("digits", NON_ASCII_DIGITS)
def test_a_command_line_with_other_digits_is_read_as_not_a_number(digits: str):
    line = parse_command_line(f"vllm serve m --tensor-parallel-size {digits}")
    assert line.tensor_parallel_size() == 1


def _raw(url: str, request: bytes) -> bytes:
    host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(request)
        sock.settimeout(5)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        return data


@pytest.mark.parametrize("version", [b"HTTP/1.\xb9", b"HTTP/\xb9.1"])
def test_a_request_line_with_non_ascii_digits_is_answered_400_by_both_servers(make_exporter, capfd, version):
    exp = make_exporter([])
    with sim_server.start(port=0) as sim:
        for url in (exp.url, sim.url):
            reply = _raw(url, b"GET /metrics " + version + b"\r\nHost: x\r\nContent-Length: \xb2\r\n\r\n")
            # http.server answers a version it cannot read as HTTP/0.9: the error page alone.
            assert b"Error code: 400" in reply, reply[:80]
    assert "Traceback" not in capfd.readouterr().err


def test_the_simulator_answers_a_non_ascii_content_length_without_a_traceback(capfd):
    with sim_server.start(port=0) as sim:
        reply = _raw(
            sim.url, b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: \xb2\r\nConnection: close\r\n\r\n"
        )
    assert reply.startswith(b"HTTP/1.1 "), reply[:80]
    assert "Traceback" not in capfd.readouterr().err
