"""Operator files that are wrong, huge or hostile: one line on stderr, exit 2 (issue 17, items
1, 8, 9, 10, 11). load_config/load are called directly for each case; a few go through the CLI."""

from __future__ import annotations

import argparse
import base64
import subprocess
import sys
import threading
import time
from pathlib import Path

import bcrypt
import pytest

from kvops.errors import UsageError
from kvops.exporter.command import configure
from kvops.exporter.config import load_config
from kvops.exporter.webconfig import load

BILLION_LAUGHS = (
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
    "targets:\n  - url: *g\n"
)


def args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    configure(parser)
    return parser.parse_args(list(argv))


def config_error(tmp_path: Path, text: str | bytes) -> str:
    path = tmp_path / "kvops.yml"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    with pytest.raises(UsageError) as info:
        load_config(args("--config", str(path)))
    message = str(info.value)
    assert "\n" not in message and len(message) < 300, message
    return message


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "kvops.cli", "exporter", "--listen", "127.0.0.1:0", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_listen_as_a_number_is_one_line_exit_2(tmp_path: Path):
    cfg = tmp_path / "kvops.yml"
    cfg.write_text("listen: 20035\n")
    proc = subprocess.run([sys.executable, "-m", "kvops.cli", "exporter", "--config", str(cfg)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "listen" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("flag", ["--config", "--web-config"])
def test_deeply_nested_yaml_is_one_line_exit_2(tmp_path: Path, flag: str):
    path = tmp_path / "deep.yml"
    path.write_text("a: " + "[" * 100_000 + "]" * 100_000 + "\n")
    proc = run_cli(flag, str(path))
    assert proc.returncode == 2, proc.stderr[-500:]
    assert proc.stderr.count("\n") == 1 and "nested deeper" in proc.stderr


def test_billion_laughs_is_refused_before_it_expands(tmp_path: Path):
    began = time.monotonic()
    assert "aliases" in config_error(tmp_path, BILLION_LAUGHS)
    assert time.monotonic() - began < 1.0


def test_config_from_dev_zero_is_cut_at_the_size_cap():
    began = time.monotonic()
    with pytest.raises(UsageError, match="larger than"):
        load_config(args("--config", "/dev/zero"))
    with pytest.raises(UsageError, match="larger than"):
        load("/dev/zero")
    assert time.monotonic() - began < 2.0


@pytest.mark.parametrize("key", ["bearer_token_file", "ca_file"])
@pytest.mark.parametrize(
    ("value", "said"), [("123", "the number 123"), ("[a, b]", "a list"), ("{a: 1}", "a mapping")]
)
def test_token_or_ca_file_of_the_wrong_type_is_one_line(tmp_path: Path, key: str, value: str, said: str):
    message = config_error(tmp_path, f"targets:\n  - url: https://127.0.0.1:9\n    {key}: {value}\n")
    assert key in message and said in message


@pytest.mark.parametrize("key", ["bearer_token_file", "ca_file"])
def test_binary_token_or_ca_file_is_one_line(tmp_path: Path, key: str):
    (tmp_path / "blob").write_bytes(bytes(range(256)) * 4)
    message = config_error(
        tmp_path, f"targets:\n  - url: https://127.0.0.1:9\n    {key}: {tmp_path / 'blob'}\n"
    )
    assert key in message


@pytest.mark.parametrize(
    "token", [b"tok1\r\nX-Injected: evil", b"tok1\nX-Injected: evil", b"tok\x1b[31m", b"  \n"]
)
def test_token_with_control_characters_or_empty_is_refused(tmp_path: Path, token: bytes):
    (tmp_path / "token").write_bytes(token)
    message = config_error(
        tmp_path, f"targets:\n  - url: https://127.0.0.1:9\n    bearer_token_file: {tmp_path / 'token'}\n"
    )
    assert "bearer_token_file" in message


def test_token_is_stripped(tmp_path: Path):
    (tmp_path / "token").write_text("  tok1\n\n")
    cfg = tmp_path / "kvops.yml"
    cfg.write_text(f"targets:\n  - url: https://127.0.0.1:9\n    bearer_token_file: {tmp_path / 'token'}\n")
    [target] = load_config(args("--config", str(cfg))).targets
    assert target.options.bearer_token == "tok1"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("timeout: [1]\n", "timeout"),
        ("timeout: true\n", "timeout"),
        ("max_body_bytes: 1.5\n", "max_body_bytes"),
        ("targets:\n  - url: 5\n", "url"),
        ("targets:\n  - url: http://h:1\n    bearer_token: x\n", "unknown target key"),
        ("targets:\n  - url: http://127.0.0.1:0\n", "port 0"),
        ("listen: [a]\n", "listen"),
    ],
)
def test_config_values_of_the_wrong_type_are_one_line(tmp_path: Path, text: str, said: str):
    assert said in config_error(tmp_path, text)


