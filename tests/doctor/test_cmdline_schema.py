"""The serve line read with each release's own flag table (kvops/doctor/reading/vllm_cli.json): the bugs
issue 16 lists, FlexibleArgumentParser's rewrites, secrets by an explicit list."""

from __future__ import annotations

import json

import pytest

from kvops.doctor import gen_cli_schema
from kvops.doctor.reading import cli_schema, cmdline


def kinds(c: cmdline.ServeCommand) -> list[str]:
    return [p.kind for p in c.problems]


# ---- the shipped schema ------------------------------------------------------------------------
def test_schema_covers_every_supported_release_and_knows_the_flag_kinds() -> None:
    assert cli_schema.releases() == list(gen_cli_schema.RELEASES)
    new = cli_schema.for_version("0.14.0")
    assert new.lookup("--enforce-eager").negative() == "--no-enforce-eager"  # BooleanOptionalAction
    assert new.lookup("--lora-modules").nargs == "+"
    assert new.lookup("--api-key").nargs == "+"
    assert new.lookup("--kv-transfer-config").value_type == "json"
    assert new.lookup("--max-model-len").value_type == "int"
    assert "fp8" in new.lookup("--kv-cache-dtype").choices
    assert new.lookup("-tp") is new.lookup("--tensor-parallel-size")  # aliases from the parser
    assert new.rewrites.o_level == "--optimization-level"
    old = cli_schema.for_version("0.10.0")
    assert old.lookup("--kv-offloading-size") is None and old.rewrites.o_level == "-O.level"
    assert old.lookup("--api-key").nargs is None  # one key per flag before it took several


def test_flag_presence_is_per_release() -> None:
    where = cli_schema.releases_with("--kv-offloading-size")
    assert where and "0.10.0" not in where and "0.14.0" in where
    assert cli_schema.releases_with("--no-such-flag") == []


@pytest.mark.parametrize(
    ("asked", "used"), [("0.9.2", "0.10.0"), ("0.14.0", "0.14.0"), ("0.14.5", "0.14.1"), ("9.0.0", None)]
)
def test_a_release_without_a_schema_reads_with_the_nearest_and_says_so(asked: str, used: str | None) -> None:
    schema = cli_schema.for_version(asked)
    used = used or cli_schema.releases()[-1]
    assert schema.version == used
    if asked == used:
        assert schema.note is None
    else:
        assert schema.note == f"kvops has no flag list for vLLM {asked}: read with vLLM {used}'s"


def test_a_fork_version_gets_one_note_not_a_flood_of_unknown_flags() -> None:
    c = cmdline.parse(
        "vllm serve m --kv-offloading-size 8 --enforce-eager -tp 2 --max-model-len 4k", "0.14.1+rocm7"
    )
    assert c.problems == () and c.schema_version == "0.14.1" and "0.14.1+rocm7" in (c.schema_note or "")


# ---- the bugs issue 16 lists ---------------------------------------------------------------------
def test_lora_modules_keeps_every_value() -> None:
    c = cmdline.parse("vllm serve m --lora-modules a=x b=y --seed 1", "0.14.0")
    assert c.get_all("--lora-modules") == ["a=x", "b=y"] and c.get("--seed") == "1"
    assert "--lora-modules a=x b=y" in c.render()


def test_api_key_with_several_keys_loses_none_and_hides_all() -> None:
    c = cmdline.parse("vllm serve m --api-key k1-secret k2-secret --port 8000", "0.14.0")
    assert c.get_all("--api-key") == ["k1-secret", "k2-secret"] and c.get("--port") == "8000"
    line = c.render()
    assert "k1-secret" not in line and "k2-secret" not in line
    assert "--api-key $VLLM_API_KEY $VLLM_API_KEY" in line
    assert cmdline.secret_values(c) == {"k1-secret": "$VLLM_API_KEY", "k2-secret": "$VLLM_API_KEY"}


