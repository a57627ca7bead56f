from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvops.doctor.reading import cli_schema, cmdline
from kvops.errors import UsageError

SEED_AMD = """docker run --rm \\
  --device /dev/kfd \\
  --device /dev/dri \\
  --group-add=video \\
  --ipc=host \\
  --env "VLLM_USE_TRITON_FLASH_ATTN=0" \\
  -e HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz \\
  -p 8000:8000 \\
  vllm/vllm-openai-rocm:latest \\
  --model Qwen/Qwen3-VL-235B-A22B-Instruct \\
  --tensor-parallel-size 8 \\
  --max-model-len 32768 \\
  --kv-offloading-backend native \\
  --kv-offloading-size 64 \\
  --disable-hybrid-kv-cache-manager"""


def test_vllm_serve_flag_forms() -> None:
    c = cmdline.parse(
        "vllm serve m --kv-offloading-size=64 --max_model_len 4096 --trust-remote-code -tp 4 --seed 1"
    )
    assert c.launcher == "vllm-serve" and c.model == "m"
    assert c.get("--kv-offloading-size") == "64"
    assert c.get("--max-model-len") == "4096"  # underscores mean dashes, as in vLLM
    assert c.has("--trust-remote-code") and c.get("--trust-remote-code") is None
    assert c.tensor_parallel_size() == 4
    assert c.offloading() == "native" and c.connector() == "OffloadingConnector"


def test_boolean_flag_does_not_swallow_the_model() -> None:
    c = cmdline.parse("vllm serve --disable-hybrid-kv-cache-manager org/model")
    assert c.model == "org/model"


