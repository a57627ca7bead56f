"""One CLI grammar (issue 30): `top --target` as the exporter takes it, `size --host-ram/--shm` as
doctor takes them, bash/zsh completion from the parser, defaults from $XDG_CONFIG_HOME/kvops/.

Run as a user runs them: `python -m kvops.cli` in a subprocess against a real simulated vLLM,
HOME and XDG_CONFIG_HOME pointed at a temporary directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvops.sim.server import start

GIB = 1 << 30


def kvops(
    *args: str, home: Path, xdg: Path | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "XDG_CONFIG_HOME"}
    env["HOME"] = str(home)
    if xdg is not None:
        env["XDG_CONFIG_HOME"] = str(xdg)
    return subprocess.run([sys.executable, "-m", "kvops.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)  # fmt: skip


@pytest.fixture(scope="module")
def sims() -> Iterator[list[str]]:
    servers = [start(), start()]
    try:
        yield [s.url for s in servers]
    finally:
        for s in servers:
            s.stop()


def targets_of(proc: subprocess.CompletedProcess[str]) -> dict[str, bool]:
    assert proc.returncode == 0, proc.stderr
    return {t["target"]: t["up"] for t in json.loads(proc.stdout)["targets"]}


def test_top_takes_target_flags_as_the_exporter_does_and_joins_them_with_urls(tmp_path, sims):
    a, b = sims
    assert targets_of(kvops("top", "--once", "--json", "--target", a, "--target", b, home=tmp_path)) == {
        a: True,
        b: True,
    }
    assert targets_of(kvops("top", "--once", "--json", a, "--target", b, home=tmp_path)) == {a: True, b: True}
    both = kvops("top", "--once", "--target", a, "--prometheus", "http://127.0.0.1:9", home=tmp_path)
    assert both.returncode == 2 and "give one source, not URL and --prometheus" in both.stderr


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_top_reads_its_defaults_from_xdg_config_home_and_flags_win(tmp_path, sims):
    a, b = sims
    xdg = tmp_path / "xdg"
    write(xdg / "kvops" / "top.yml", f"targets: [{a}]\nsort: kv\nwindow: 1m\n")
    assert targets_of(kvops("top", "--once", "--json", home=tmp_path, xdg=xdg)) == {a: True}
    assert targets_of(kvops("top", "--once", "--json", "--target", b, home=tmp_path, xdg=xdg)) == {b: True}
    assert targets_of(kvops("top", "--once", "--json", b, home=tmp_path, xdg=xdg)) == {b: True}


def test_top_falls_back_to_dot_config_without_xdg_config_home(tmp_path, sims):
    a, _ = sims
    write(tmp_path / ".config" / "kvops" / "top.yml", f"targets: [{a}]\n")
    assert targets_of(kvops("top", "--once", "--json", home=tmp_path)) == {a: True}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("sort: nope\n", "sort 'nope': expected one of target"),
        ("interval: -1\n", "interval: expected seconds above 0"),
        ("top: 0\n", "top: expected a whole number"),
        ("colour: red\n", "unknown key 'colour'"),
        ("targets: [http://a:1]\nprometheus: http://b:2\n", "targets or prometheus, not both"),
        ("- a list\n", "expected a mapping"),
    ],
)
def test_a_bad_top_yml_is_one_line_naming_the_file_and_exit_2(tmp_path, text, needle):
    path = write(tmp_path / "xdg" / "kvops" / "top.yml", text)
    proc = kvops("top", "--once", "--json", home=tmp_path, xdg=tmp_path / "xdg")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and str(path) in proc.stderr and needle in proc.stderr, proc.stderr


def test_the_exporter_reads_exporter_yml_as_its_config_unless_config_is_given(tmp_path):
    xdg = tmp_path / "xdg"
    path = write(xdg / "kvops" / "exporter.yml", "listen: 12\n")  # a bad file: read, and said so
    proc = kvops("exporter", home=tmp_path, xdg=xdg)
    assert proc.returncode == 2 and "listen" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    given = write(tmp_path / "given.yml", "timeout: 0\n")
    proc = kvops("exporter", "--config", str(given), home=tmp_path, xdg=xdg)
    assert proc.returncode == 2 and "--timeout 0" in proc.stderr, proc.stderr  # the given file, not path's
    assert path.exists()


def size_json(*args: str, home: Path) -> dict:
    proc = kvops("size", "--model", "deepseek-ai/DeepSeek-V3.2", "--max-model-len", "131072",
                 "--concurrency", "8", "--json", *args, home=home)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_size_judges_another_machine_with_host_ram_and_shm_as_doctor_does(tmp_path):
    big = size_json("--host-ram", "1024G", "--shm", "512GiB", home=tmp_path)
    assert big["host"]["ram_bytes"] == 1024 * GIB and big["host"]["shm_free_bytes"] == 512 * GIB
    assert big["host"]["memory_limit_bytes"] is None  # this host's cgroup says nothing of that one
    assert "fits" in big["host_checks"][0] and "holds the buffer" in big["host_checks"][1]
    small = size_json("--host-ram", "16G", "--shm", "8G", home=tmp_path)
    assert "does NOT fit" in small["host_checks"][0] and "is smaller than" in small["host_checks"][1]
    bad = kvops("size", "--model", "deepseek-ai/DeepSeek-V3.2", "--host-ram", "lots", home=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--host-ram 'lots'" in bad.stderr


def test_size_reads_a_model_kvops_ships_by_its_hugging_face_id(tmp_path):
    doc = size_json(home=tmp_path)
    assert doc["model_type"] == "deepseek_v32" and doc["kv_bytes_per_token"] > 0


def bash_complete(script: Path, words: list[str]) -> list[str]:
    """What bash's own completion machinery offers for the last word, with kvops's script sourced."""
    line = " ".join(words)
    program = (
        f"source {script}\n"
        f"COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; COMP_LINE='{line}'; COMP_POINT={len(line)}\n"
        f"_shtab_kvops kvops {words[-1]} {words[-2]}\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    proc = subprocess.run(["bash", "--norc", "-c", program], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_bash_completion_offers_commands_and_their_flags(tmp_path):
    proc = kvops("completion", "bash", home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    script = write(tmp_path / "kvops.bash", proc.stdout)
    assert bash_complete(script, ["kvops", "to"]) == ["top"]
    assert bash_complete(script, ["kvops", "top", "--tar"]) == ["--target"]
    assert bash_complete(script, ["kvops", "size", "--ho"]) == ["--host-ram"]
    assert set(bash_complete(script, ["kvops", "top", "--sort", "ex"])) == {"external-hit"}


def test_zsh_completion_is_a_compdef_for_kvops(tmp_path):
    proc = kvops("completion", "zsh", home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (
        proc.stdout.startswith("#compdef kvops") and "--host-ram" in proc.stdout and "--target" in proc.stdout
    )
    if shutil.which("zsh"):
        script = write(tmp_path / "_kvops", proc.stdout)
        check = subprocess.run(["zsh", "-n", str(script)], capture_output=True, text=True, timeout=30)
        assert check.returncode == 0, check.stderr
    bad = kvops("completion", "fish", home=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
