"""The recorder of vllm_cli.json (python -m kvops.doctor.gen_cli_schema --sources DIR), run for real
on small release trees written here: its child interpreters, the stand-ins of
kvops/doctor/reading/release_stand_ins.py and the merge. The real releases are recorded by the
command in docs/doctor.md (The vLLM CLI schema)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kvops.doctor import gen_cli_schema
from kvops.doctor.reading import vllm_release
from support.fake_vllm_release import write_release

SHIPPED = Path(gen_cli_schema.__file__).parent / "reading" / "vllm_cli.json"

# A release whose parser module imports what cannot load here: a compiled extension with no file
# in the tree and a library that is not installed, used as a base class with class keywords, as a
# decorator and as a value type.
CLI_ARGS = """\
import argparse

import kvops_absent_library as absent
from vllm._C import ops


class Params(absent.Struct, omit_defaults=True):
    pass


@absent.cache
def positive(text):
    return int(text)


class FlexibleArgumentParser(argparse.ArgumentParser):
    pass


def make_arg_parser(parser):
    parser.add_argument("--block-size", type=positive, default=16)
    parser.add_argument("--kernel", choices=["a", "b"], default="a")
    return parser
"""


def _release(parent: Path, version: str) -> Path:
    return write_release(parent / version, CLI_ARGS)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as on most machines
    return subprocess.run(
        [sys.executable, "-m", "kvops.doctor.gen_cli_schema", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def test_a_release_importing_what_is_not_here_is_recorded_and_its_tree_left_as_it_was(
    tmp_path: Path,
) -> None:
    before = {v: _files(_release(tmp_path, v)) for v in ("9.0.0", "9.0.1")}
    done = _run("--sources", str(tmp_path), "--releases", "9.0.0", "9.0.1")
    assert done.returncode == 0, done.stderr
    table = json.loads(done.stdout)
    assert table["releases"] == ["9.0.0", "9.0.1"]
    assert table["flags"]["--block-size"] == [
        {"releases": ["9.0.0..9.0.1"], "names": ["--block-size"], "kind": "store", "type": "int"}
        | {"default": 16, "dest": "block_size"}
    ]
    assert table["flags"]["--kernel"][0]["choices"] == ["a", "b"]
    # the tree is the cache `kvops doctor --repro` verifies file by file: nothing may be added to it
    assert {v: _files(tmp_path / v) for v in before} == before


def test_a_release_that_cannot_be_recorded_writes_no_table(tmp_path: Path) -> None:
    _release(tmp_path, "9.0.0")
    done = _run("--sources", str(tmp_path), "--releases", "9.0.0", "9.0.2")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines()[-1] == "gen_cli_schema: not recorded: 9.0.2; no table written"


def test_a_missing_schema_gen_library_is_one_line_before_anything_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(gen_cli_schema, "SCHEMA_GEN_MODULES", ("torch", "kvops_absent_library"))
    assert gen_cli_schema.main(["--sources", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (
        "gen_cli_schema: kvops_absent_library not installed here; pip install -e '.[schema-gen]' first\n"
    )


def test_sources_that_are_not_a_directory_are_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(gen_cli_schema, "SCHEMA_GEN_MODULES", ("json",))  # past the library check
    absent = tmp_path / "absent"
    assert gen_cli_schema.main(["--sources", str(absent)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"gen_cli_schema: --sources {absent}: not a directory\n"


def _as_of(table: dict[str, Any], version: str) -> dict[str, Any]:
    """What a table says about one of its releases: each flag's variant holding in it, and its rewrites."""
    order = table["releases"]
    at = order.index(version)

    def holds(ranges: list[str]) -> bool:
        for written in ranges:
            first, _, last = written.partition("..")
            if order.index(first) <= at <= order.index(last or first):
                return True
        return False

    def without_releases(variant: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in variant.items() if k != "releases"}

    flags = {
        key: [without_releases(v) for v in variants if holds(v["releases"])]
        for key, variants in table["flags"].items()
    }
    return {
        "flags": {key: found for key, found in flags.items() if found},
        "rewrites": [without_releases(r) for r in table["rewrites"] if holds(r["releases"])],
    }


@pytest.mark.vllm_release
@pytest.mark.timeout(1800)  # the first run downloads 370-500 MB wheels
def test_the_recorder_reproduces_the_shipped_table_for_real_releases() -> None:
    """The releases the --repro tests download (the same cache): recorded again here, each one's flags
    and rewrites are what vllm_cli.json holds for it (docs/doctor.md re-records all 39 and cmp's)."""
    versions = ["0.11.2", "0.14.0", "0.18.0"]
    done = _run("--download", str(vllm_release.cache_dir()), "--releases", *versions)
    assert done.returncode == 0, done.stderr
    recorded = json.loads(done.stdout)
    shipped = json.loads(
        (Path(gen_cli_schema.__file__).parent / "reading" / "vllm_cli.json").read_text(encoding="utf-8")
    )
    for version in versions:
        assert _as_of(recorded, version) == _as_of(shipped, version), version
        assert vllm_release.cached(version) is not None  # the tree still verifies: nothing was added
