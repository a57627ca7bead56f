"""TLS and basic auth from an exporter-toolkit web-config file, with a real client over loopback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import bcrypt
import pytest
import requests

from kvops.errors import UsageError
from kvops.exporter.webconfig import load

PASSWORD = "s3cret-pass"


def write_config(d: Path, text: str) -> str:
    path = d / "web.yml"
    path.write_text(text)
    return str(path)


def _hash() -> str:
    # exporter-toolkit docs generate $2y$ hashes (htpasswd -B); bcrypt writes $2b$: accept both
    return bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode().replace("$2b$", "$2y$", 1)


def test_tls_and_basic_auth(pki: Path, upstream, make_exporter):
    tls = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
    cfg = write_config(pki, tls + f"basic_auth_users:\n  prometheus: '{_hash()}'\n")
    exp = make_exporter([], web=load(cfg))
    assert exp.url.startswith("https://")
    ok = exp.scrape(verify=str(pki / "ca.crt"), auth=("prometheus", PASSWORD))
    assert ok.status_code == 200 and "kvops_build_info" in ok.text
    # cached success: a second scrape with the same password is served too
    assert exp.scrape(verify=str(pki / "ca.crt"), auth=("prometheus", PASSWORD)).status_code == 200
    assert exp.scrape(verify=str(pki / "ca.crt"), auth=("prometheus", "wrong")).status_code == 401
    assert exp.scrape(verify=str(pki / "ca.crt"), auth=("nobody", PASSWORD)).status_code == 401
    anon = exp.scrape(verify=str(pki / "ca.crt"))
    assert anon.status_code == 401 and "kvops_" not in anon.text
    with pytest.raises(requests.exceptions.SSLError):
        exp.scrape()  # the server's cert is not trusted by the system store
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(exp.url.replace("https://", "http://"), timeout=5)  # no plain HTTP on a TLS port


def test_client_certificates_required(pki: Path, make_exporter):
    cfg = write_config(
        pki,
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n",
    )
    exp = make_exporter([], web=load(cfg))
    ca = str(pki / "ca.crt")
    good = exp.scrape(verify=ca, cert=(str(pki / "client.crt"), str(pki / "client.key")))
    assert good.status_code == 200
    with pytest.raises(requests.exceptions.RequestException):
        exp.scrape(verify=ca)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tls_server_config:\n  cert_file: nope.crt\n  key_file: nope.key\n", "cannot load cert_file"),
        ("basic_auth_users:\n  alice: plaintext\n", "not a bcrypt hash"),
        ("tls_server_config: [\n", "not valid YAML"),
        ("bogus: 1\n", "unknown key 'bogus'"),
        ("tls_server_config:\n  cert_file: a\n", "needs cert_file and key_file"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS11\n", "min_version 'TLS11'"),
    ],
)
def test_bad_web_config_is_one_line_usage_error(tmp_path: Path, text: str, message: str):
    with pytest.raises(UsageError, match=message) as info:
        load(write_config(tmp_path, text))
    assert "\n" not in str(info.value)


def test_bad_web_config_exits_2_from_the_cli(tmp_path: Path):
    cfg = write_config(tmp_path, "basic_auth_users:\n  alice: plaintext\n")
    argv = [sys.executable, "-m", "kvops.cli", "exporter", "--web-config", cfg, "--listen", "127.0.0.1:0"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "not a bcrypt hash" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
