"""The live parser: a vllm build kvops ships no table for, importable here, is read with its own
make_arg_parser — run by gen_cli_schema's recorder in a child interpreter, as for the shipped table.
The vllm here is a minimal package written by this test (no real vllm is installed in CI); the
recorder, the child process and the cache are the real ones."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kvops.doctor.reading import cli_schema, cmdline
from support.fake_vllm_release import write_release

CLI_ARGS = """\
import argparse, json


class FlexibleArgumentParser(argparse.ArgumentParser):
    def parse_args(self, args=None, namespace=None):
        # Convert underscores to dashes: arg.replace("_", "-"); -O3 -> --optimization-level
        return super().parse_args(args, namespace)


def make_arg_parser(parser):
    parser.add_argument("model_tag", nargs="?")
    parser.add_argument("--fork-only-flag", type=int)
    parser.add_argument("--kv-transfer-config", type=json.loads)
    parser.add_argument("--enforce-eager", action=argparse.BooleanOptionalAction)
    parser.add_argument("--api-key", nargs="+")
    return parser
"""


@pytest.fixture
def fork_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return write_release(tmp_path / "site", CLI_ARGS)


def test_the_installed_builds_own_parser_is_recorded_and_cached(fork_vllm: Path, tmp_path: Path) -> None:
    schema = cli_schema.live_schema("0.99.0+fork", fork_vllm)
    assert schema is not None and schema.version == "0.99.0+fork"
    assert schema.lookup("--fork-only-flag").value_type == "int"
    assert schema.lookup("--no-enforce-eager") is schema.lookup("--enforce-eager")
    assert (
        schema.lookup("--api-key").nargs == "+" and schema.lookup("--kv-transfer-config").value_type == "json"
    )
    assert schema.rewrites.o_level == "--optimization-level" and schema.rewrites.underscores
    assert (tmp_path / "cache" / "kvops" / "vllm-cli" / "0.99.0+fork.json").is_file()
    again = cli_schema.live_schema("0.99.0+fork", Path("/nonexistent"))  # from the cache
    assert again is not None and again.lookup("--fork-only-flag") is not None


def test_for_version_uses_the_live_parser_only_for_the_installed_unshipped_build(
    fork_vllm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_schema, "installed_vllm", lambda: ("0.99.0+fork", fork_vllm))
    cli_schema._live.cache_clear()
    try:
        c = cmdline.parse("vllm serve m --fork_only_flag 3 --kv-offloading-size 8", "0.99.0+fork")
        assert c.schema_version == "0.99.0+fork" and c.schema_note is None
        assert c.get("--fork-only-flag") == "3" and [p.flag for p in c.problems] == ["--kv-offloading-size"]
        shipped = cmdline.parse("vllm serve m --kv-offloading-size 8", cli_schema.releases()[-1])
        assert shipped.problems == ()  # a shipped release never runs the installed parser
    finally:
        cli_schema._live.cache_clear()


def test_a_parser_that_cannot_be_read_falls_back_to_the_shipped_table(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert cli_schema.live_schema("0.99.1", tmp_path / "no-vllm-here") is None
    monkeypatch.setattr(cli_schema, "installed_vllm", lambda: ("0.99.1", tmp_path / "no-vllm-here"))
    cli_schema._live.cache_clear()
    try:
        assert cli_schema.for_version("0.99.1").note == (
            f"kvops has no flag list for vLLM 0.99.1: read with vLLM {cli_schema.releases()[-1]}'s"
        )
    finally:
        cli_schema._live.cache_clear()
    assert sys.modules.get("vllm") is None  # nothing was imported in this process
