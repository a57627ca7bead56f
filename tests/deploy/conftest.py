"""Fixtures for tests/deploy: the fake Kubernetes API, its PKI and the service-account files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kube_api import TOKEN, KubeApi

from support.pki import make_pki


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cluster CA and an API server certificate for 127.0.0.1 signed by it."""
    return make_pki(tmp_path_factory.mktemp("kube-pki"), leaves=("apiserver",))


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
