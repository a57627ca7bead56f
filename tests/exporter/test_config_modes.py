"""Config and secret files anyone on the host may write (issue 41, low item). exporter.yml and
top.yml decide which file is sent as a bearer token to which host: a world-writable one is read
with one warning line naming the file and its mode. A world-writable token file is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import VLLM_FIXTURES

T1 = VLLM_FIXTURES / "0.33.0" / "offload-t1.prom"
T2 = VLLM_FIXTURES / "0.33.0" / "offload-t2.prom"


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvops.cli", *argv], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})})  # fmt: skip


def user_config(tmp_path: Path, name: str, text: str, mode: int) -> Path:
    directory = tmp_path / "xdg" / "kvops"
    directory.mkdir(parents=True)
    path = directory / name
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize(("mode", "warned"), [(0o666, True), (0o602, True), (0o644, False), (0o600, False)])
def test_a_world_writable_top_yml_is_read_with_one_warning(tmp_path, mode, warned):
    path = user_config(tmp_path, "top.yml", "sort: external-hit\n", mode)
    proc = run("top", "--once", "--json", "--replay", str(T1), str(T2),
               env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["targets"]  # still read and used
    if warned:
        assert proc.stderr == (f"config file {path}: world-writable (mode {mode:04o}): any user on this "
                               "host can change it; run chmod o-w on it\n")  # fmt: skip
    else:
        assert proc.stderr == ""


def test_a_world_writable_exporter_yml_is_warned_about_in_the_log(tmp_path):
    path = user_config(tmp_path, "exporter.yml", "listen: 'bad listen'\n", 0o666)
    proc = run("exporter", env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2  # the listen value: the config was read after the warning
    assert len(lines) == 2 and lines[-1].startswith("kvops exporter: error: --listen")
    assert f"WARNING kvops.operator_files: --config {path}: world-writable (mode 0666)" in lines[0]


def test_a_world_writable_bearer_token_file_is_refused(tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    token.chmod(0o666)
    cfg = tmp_path / "exporter.yml"
    cfg.write_text(f"targets:\n  - url: http://127.0.0.1:1\n    bearer_token_file: {token}\n")
    proc = run("exporter", "--listen", "127.0.0.1:0", "--config", str(cfg))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert (
        f"bearer_token_file {token}: world-writable (mode 0666): any user could change the credential sent"
        in proc.stderr
    )
    assert "s3cret" not in proc.stderr


def test_a_token_file_only_its_owner_writes_is_read(tmp_path):
    from kvops.operator_files import read_secret

    token = tmp_path / "token"
    token.write_text("s3cret\n")
    token.chmod(0o640)
    assert read_secret(str(token), "bearer_token_file") == "s3cret"
