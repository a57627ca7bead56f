"""Fixtures for the reliability tests: loopback targets, in-process exporters, a test PKI."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kvops.exporter.webconfig import WebConfig
from support.exporter_harness import Exporter
from support.upstream import Upstream


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    yield server
    server.stop()


@pytest.fixture
def make_exporter() -> Iterator[Callable[..., Exporter]]:
    made: list[Exporter] = []

    def make(targets: list[str], timeout: float = 5.0, web: WebConfig | None = None,
             max_body: int = 16 * 1024 * 1024) -> Exporter:  # fmt: skip
        exp = Exporter(targets, timeout, web, max_body)
        made.append(exp)
        return exp

    yield make
    for exp in made:
        exp.stop()


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server cert for 127.0.0.1 signed by it, and an unrelated CA (openssl CLI)."""
    d = tmp_path_factory.mktemp("pki")

    def ssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    for ca in ("ca", "other-ca"):
        ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.crt",
            "-days", "2", "-subj", f"/CN=kvops-test-{ca}")  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=vllm")  # fmt: skip
    ssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.crt", "-days", "2", "-extfile", "san.ext")  # fmt: skip
    return d
