"""Fixtures for tests/deploy: the fake Kubernetes API, its PKI and the service-account files."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kube_api import TOKEN, KubeApi


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cluster CA and an API server certificate for 127.0.0.1 signed by it (openssl CLI)."""
    d = tmp_path_factory.mktemp("kube-pki")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
            "-days", "2", "-subj", "/CN=kubernetes-test-ca")  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "apiserver.key", "-out", "apiserver.csr",
            "-subj", "/CN=kube-apiserver")  # fmt: skip
    openssl("x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "apiserver.crt", "-days", "2", "-extfile", "san.ext")  # fmt: skip
    return d


@pytest.fixture
def kube_api(pki: Path) -> Iterator[KubeApi]:
    server = KubeApi(pki / "apiserver.crt", pki / "apiserver.key")
    yield server
    server.stop()


@pytest.fixture
def service_account(tmp_path: Path, pki: Path) -> Path:
    """/var/run/secrets/kubernetes.io/serviceaccount as the kubelet mounts it."""
    d = tmp_path / "serviceaccount"
    d.mkdir()
    (d / "token").write_text(TOKEN + "\n")
    (d / "ca.crt").write_bytes((pki / "ca.crt").read_bytes())
    (d / "namespace").write_text("monitoring")
    return d
