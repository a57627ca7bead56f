"""A throwaway PKI made with the openssl CLI: two CAs, and leaf certificates for 127.0.0.1."""

from __future__ import annotations

import subprocess
from pathlib import Path


def make_pki(directory: Path, leaves: tuple[str, ...] = ("server", "client")) -> Path:
    """In `directory`: ca.crt/.key, other-ca.crt/.key (trusted by nobody), and for each leaf
    NAME.crt/.key signed by ca, with subjectAltName IP:127.0.0.1. Returns `directory`."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.crt",
                "-days", "2", "-subj", f"/CN=kvops-test-{ca}")  # fmt: skip
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    for name in leaves:
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", f"/CN={name}")  # fmt: skip
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.crt", "-days", "2", "-extfile", "san.ext")  # fmt: skip
    return directory