def test_python_module_form_with_kv_transfer_config_json() -> None:
    c = cmdline.parse(
        "python3 -m vllm.entrypoints.openai.api_server --model m "
        """--kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'"""
    )
    assert c.launcher == "api-server" and c.served_model() == "m"
    assert c.kv_transfer_config() == {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
    assert c.offloading() == "lmcache"


def test_malformed_kv_transfer_config_is_a_problem_with_jsons_own_message() -> None:
    c = cmdline.parse("vllm serve m --kv-transfer-config '{oops'", "0.14.0")
    assert c.kv_transfer_config() is None and c.offloading() is None  # rules never crash on it
    expected = "--kv-transfer-config is not valid JSON: Expecting property name enclosed in double quotes"
    assert c.kv_transfer_config_error().startswith(expected)
    assert [p.kind for p in c.problems] == ["bad-json"] and "line 1 column 2 (char 1)" in c.problems[
        0
    ].message


def test_docker_line_with_env_and_rocm_image() -> None:
    c = cmdline.parse(SEED_AMD)
    assert c.launcher == "docker" and c.image == "vllm/vllm-openai-rocm:latest"
    assert c.env_dict()["VLLM_USE_TRITON_FLASH_ATTN"] == "0"
    assert c.platform_hint() == "rocm"
    assert c.docker_opt("--ipc") == "host"
    assert c.offloading_size_gib() == 64.0


def test_unknown_flags_are_kept_and_noted() -> None:
    c = cmdline.parse("vllm serve m --future-flag 3 --kv-offloading-size 8")
    assert c.unknown_flags == ("--future-flag",)
    assert "--future-flag 3" in c.render()
    assert c.problems[0].message.startswith("`--future-flag` is not a flag of any vLLM release kvops knows")


def test_fix_removes_both_spellings_adds_flags_and_env() -> None:
    c = cmdline.parse(SEED_AMD)
    fixed = c.with_fix(
        remove=["--kv-offloading-size", "--kv-offloading-backend", "--disable-hybrid-kv-cache-manager"],
        add=["--kv-cache-dtype=fp8"],
        env={"VLLM_ROCM_USE_AITER_MOE": "0"},
    ).render()
    assert "--kv-offloading" not in fixed and "--disable-hybrid" not in fixed
    assert "--kv-cache-dtype=fp8" in fixed and "-e VLLM_ROCM_USE_AITER_MOE=0" in fixed
    reparsed = cmdline.parse(fixed)  # the printed line parses back to the same thing
    assert reparsed.env_dict()["VLLM_ROCM_USE_AITER_MOE"] == "0"
    assert reparsed.image == c.image and reparsed.get("--model") == c.get("--model")


def test_docker_option_fix_replaces_shm_size() -> None:
    c = cmdline.parse("docker run --shm-size 1g vllm/vllm-openai:v0.17.0 --model m --kv-offloading-size 64")
    fixed = c.with_fix(docker_add=["--ipc=host"]).render()
    assert "--ipc=host" in fixed and "--shm-size" not in fixed


def test_secrets_print_as_names() -> None:
    c = cmdline.parse("HF_TOKEN=hf_secretsecretsecret1 vllm serve m --api-key sk-live-123456 --hf-token=hf_x")
    line = c.render()
    assert "hf_secret" not in line and "sk-live" not in line and "hf_x" not in line
    assert (
        "HF_TOKEN=$HF_TOKEN" in line and "--api-key $VLLM_API_KEY" in line and "--hf-token=$HF_TOKEN" in line
    )
    assert "$HF_TOKEN" in c.with_fix(add=["--seed=1"]).render()


def test_redact_text_hides_known_values_and_assignments() -> None:
    known = {"sk-live-123456": "$VLLM_API_KEY"}
    text = "got sk-live-123456 and MY_PASSWORD=hunter2 and password: pw1 and hf_abcdefghijklmnopqrst"
    out = cmdline.redact_text(text, known)
    for secret in ("sk-live-123456", "hunter2", "pw1", "hf_abcdefghijklmnopqrst"):
        assert secret not in out
    assert "MY_PASSWORD=$MY_PASSWORD" in out
    assert (
        cmdline.redact_text("12 tokens per block, --ssl-keyfile k.pem")
        == "12 tokens per block, --ssl-keyfile k.pem"
    )


@pytest.mark.parametrize("line", ["", "ls -la", "vllm serve 'unterminated", "docker run --rm"])
def test_not_a_serve_line_is_a_usage_error(line: str) -> None:
    with pytest.raises(UsageError):
        cmdline.parse(line)


def test_serve_line_is_rebuilt_from_vllms_non_default_args() -> None:
    logged = (
        "{'model_tag': 'deepseek-ai/DeepSeek-V3.2', 'model': 'deepseek-ai/DeepSeek-V3.2',"
        " 'tensor_parallel_size': 8, 'kv_offloading_size': 64.0,"
        " 'disable_hybrid_kv_cache_manager': True, 'enable_prefix_caching': False,"
        " 'kv_transfer_config': {'kv_connector': 'OffloadingConnector', 'kv_role': 'kv_both'}}"
    )
    c = cmdline.from_non_default_args(logged)
    assert c is not None and c.model == "deepseek-ai/DeepSeek-V3.2"
    assert c.tensor_parallel_size() == 8 and c.offloading_size_gib() == 64.0
    assert c.has("--disable-hybrid-kv-cache-manager") and c.flag_bool("--enable-prefix-caching") is False
    assert c.connector() == "OffloadingConnector"


def test_non_literal_values_in_logged_args_are_skipped() -> None:
    logged = "{'model': 'm', 'compilation_config': CompilationConfig(level=3), 'kv_offloading_size': 8.0}"
    c = cmdline.from_non_default_args(logged)
    assert c is not None and c.model == "m" and c.get("--kv-offloading-size") == "8.0"
    assert not c.has("--compilation-config")
    assert cmdline.from_non_default_args("garbage") is None


def test_quoted_secrets_in_logged_dicts_are_redacted() -> None:
    text = "non-default args: {'api_key': ['sk-abc123'], 'hf_token': 'hf_x', 'tokenizer': 'org/tok'}"
    out = cmdline.redact_text(text)
    assert "sk-abc123" not in out and "hf_x'" not in out and "'org/tok'" in out
    assert "'api_key': ['$VLLM_API_KEY'" in out


_ANY = cli_schema.for_version(None)
_names = st.from_regex(r"--[a-z][a-z0-9]{1,8}(-[a-z0-9]{1,6}){0,2}", fullmatch=True).filter(
    lambda f: not f.startswith("--no-") and _ANY.lookup(f) is None  # flags no release has
)
_values = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12).filter(
    lambda v: not v.startswith("-") and "\\n" not in v
)


@given(st.lists(st.tuples(_names, _values), min_size=1, max_size=6))
@settings(max_examples=150, deadline=None)
def test_render_then_parse_gives_back_the_same_flags(pairs) -> None:
    parts = ["vllm", "serve", "org/model"] + [f"{flag} {shlex.quote(value)}" for flag, value in pairs]
    c = cmdline.parse(" ".join(parts))
    again = cmdline.parse(c.render())
    assert [(a.flag, a.value) for a in again.args] == [(a.flag, a.value) for a in c.args]
    assert again.model == "org/model"


def test_redaction_keeps_quotes_and_punctuation_around_secrets() -> None:
    assert cmdline.redact_text("env 'HF_TOKEN=abc', next") == "env 'HF_TOKEN=$HF_TOKEN', next"
    assert cmdline.redact_text('"--api-key=sk-1",') == '"--api-key=$VLLM_API_KEY",'
