"""Upstream scrapes with a bearer token and a CA file, against real TLS servers on loopback.

The token goes only to the configured target's origin: never in clear before the TLS
handshake is verified, never after a redirect to another origin, never in what the exporter
serves or logs."""

from __future__ import annotations

import argparse
import logging
import ssl
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests

from kvops.errors import UsageError
from kvops.exporter.command import build_runner, configure
from kvops.exporter.config import load_config
from kvops.exporter.families import render
from kvops.exporter.server import ExporterServer
from support.exporter_harness import Samples, parse_exposition, value
from support.paths import VLLM_FIXTURES

GOOD = (VLLM_FIXTURES / "0.33.0" / "offload-t2.prom").read_bytes()
TOKEN = "vllm-api-key-5f2b9c7e"


class TlsTarget(ThreadingHTTPServer):
    """A loopback HTTPS (or HTTP) /metrics endpoint that records every request's headers."""

    daemon_threads = True

    def __init__(self, pki: Path | None, reply: Callable[[BaseHTTPRequestHandler], None] | None = None):
        self.requests: list[tuple[str, str | None]] = []  # (path, Authorization header)
        self.reply = reply
        super().__init__(("127.0.0.1", 0), _Recorder)
        if pki is not None:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(pki / "server.crt", pki / "server.key")
            self.socket = ctx.wrap_socket(self.socket, server_side=True)
        self.scheme = "https" if pki is not None else "http"
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def origin(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server_address[1]}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Recorder(BaseHTTPRequestHandler):
    server: TlsTarget
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.server.requests.append((self.path, self.headers.get("Authorization")))
        if self.server.reply is not None:
            self.server.reply(self)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(GOOD)))
        self.end_headers()
        self.wfile.write(GOOD)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def redirect_to(location: str) -> Callable[[BaseHTTPRequestHandler], None]:
    def reply(h: BaseHTTPRequestHandler) -> None:
        if h.path.startswith("/real/"):
            h.send_response(200)
            h.send_header("Content-Length", str(len(GOOD)))
            h.end_headers()
            h.wfile.write(GOOD)
            return
        h.send_response(302)
        h.send_header("Location", location)
        h.send_header("Content-Length", "0")
        h.end_headers()

    return reply


@pytest.fixture
def servers() -> Iterator[list[TlsTarget]]:
    made: list[TlsTarget] = []
    yield made
    for s in made:
        s.stop()


def exporter_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    configure(parser)
    return parser.parse_args(list(argv))


def scrape_via_config(
    tmp_path: Path, config_yaml: str, caplog: pytest.LogCaptureFixture
) -> tuple[Samples, str]:
    """`kvops exporter --config FILE` in-process (no hardware collectors); one scrape."""
    cfg = tmp_path / "kvops.yml"
    cfg.write_text(config_yaml)
    args = exporter_args("--config", str(cfg), "--no-collector", "host", "--no-collector", "nvidia",
                         "--no-collector", "amd", "--timeout", "3")  # fmt: skip
    runner = build_runner(load_config(args))
    server = ExporterServer(("127.0.0.1", 0), lambda t: render(runner.snapshot(t)))
    server.serve_in_thread()
    caplog.set_level(logging.DEBUG)
    try:
        text = requests.get(server.url + "/metrics", timeout=10).text
    finally:
        server.shutdown()
        server.server_close()
        runner.close()
    assert TOKEN not in text
    assert TOKEN not in caplog.text  # not in any log line, at any level
    return parse_exposition(text), text


def target_config(url: str, tmp_path: Path, ca: Path | None) -> str:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")  # a trailing newline (echo > file) is not part of it
    lines = f"targets:\n  - url: {url}\n    bearer_token_file: {token_file}\n"
    return lines + (f"    ca_file: {ca}\n" if ca else "")


def test_bearer_token_over_tls_verified_against_the_ca_file(pki, servers, tmp_path, caplog):
    target = TlsTarget(pki)
    servers.append(target)
    s, _ = scrape_via_config(tmp_path, target_config(target.origin, tmp_path, pki / "ca.crt"), caplog)
    assert value(s, "kvops_target_up", target=target.origin) == 1.0
    assert value(s, "kvops_vllm_requests_running", target=target.origin) == 97.0
    assert target.requests == [("/metrics", f"Bearer {TOKEN}")]