@pytest.mark.parametrize(("word", "meant"), [("True", True), ("False", False), ("true", True)])
def test_switch_with_true_false_is_kept_and_reported_as_vllm_rejects_it(word: str, meant: bool) -> None:
    c = cmdline.parse(f"vllm serve m --enforce-eager {word} --port 1", "0.14.0")
    assert c.model == "m" and c.extra == () and c.flag_bool("--enforce-eager") is meant
    assert kinds(c) == ["bool-with-value"] and "unrecognized arguments" in c.problems[0].message
    assert f"--enforce-eager {word}" in c.render()


def test_flags_kvops_never_typed_in_are_known() -> None:
    c = cmdline.parse("vllm serve m --enable-log-deltas --no-enable-prefix-caching", "0.14.0")
    assert c.problems == () and c.flag_bool("--enable-prefix-caching") is False


@pytest.mark.parametrize(
    "line",
    ["--max-num-batched-tokens 8192", "--tokenizer org/tok", "--tokenizer-mode auto", "--max-num-seqs 4"],
)
def test_token_in_a_flag_name_is_not_a_secret(line: str) -> None:
    c = cmdline.parse(f"vllm serve m {line}", "0.14.0")
    assert line in c.render() and cmdline.secret_values(c) == {}
    assert cmdline.redact_text(f"vllm serve m {line}") == f"vllm serve m {line}"


def test_offloading_flag_on_a_release_without_it_is_named() -> None:
    c = cmdline.parse("vllm serve m --kv-offloading-size 64 --kv-offloading-backend native", "0.10.0")
    first = cli_schema.releases_with("--kv-offloading-size")[0]
    assert kinds(c) == ["unknown-flag", "unknown-flag"]
    assert c.problems[0].message.startswith(
        f"`--kv-offloading-size` does not exist in vLLM 0.10.x (it exists in {first}"
    )
    assert c.get("--kv-offloading-size") == "64"  # kept with its value, not a stray positional


def test_bad_choice_missing_value_and_stray_positional_are_problems() -> None:
    c = cmdline.parse("vllm serve m extra --kv-cache-dtype fp9 --max-model-len", "0.14.0")
    assert sorted(kinds(c)) == ["bad-choice", "missing-value", "stray-value"]
    assert c.extra == ("extra",) and "extra" in c.render()


# ---- FlexibleArgumentParser's rewrites -------------------------------------------------------------
def test_underscores_dotted_keys_and_o_level() -> None:
    c = cmdline.parse(
        "vllm serve m --max_model_len 4096 --kv_transfer_config.kv_connector OffloadingConnector "
        "--kv-transfer-config.kv_connector_extra_config.cpu_bytes_to_use 1073741824 -O3",
        "0.14.0",
    )
    assert c.get("--max-model-len") == "4096" and c.problems == ()
    assert c.kv_transfer_config() == {
        "kv_connector": "OffloadingConnector",
        "kv_connector_extra_config": {"cpu_bytes_to_use": 1073741824},
    }
    assert c.offloading() == "native" and c.offloading_size_gib() == 1.0
    assert c.get("--optimization-level") == "3"
    assert cmdline.parse("vllm serve m -O3", "0.10.0").get("--compilation-config.level") == "3"


def test_dotted_keys_replace_the_whole_json_as_vllm_appends_them_last() -> None:
    c = cmdline.parse(
        """vllm serve m --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1"}' """
        "--kv-transfer-config.kv_role kv_both",
        "0.14.0",
    )
    assert c.kv_transfer_config() == {"kv_role": "kv_both"}


def test_reparse_judges_the_same_tokens_with_another_release() -> None:
    c = cmdline.parse("vllm serve m --kv-offloading-size 8 --api-key a b")
    assert c.problems == () and c.get_all("--api-key") == ["a", "b"]
    old = cmdline.reparse(c, "0.10.0")
    assert "unknown-flag" in kinds(old) and "stray-value" in kinds(old)  # 0.10's --api-key takes one
    assert cmdline.reparse(old, "0.10.0") is old


def test_logged_list_values_keep_every_element() -> None:
    c = cmdline.from_non_default_args(
        "{'model': 'm', 'api_key': ['k1', 'k2'], 'lora_modules': ['a=x', 'b=y']}"
    )
    assert c is not None and c.get_all("--lora-modules") == ["a=x", "b=y"]
    assert c.get_all("--api-key") == ["k1", "k2"]