def write_web(tmp_path: Path, text: str) -> str:
    path = tmp_path / "web.yml"
    path.write_text(text)
    return str(path)


def web_error(path: str) -> str:
    with pytest.raises(UsageError) as info:
        load(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_web_config_keys_unknown_or_unsupported_are_errors(pki: Path):
    tls = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
    assert "unknown key 'tls_server_config.cert_fiel'" in web_error(write_web(pki, tls + "  cert_fiel: x\n"))
    assert "client_allowed_sans' is not supported" in web_error(
        write_web(pki, tls + "  client_allowed_sans: [a]\n")
    )
    assert "rate_limit' is not supported" in web_error(write_web(pki, "rate_limit:\n  burst: 1\n"))
    assert "client_ca_file is set but client_auth_type is NoClientCert" in web_error(
        write_web(pki, tls + "  client_ca_file: ca.crt\n")
    )


@pytest.mark.parametrize(
    "hashed",
    ["$2y$10$tooshort", "$2b$99$" + "a" * 53, "$2a$10$" + "!" * 53, "$6$rounds=5000$salt$hash"],
)
def test_malformed_bcrypt_hashes_are_errors_at_start(tmp_path: Path, hashed: str):
    assert "is not a bcrypt hash" in web_error(
        write_web(tmp_path, f"basic_auth_users:\n  alice: '{hashed}'\n")
    )


@pytest.mark.parametrize("content", [b"", b"not a certificate\n", bytes(range(256))])
def test_bad_client_ca_files_are_errors_at_start(pki: Path, tmp_path: Path, content: bytes):
    (tmp_path / "ca.pem").write_bytes(content)
    text = (
        f"tls_server_config:\n  cert_file: {pki / 'server.crt'}\n  key_file: {pki / 'server.key'}\n"
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n"
    )
    assert "client_ca_file" in web_error(write_web(tmp_path, text))


def header(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture(scope="module")
def auth_config(tmp_path_factory: pytest.TempPathFactory):
    hashed = bcrypt.hashpw(b"right", bcrypt.gensalt(rounds=11)).decode()
    path = tmp_path_factory.mktemp("auth") / "web.yml"
    path.write_text(f"basic_auth_users:\n  alice: '{hashed}'\n")
    return str(path)


def timed(fn) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def test_unknown_user_costs_a_bcrypt_like_a_wrong_password(auth_config: str):
    web = load(auth_config)
    assert web.dummy_hash.startswith(b"$2b$11$")  # as dear as the real hash
    unknown = min(timed(lambda i=i: web.check_basic_auth(header(f"nobody{i}", "x"))) for i in range(3))
    wrong = min(timed(lambda i=i: web.check_basic_auth(header("alice", f"wrong{i}"))) for i in range(3))
    assert 0.5 < unknown / wrong < 2.0, (unknown, wrong)


def test_verified_outcomes_are_cached(auth_config: str):
    web = load(auth_config)
    first = timed(lambda: web.check_basic_auth(header("alice", "right")))
    again = timed(lambda: [web.check_basic_auth(header("alice", "right")) for _ in range(50)])
    assert again < first, (first, again)  # fifty cached answers cost less than one bcrypt
    assert web.check_basic_auth(header("alice", "right"))
    wrong_first = timed(lambda: web.check_basic_auth(header("alice", "wrong")))
    wrong_again = timed(lambda: [web.check_basic_auth(header("alice", "wrong")) for _ in range(50)])
    assert wrong_again < wrong_first, (wrong_first, wrong_again)  # failures are cached too
    assert not web.check_basic_auth(header("alice", "wrong"))
    assert not web.check_basic_auth(header("nobody", "right"))


def test_concurrent_bcrypt_work_is_capped(auth_config: str, monkeypatch: pytest.MonkeyPatch):
    """Eight wrong passwords at once: the real bcrypt runs for each, one at a time, so a flood
    of them costs one core, not all of them. (The wrapper only counts overlapping calls.)"""
    web = load(auth_config)
    real = bcrypt.checkpw
    lock = threading.Lock()
    running, most = [0], [0]

    def counting(password: bytes, hashed: bytes) -> bool:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            return real(password, hashed)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr("kvops.exporter.webconfig.bcrypt.checkpw", counting)
    threads = [
        threading.Thread(target=web.check_basic_auth, args=(header("alice", f"flood{i}"),)) for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1