@pytest.mark.parametrize("ca", [None, "other-ca.crt"], ids=["system-store", "wrong-ca"])
def test_unverified_tls_target_is_down_and_never_sees_the_token(pki, servers, tmp_path, caplog, ca):
    target = TlsTarget(pki)
    servers.append(target)
    s, _ = scrape_via_config(tmp_path, target_config(target.origin, tmp_path, ca and pki / ca), caplog)
    assert value(s, "kvops_target_up", target=target.origin) == 0.0
    assert value(s, "kvops_collector_success", collector="vllm") == 0.0
    assert target.requests == []  # the handshake failed before any header was sent
    assert "TLS error" in caplog.text and "certificate verify failed" in caplog.text


@pytest.mark.parametrize("where", ["other-port-https", "other-scheme-same-host", "other-host-name"])
def test_redirect_to_another_origin_is_not_followed_and_gets_no_token(pki, servers, tmp_path, caplog, where):
    elsewhere = TlsTarget(pki if where == "other-port-https" else None)
    servers.append(elsewhere)
    location = {
        "other-port-https": f"{elsewhere.origin}/metrics",
        "other-scheme-same-host": f"{elsewhere.origin}/metrics",
        # the same address by another name is another origin for a browser too
        "other-host-name": f"https://localhost:{elsewhere.server_address[1]}/metrics",
    }[where]
    target = TlsTarget(pki, reply=redirect_to(location))
    servers.append(target)
    s, _ = scrape_via_config(tmp_path, target_config(target.origin, tmp_path, pki / "ca.crt"), caplog)
    assert value(s, "kvops_target_up", target=target.origin) == 0.0
    assert target.requests == [("/metrics", f"Bearer {TOKEN}")]
    assert elsewhere.requests == []  # not even asked, so it cannot have seen the token
    assert "redirect to another host not followed" in caplog.text


def test_same_origin_redirect_keeps_the_token(pki, servers, tmp_path, caplog):
    target = TlsTarget(pki)
    target.reply = redirect_to("/real/metrics")
    servers.append(target)
    s, _ = scrape_via_config(tmp_path, target_config(target.origin, tmp_path, pki / "ca.crt"), caplog)
    assert value(s, "kvops_target_up", target=target.origin) == 1.0
    assert target.requests == [("/metrics", f"Bearer {TOKEN}"), ("/real/metrics", f"Bearer {TOKEN}")]


def test_token_goes_only_to_its_own_target(pki, servers, tmp_path, caplog):
    """Two targets, one with a token: the other one never receives it."""
    with_token, without = TlsTarget(pki), TlsTarget(pki)
    servers += [with_token, without]
    cfg = target_config(with_token.origin, tmp_path, pki / "ca.crt")
    cfg += f"  - url: {without.origin}\n    ca_file: {pki / 'ca.crt'}\n"
    s, _ = scrape_via_config(tmp_path, cfg, caplog)
    assert value(s, "kvops_target_up", target=with_token.origin) == 1.0
    assert value(s, "kvops_target_up", target=without.origin) == 1.0
    assert with_token.requests == [("/metrics", f"Bearer {TOKEN}")]
    assert without.requests == [("/metrics", None)]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("    bearer_token_file: /nonexistent/token\n", "bearer_token_file /nonexistent/token"),
        ("    ca_file: /nonexistent/ca.pem\n", "ca_file /nonexistent/ca.pem: No such file"),
    ],
)
def test_missing_token_or_ca_file_is_one_line_exit_2(tmp_path: Path, entry: str, message: str):
    cfg = tmp_path / "kvops.yml"
    cfg.write_text("targets:\n  - url: https://127.0.0.1:1\n" + entry)
    with pytest.raises(UsageError, match=message):
        load_config(exporter_args("--config", str(cfg)))
    argv = [sys.executable, "-m", "kvops.cli", "exporter", "--config", str(cfg), "--listen", "127.0.0.1:0"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and message in proc.stderr and "Traceback" not in proc.stderr