# ---- secrets -------------------------------------------------------------------------------------
def test_secrets_by_list_and_by_shape() -> None:
    text = (
        "HF_TOKEN=abcd1234 MAX_TOKENS=5 TOKENIZERS_PARALLELISM=false MY_API_KEY=zz99 "
        "Authorization: Bearer abcdefgh12345 --hf_token hf_q --api-key k1 k2 --ssl-keyfile key.pem"
    )
    out = cmdline.redact_text(text)
    assert "abcd1234" not in out and "zz99" not in out and "abcdefgh12345" not in out
    assert "MAX_TOKENS=5" in out and "TOKENIZERS_PARALLELISM=false" in out and "key.pem" in out
    assert "--hf_token $HF_TOKEN" in out and "--api-key $VLLM_API_KEY $VLLM_API_KEY" in out
    logged = "{'api_key': ['sk-1', 'sk-2'], 'max_num_batched_tokens': 8192, 'tokenizer': 'org/tok'}"
    shown = cmdline.redact_text(logged)
    assert "sk-1" not in shown and "sk-2" not in shown and "8192" in shown and "org/tok" in shown


def test_schema_file_is_what_the_generator_merges() -> None:
    """The shipped JSON has the generator's shape; variants never overlap in releases."""
    data = json.loads((cli_schema.resources.files("kvops.doctor.reading") / "vllm_cli.json").read_text())
    order = data["releases"]
    for name, variants in data["flags"].items():
        seen: set[str] = set()
        for v in variants:
            got = cli_schema._expand(v["releases"], order)
            assert not (got & seen), name
            seen |= got
    rebuilt = gen_cli_schema.merge({"a": {"flags": [], "rewrites": {"x": 1}}})
    assert rebuilt["releases"] == ["a"] and rebuilt["flags"] == {}


def test_config_yaml_flags_are_read_and_the_command_line_wins(tmp_path) -> None:
    cfg = tmp_path / "serve.yaml"
    cfg.write_text("tensor-parallel-size: 4\nmax_model_len: 8192\nenforce-eager: true\nnot-a-flag: 1\n")
    c = cmdline.parse(f"vllm serve m --config {cfg} --max-model-len 4096", "0.14.0")
    assert c.tensor_parallel_size() == 4 and c.get("--max-model-len") == "4096"
    assert c.flag_bool("--enforce-eager") is True
    assert [p.message for p in c.problems] == [
        f"in --config {cfg}: `--not-a-flag` is not a flag of any vLLM release kvops knows"
        f" ({cli_schema.releases()[0]}..{cli_schema.releases()[-1]})"
    ]
    assert c.render() == f"vllm serve m --config {cfg} --max-model-len 4096"  # the file is not inlined


def test_a_fix_removes_a_json_flag_with_its_dotted_keys() -> None:
    c = cmdline.parse("vllm serve m --kv-transfer-config.kv_connector X --seed 1", "0.14.0")
    fixed = c.with_fix(remove=["--kv-transfer-config"], add=["--kv-offloading-size=8"])
    assert fixed.render() == "vllm serve m --seed 1 --kv-offloading-size=8"


def test_a_second_key_that_the_release_reads_as_a_stray_word_is_still_hidden() -> None:
    c = cmdline.parse("vllm serve m --api-key k1-secret k2-secret", "0.10.0")  # 0.10: one key
    assert c.extra == ("k2-secret",) and "stray-value" in kinds(c)
    assert "k2-secret" not in c.render() and "k1-secret" not in c.render()
    assert cmdline.redact_text("'k2-secret' is not the value", cmdline.secret_values(c)) == (
        "'$VLLM_API_KEY' is not the value"
    )


def test_the_shipped_file_is_in_the_generators_own_layout() -> None:
    text = (cli_schema.resources.files("kvops.doctor.reading") / "vllm_cli.json").read_text()
    assert gen_cli_schema.dump(json.loads(text)) == text  # regenerating changes only what vLLM changed
