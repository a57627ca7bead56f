"""Bad input to kvops's own flags: one line on stderr, exit 2, no traceback, nothing on stdout."""

from __future__ import annotations

import subprocess
import sys

import pytest


def kvops(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvops.cli", *args], capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["exporter", "--target", "ftp://host/metrics"], "only http and https"),
        (["exporter", "--target", "http://"], "no host"),
        (["exporter", "--target", "http://h:99999"], "bad port"),
        (["exporter", "--target", "http://user:pw@h:8000"], "credentials"),
        (["exporter", "--target", "http://h:8000/x\ty"], "control characters"),
        (["top", "--once", "http://h:8000/\x7f"], "control characters"),
        (["exporter", "--listen", "nowhere"], "expected HOST:PORT"),
        (["exporter", "--timeout", "0"], "--timeout"),
        (["exporter", "--timeout", "abc"], "invalid float value"),
        (["exporter", "--max-body-bytes", "10"], "--max-body-bytes"),
        (["exporter", "--config", "/nonexistent/kvops.yml"], "No such file"),
        (["exporter", "--no-collector", "gpu"], "invalid choice"),
        (["no-such-command"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str):
    proc = kvops(*args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_config_file_contents(tmp_path):
    bad_yaml = tmp_path / "a.yml"
    bad_yaml.write_text("targets: [\n")
    no_url = tmp_path / "b.yml"
    no_url.write_text("targets:\n  - bearer_token_file: x\n")
    missing_token = tmp_path / "c.yml"
    missing_token.write_text("targets:\n  - url: http://h:1\n    bearer_token_file: /nonexistent/token\n")
    for path, needle in ((bad_yaml, "not valid YAML"), (no_url, "needs a url"), (missing_token, "token")):
        proc = kvops("exporter", "--config", str(path), "--listen", "127.0.0.1:0")
        assert proc.returncode == 2 and needle in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_port_in_use_is_a_one_line_error():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = kvops("exporter", "--listen", f"127.0.0.1:{port}", "--no-collector", "host")
    assert proc.returncode == 2 and "cannot listen" in proc.stderr and proc.stderr.count("\n") == 1


def test_help_lists_every_command():
    proc = kvops("--help")
    assert proc.returncode == 0
    for name in ("exporter", "top", "doctor", "size", "sim", "demo", "bench"):
        assert name in proc.stdout
