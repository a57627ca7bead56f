"""`kvops doctor` and `kvops size` end to end, through kvops.cli.main."""

from __future__ import annotations

import json

import pytest

from kvops.doctor.judging import catalog, diagnose
from kvops.doctor.judging.inputs import Inputs
from kvops.doctor.reading import platform

from .conftest import LOGS, MODELS

DSV32 = str(MODELS / "deepseek-v3.2.json")
DSV32_CMD = (
    "vllm serve deepseek-ai/DeepSeek-V3.2 --tensor-parallel-size 8 "
    "--kv-offloading-backend native --kv-offloading-size 64 --disable-hybrid-kv-cache-manager"
)
OFFLOAD_FLAGS = ("--kv-offloading-size", "--kv-offloading-backend", "--kv-transfer-config")


def findings(out: str) -> dict[str, dict]:
    return {f["id"]: f for f in json.loads(out)["findings"]}


def test_dsv32_with_offloading_on_affected_version_is_an_error(kvops) -> None:
    code, out, err = kvops(
        "doctor", "--model", DSV32, "--cmd", DSV32_CMD, "--vllm-version", "0.17.0", "--json"
    )
    assert code == 1, err
    f = findings(out)["mla-indexer-keyerror"]
    assert f["severity"] == "error"
    fixed = f["fixed_command"]
    assert not any(flag in fixed for flag in OFFLOAD_FLAGS)
    assert "--kv-cache-dtype=fp8" in fixed and fixed.startswith("vllm serve deepseek-ai/DeepSeek-V3.2")
    assert f["playbook"] == "playbooks/mla-indexer-keyerror.md"


@pytest.mark.parametrize("version", ["0.11.2", "0.18.0", "0.20.1"])
def test_dsv32_outside_the_affected_versions_is_not_reported(kvops, version: str) -> None:
    code, out, _ = kvops("doctor", "--model", DSV32, "--cmd", DSV32_CMD, "--vllm-version", version, "--json")
    assert "mla-indexer-keyerror" not in findings(out)
    assert code == 0


def test_dsv32_with_unknown_version_is_a_warning_naming_the_versions(kvops, monkeypatch) -> None:
    monkeypatch.setattr(diagnose, "resolve_version", lambda flag, log, command_text="": (None, "unknown"))
    from kvops.doctor import command  # noqa: F401 - resolve_version is imported inside run()

    code, out, _ = kvops("doctor", "--model", DSV32, "--cmd", DSV32_CMD, "--json")
    f = findings(out)["mla-indexer-keyerror"]
    assert f["severity"] == "warning" and code == 0
    assert any(">=0.12.0,<0.18.0" in u for u in f["could_not_check"])


def test_version_comes_from_the_log_when_not_given(kvops) -> None:
    log = str(LOGS / "vllm-offload-dsa-indexer-keyerror.log")
    code, out, _ = kvops("doctor", "--model", DSV32, "--cmd", DSV32_CMD, "--log", log, "--json")
    data = json.loads(out)
    assert data["vllm_version"] == {"version": "0.17.0", "source": "log"}
    f = findings(out)["mla-indexer-keyerror"]
    assert f["source"] == "log" and any("indexer.k_cache" in e for e in f["evidence"])
    assert code == 1


def test_aiter_gemm_log_gives_the_sourced_env_fix_first_and_the_seed_claim_last(kvops) -> None:
    log = str(LOGS / "rocm-aiter-ck-moe-gemm-unsupported.log")
    code, out, _ = kvops("doctor", "--log", log, "--json")
    f = findings(out)["aiter-gemm-unsupported"]
    assert code == 1
    assert f["fix"]["env"] == {"VLLM_ROCM_USE_AITER_MOE": "0"} and f["fix_confidence"] == "sourced"
    last = f["alternatives"][-1]
    assert last["confidence"] == "reported by the AMD guide, unverified"
    assert "--kv-offloading-size=64" in last["add"]
    assert all(a["confidence"] == "sourced" for a in f["alternatives"][:-1])


def test_aiter_text_output_shows_fixed_docker_command(kvops) -> None:
    cmd = (
        "docker run --ipc=host -e VLLM_ROCM_USE_AITER=1 -e HF_TOKEN=hf_abcdefghijklmnopqrstuv "
        "vllm/vllm-openai-rocm:latest --model Qwen/Qwen3-VL-235B-A22B-Instruct --tensor-parallel-size 8"
    )
    log = str(LOGS / "rocm-aiter-ck-moe-gemm-unsupported.log")
    code, out, _ = kvops(
        "doctor", "--cmd", cmd, "--log", log, "--model", str(MODELS / "qwen3-vl-235b-a22b.json")
    )
    assert code == 1
    assert "ERROR aiter-gemm-unsupported" in out
    assert "-e VLLM_ROCM_USE_AITER_MOE=0" in out and "hf_abc" not in out and "HF_TOKEN=$HF_TOKEN" in out
    assert "reported by the AMD guide, unverified" in out


def test_aiter_config_rule_warns_from_the_command_alone(kvops) -> None:
    cmd = "VLLM_ROCM_USE_AITER=1 vllm serve Qwen/Qwen3-VL-235B-A22B-Instruct --tensor-parallel-size 8"
    code, out, _ = kvops("doctor", "--cmd", cmd, "--model", str(MODELS / "qwen3-vl-235b-a22b.json"), "--json")
    f = findings(out)["aiter-gemm-unsupported"]
    assert f["severity"] == "warning" and code == 0
    assert any("1536 / TP 8 = 192" in e for e in f["evidence"])


def test_clean_llama_8b_offloading_setup_has_no_error(kvops) -> None:
    cmd = "vllm serve meta-llama/Llama-3.1-8B-Instruct --kv-offloading-backend native --kv-offloading-size 16"
    log = str(LOGS / "clean-llama-3.1-8b-offload.log")
    code, out, _ = kvops(
        "doctor", "--model", str(MODELS / "llama-3.1-8b.json"), "--cmd", cmd, "--log", log, "--json"
    )
    assert code == 0
    assert [f for f in json.loads(out)["findings"] if f["severity"] == "error"] == []


def test_docker_shm_size_too_small_for_the_offload_buffer(kvops) -> None:
    cmd = "docker run --gpus all --shm-size 1g vllm/vllm-openai:v0.17.0 --model m --kv-offloading-size 32"
    code, out, _ = kvops("doctor", "--cmd", cmd, "--json")
    f = findings(out)["vllm-offload-shm-insufficient"]
    assert code == 1 and "--ipc=host" in f["fixed_command"]
    ok = kvops("doctor", "--cmd", cmd.replace("--shm-size 1g", "--ipc=host"), "--json")[1]
    assert "vllm-offload-shm-insufficient" not in findings(ok)


@pytest.mark.parametrize("elided", ["", "... "])
def test_docker_default_shm_is_never_assumed(kvops, elided: str) -> None:
    # the docker options may be elided or set elsewhere (compose, daemon.json): Docker's 64 MiB default
    # is a premise, so the finding is info and says how to confirm it
    cmd = f"docker run --gpus all {elided}vllm/vllm-openai:v0.17.0 --model m --kv-offloading-size 32"
    code, out, _ = kvops("doctor", "--cmd", cmd, "--json")
    f = findings(out)["vllm-offload-shm-insufficient"]
    assert code == 0 and f["severity"] == "info" and f["fixed_command"] is None
    assert any("df -h /dev/shm" in n for n in f["notes"])


def test_a_df_line_in_the_log_gives_the_containers_shm(kvops, tmp_path) -> None:
    log = tmp_path / "df.log"
    log.write_text(
        "$ df -h /dev/shm\n"
        "Filesystem      Size  Used Avail Use% Mounted on\n"
        "shm              64M     0   64M   0% /dev/shm\n"
    )
    cmd = "docker run --gpus all vllm/vllm-openai:v0.17.0 --model m --kv-offloading-size 32"
    code, out, _ = kvops("doctor", "--cmd", cmd, "--log", str(log), "--json")
    f = findings(out)["vllm-offload-shm-insufficient"]
    assert code == 1 and f["severity"] == "error" and any("df line" in e for e in f["evidence"])


def test_secrets_never_printed_in_any_output(kvops, tmp_path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(
        "(APIServer pid=1) INFO 10-14 17:00:33 [utils.py:233]"
        " non-default args: {'api_key': 'sk-live-0123456789'}\n"
        + (LOGS / "vllm-kv-no-memory.log")
        .read_text()
        .replace("ValueError: No available", "HF_TOKEN=hf_zzzzzzzzzzzzzzzzzzzzzz ValueError: No available")
    )
    cmd = "HF_TOKEN=hf_zzzzzzzzzzzzzzzzzzzzzz vllm serve m --api-key sk-live-0123456789 --seed 1"
    for fmt in ([], ["--json"]):
        code, out, err = kvops("doctor", "--cmd", cmd, "--log", str(log), *fmt)
        assert code == 1
        assert "hf_zzzz" not in out + err and "sk-live" not in out + err
        assert "$HF_TOKEN" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "/nonexistent/config.json"], "not found"),
        (["--log", "/nonexistent.log"], "not found"),
        (["--cmd", "rm -rf /"], "not a vllm serve"),
        (["--check", "no-such-check"], "unknown check"),
        (["--frobnicate"], "unrecognized arguments"),
        (["--vllm-version", "banana", "--cmd", "vllm serve m"], "expected a vLLM release"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(kvops, argv: list[str], message: str) -> None:
    code, out, err = kvops("doctor", *argv)
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_malformed_model_json_and_binary_log_exit_2(kvops, tmp_path) -> None:
    (tmp_path / "config.json").write_text('{"num_hidden_layers": 2,')
    code, _, err = kvops("doctor", "--model", str(tmp_path))
    assert code == 2 and "not valid JSON" in err and err.count("\n") == 1
    binary = tmp_path / "dump.log"
    binary.write_bytes(b"\x00\x01\x02" * 1000)
    code, _, err = kvops("doctor", "--log", str(binary))
    assert code == 2 and "binary" in err and err.count("\n") == 1


def test_list_checks_covers_every_failure_and_lists_alert_runbooks(kvops, failures) -> None:
    code, out, _ = kvops("doctor", "--list-checks", "--json")
    rows = json.loads(out)["checks"]
    ids = {r["id"] for r in rows if r["kind"] == "failure"}
    assert code == 0 and len(ids) == len(failures)
    assert {"mla-indexer-keyerror", "aiter-gemm-unsupported", "vllm-offload-shm-insufficient"} <= ids
    text = kvops("doctor", "--list-checks")[1]
    assert "mla-indexer-keyerror" in text


def test_loader_accepts_alert_runbooks_and_reports_broken_files(tmp_path) -> None:
    (tmp_path / "KvopsTargetDown.md").write_text(
        "---\nid: KvopsTargetDown\nkind: alert\ntitle: t\nseverity: critical\n---\n## Meaning\nx\n"
    )
    (tmp_path / "broken.md").write_text("no front matter")
    (tmp_path / "bad-regex.md").write_text(
        "---\nid: bad-regex\nkind: failure\ntitle: t\nseverity: error\nsignatures: ['(']\n---\n"
    )
    cat = catalog.load(tmp_path)
    assert [a.id for a in cat.alerts] == ["KvopsTargetDown"] and cat.failures == ()
    assert len(cat.problems) == 2 and any("does not compile" in p for p in cat.problems)


def test_repro_without_vllm_or_gpu_says_so_and_prints_commands(kvops) -> None:
    # (mla-indexer-keyerror now runs vLLM's own code on CPU: tests/doctor/test_repro_release.py)
    code, out, _ = kvops("doctor", "--repro", "aiter-gemm-unsupported", "--model", DSV32)
    assert code == 0
    assert "could not reproduce here" in out and "vllm is not importable" in out
    serve = f"vllm serve {DSV32} --tensor-parallel-size 8"
    assert f"VLLM_ROCM_USE_AITER=1 {serve}" in out
    assert f"VLLM_ROCM_USE_AITER=1 VLLM_ROCM_USE_AITER_MOE=0 {serve}" in out


def test_repro_uses_the_users_command_and_its_fix(kvops) -> None:
    code, out, _ = kvops(
        "doctor", "--repro", "aiter-gemm-unsupported", "--cmd", DSV32_CMD + " --api-key sk-9999999"
    )
    assert code == 0 and DSV32_CMD.split(" --kv")[0] in out and "sk-9999999" not in out


def test_platform_findings_only_with_here() -> None:
    cat = catalog.load()
    old = platform.Platform(kernel="4.18.0-553.el8", memlock_bytes=64 * 1024, shm_free_bytes=1 << 30)
    cmd_findings = diagnose.diagnose(cat, Inputs(platform=None))
    assert cmd_findings.findings == []
    here = diagnose.diagnose(cat, Inputs(platform=old))
    ids = {f.id for f in here.findings}
    assert {"vllm-offload-madv-populate-einval", "vllm-offload-host-register-failed"} <= ids
    new = platform.Platform(kernel="6.8.0", memlock_bytes=-1)
    assert diagnose.diagnose(cat, Inputs(platform=new)).findings == []


def test_probe_reads_a_fixture_tree(tmp_path) -> None:
    proc, sys_root = tmp_path / "proc", tmp_path / "sys"
    (proc / "sys" / "kernel").mkdir(parents=True)
    (proc / "sys" / "kernel" / "osrelease").write_text("5.10.0-test\n")
    (proc / "meminfo").write_text("MemTotal:       2097152 kB\nMemFree: 1 kB\n")
    card = sys_root / "class" / "drm" / "card0" / "device"
    card.mkdir(parents=True)
    (card / "vendor").write_text("0x1002\n")
    plat = platform.probe(proc, sys_root, tmp_path, environ={"VLLM_ROCM_USE_AITER": "1", "HOME": "/x"})
    assert plat.vendor == "amd" and plat.gpu_count == 1 and plat.host_ram_bytes == 2 << 30
    assert plat.kernel_version() == (5, 10) and plat.env == {"VLLM_ROCM_USE_AITER": "1"}
    assert "GPU memory: could not check" in platform.describe(plat)


def test_size_llama_405b_says_516096(kvops) -> None:
    code, out, _ = kvops("size", "--model", str(MODELS / "llama-3.1-405b.json"), "--json")
    data = json.loads(out)
    assert code == 0 and data["kv_bytes_per_token"] == 516096 and data["attention"] == "gqa"
    # config's max_position_embeddings (131072) x 1 sequence
    assert data["recommended_kv_offloading_size_gib"] == 63
    assert data["seed_guidance_gib"]["context"] == 131072


def test_size_mla_explains_why_it_is_small(kvops) -> None:
    code, out, _ = kvops("size", "--model", str(MODELS / "deepseek-v3.json"), "--max-model-len", "32768")
    assert code == 0
    assert "KV bytes per token: 70,272" in out and "naive MHA formula" in out and "latent" in out
    assert "32K -> 32-64" in out


def test_size_tp_fp8_and_concurrency(kvops) -> None:
    argv = ["size", "--model", str(MODELS / "llama-3.1-405b.json"), "--json", "--kv-cache-dtype", "fp8"]
    data = json.loads(
        kvops(*argv, "--tensor-parallel-size", "8", "--max-model-len", "65536", "--concurrency", "4")[1]
    )
    assert data["kv_bytes_per_token"] == 516096 // 2
    assert data["kv_bytes_per_token_per_gpu"] == 516096 // 2 // 8
    assert data["buffer_bytes"] == 516096 // 2 * 65536 * 4
    assert data["recommended_kv_offloading_size_gib"] == 63


def test_size_bad_input_exit_2(kvops) -> None:
    assert kvops("size", "--model", "/nope")[0] == 2
    assert kvops("size", "--model", str(MODELS / "llama-3.1-8b.json"), "--concurrency", "0")[0] == 2


def test_a_fix_the_command_already_has_prints_no_command(kvops) -> None:
    seed = (
        "docker run --ipc=host -e VLLM_ROCM_USE_AITER=1 vllm/vllm-openai-rocm:latest --model m "
        "--kv-offloading-backend native --kv-offloading-size 64 --disable-hybrid-kv-cache-manager"
    )
    log = str(LOGS / "rocm-aiter-ck-moe-gemm-unsupported.log")
    f = findings(kvops("doctor", "--cmd", seed, "--log", log, "--json")[1])["aiter-gemm-unsupported"]
    assert "VLLM_ROCM_USE_AITER_MOE=0" in f["fixed_command"]
    # the AMD guide's "add the offloading flags" is already in the command: never proposed again
    assert all("--kv-offloading-size=64" not in a["add"] for a in f["alternatives"])
    assert any("not proposed again" in n and "--kv-offloading-size=64" in n for n in f["notes"])
    assert "VLLM_ROCM_USE_AITER=0" in f["alternatives"][-1]["fixed_command"]
    _code, text, _ = kvops("doctor", "--cmd", seed, "--log", log)
    assert "reported by the AMD guide" not in text and "not proposed again" in text


def test_log_alone_rebuilds_the_command_from_non_default_args(kvops, tmp_path) -> None:
    log = tmp_path / "vllm.log"
    text = (LOGS / "vllm-kv-no-memory.log").read_text()
    log.write_text(
        text.replace(
            "non-default args: {'model': 'org/model', 'kv_offloading_size': 64.0}",
            "non-default args: {'model': 'deepseek-ai/DeepSeek-V3.2', 'kv_offloading_size': 64.0,"
            " 'api_key': ['sk-live-abcdef123']}",
        )
    )
    code, out, _ = kvops("doctor", "--log", str(log), "--model", DSV32, "--json")
    data = json.loads(out)
    f = findings(out)["mla-indexer-keyerror"]  # from the config rule: version 0.17.0 from the log
    assert code == 1 and f["severity"] == "error" and f["source"] == "config"
    assert f["fixed_command"].startswith("vllm serve deepseek-ai/DeepSeek-V3.2")
    assert "--kv-offloading-size" not in f["fixed_command"]
    assert any("rebuilt from the log" in n for n in data["notes"])
    assert "sk-live" not in out


def test_repro_json_is_only_json(kvops) -> None:
    code, out, _ = kvops("doctor", "--repro", "aiter-gemm-unsupported", "--model", DSV32, "--json")
    data = json.loads(out)
    assert code == 0 and data["reproduced"] is None and data["could_not"]
    expected = f"VLLM_ROCM_USE_AITER=1 VLLM_ROCM_USE_AITER_MOE=0 vllm serve {DSV32} --tensor-parallel-size 8"
    assert data["fixed_command"] == expected


def test_repro_on_a_machine_with_gpu_and_vllm_starts_both_commands(tmp_path) -> None:
    """The GPU path runs real processes; shell scripts stand in for vllm serve (injected runner)."""
    from kvops.doctor.reading import cmdline
    from kvops.doctor.reproducing import repro

    pb = catalog.load().get("mla-indexer-keyerror")
    fail = tmp_path / "fail.sh"
    fail.write_text("echo loading\necho \"KeyError: 'model.layers.0.self_attn.indexer.k_cache'\"\nsleep 30\n")
    ok = tmp_path / "ok.sh"
    ok.write_text("echo 'INFO:     Application startup complete.'\nsleep 30\n")
    started: list[str] = []

    def runner(line: str, book, timeout: float) -> tuple[str, str]:
        started.append(line)
        return repro.serve_until(f"sh {fail if '--kv-offloading-size' in line else ok}", book, timeout)

    cmd = cmdline.parse("vllm serve m --kv-offloading-size 64")
    result = repro.attempt(pb, None, cmd, timeout=20, gpu=True, vllm=True, runner=runner)
    assert started == ["vllm serve m --kv-offloading-size 64", "vllm serve m --kv-cache-dtype=fp8"]
    assert result["reproduced"] is True and result["fix_confirmed"] is True
    assert "indexer.k_cache" in result["failing_outcome"]


def test_here_judges_a_plain_serve_line_against_this_hosts_shm(kvops, monkeypatch) -> None:
    small = platform.Platform(
        shm_free_bytes=2 << 30, host_ram_bytes=512 << 30, kernel="6.8.0", memlock_bytes=-1
    )
    monkeypatch.setattr(platform, "probe", lambda **_: small)
    code, out, _ = kvops("doctor", "--here", "--cmd", "vllm serve m --kv-offloading-size 8", "--json")
    f = findings(out)["vllm-offload-shm-insufficient"]
    assert code == 1 and any("2.0 GiB free" in e for e in f["evidence"])
    assert f["fixed_command"] is None and f["notes"] == []  # a docker option cannot fix a bare serve line
    assert "vllm-offload-host-ram-oom" not in findings(out)  # 8 x 1.92 fits in 512 GiB
    _, away, _ = kvops("doctor", "--cmd", "vllm serve m --kv-offloading-size 8", "--json")
    assert "vllm-offload-shm-insufficient" not in findings(away)  # without --here: never this host


@pytest.mark.parametrize(
    ("model", "cmd", "expected", "severity"),
    [
        (
            "qwen3-next-80b-a3b.json",
            "vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct --kv-offloading-size 16"
            " --disable-hybrid-kv-cache-manager",
            "vllm-hma-disabled-unify-fail",
            "error",
        ),
        (
            "deepseek-v3.2.json",
            "vllm serve m --gpus all --block-size 16",
            "vllm-dsa-block-size-64",
            "warning",
        ),
        (
            "deepseek-v3.json",
            "VLLM_ROCM_USE_AITER=1 vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 4",
            "rocm-aiter-mla-heads",
            "error",
        ),
        (
            "llama-3.1-8b.json",
            "vllm serve m --kv-offloading-backend mooncake",
            "vllm-offload-config-invalid",
            "error",
        ),
        (
            "deepseek-v3.2.json",
            "vllm serve m --kv-transfer-config"
            """ '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'""",
            "lmcache-dsa-pointer-mismatch",
            "error",
        ),
        (
            "gemma-3-27b.json",
            "vllm serve google/gemma-3-27b-it --kv-offloading-size 8",
            "vllm-hma-turned-off-by-connector",
            "warning",
        ),
    ],
)
def test_config_rules(kvops, model: str, cmd: str, expected: str, severity: str) -> None:
    out = kvops("doctor", "--model", str(MODELS / model), "--cmd", cmd, "--vllm-version", "0.17.0", "--json")[
        1
    ]
    assert findings(out)[expected]["severity"] == severity


def test_config_rules_stay_quiet_when_the_fix_is_in_place(kvops) -> None:
    argv = ["--vllm-version", "0.17.0", "--json"]
    hybrid = str(MODELS / "qwen3-next-80b-a3b.json")
    out = kvops("doctor", "--model", hybrid, "--cmd", "vllm serve m --kv-offloading-size 16", *argv)[1]
    assert "vllm-hma-disabled-unify-fail" not in findings(out)
    heads = "VLLM_ROCM_USE_AITER=1 vllm serve m --tensor-parallel-size 8"
    out = kvops("doctor", "--model", str(MODELS / "deepseek-v3.json"), "--cmd", heads, *argv)[1]
    assert "rocm-aiter-mla-heads" not in findings(out)
    newer = kvops(
        "doctor",
        "--model",
        str(MODELS / "gemma-3-27b.json"),
        "--cmd",
        "vllm serve m --kv-offloading-size 8",
        "--vllm-version",
        "0.22.0",
        "--json",
    )[1]
    assert "vllm-hma-turned-off-by-connector" not in findings(newer)


def test_warnings_exit_0_unless_strict(kvops) -> None:
    argv = ["doctor", "--model", DSV32, "--cmd", DSV32_CMD, "--vllm-version", "0.17.0", "--check"]
    assert kvops(*argv, "vllm-offload-mla-garbage-output")[0] == 0  # a warning only
    assert kvops(*argv, "vllm-offload-mla-garbage-output", "--strict")[0] == 1


def test_json_findings_carry_the_design_contract_fields(kvops) -> None:
    log = str(LOGS / "rocm-aiter-ck-moe-gemm-unsupported.log")
    out = kvops(
        "doctor", "--model", DSV32, "--cmd", DSV32_CMD, "--log", log, "--vllm-version", "0.17.0", "--json"
    )[1]
    data = json.loads(out)
    assert len(data["findings"]) >= 2
    for f in data["findings"]:
        assert {
            "id",
            "severity",
            "title",
            "evidence",
            "fix",
            "fixed_command",
            "playbook",
            "alternatives",
        } <= set(f)
        assert f["severity"] in ("error", "warning", "info")
        assert {"remove", "add", "env"} <= set(f["fix"])
        assert all({"remove", "add", "env", "confidence"} <= set(a) for a in f["alternatives"])
        assert all(t.startswith("--") for t in f["fix"]["add"])


def test_json_stays_valid_when_evidence_holds_secret_assignments(kvops, tmp_path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(
        (LOGS / "vllm-kv-no-memory.log")
        .read_text()
        .replace("ValueError: No available", 'env "MY_API_KEY=abc123", ValueError: No available')
    )
    out = kvops("doctor", "--log", str(log), "--json")[1]
    evidence = findings(out)["vllm-kv-no-memory"]["evidence"][0]
    assert '"MY_API_KEY=$MY_API_KEY",' in evidence and "abc123" not in out


def test_playbook_with_a_bad_condition_is_reported_not_used(tmp_path) -> None:
    head = "---\nid: {id}\nkind: failure\ntitle: t\nseverity: error\nconditions: {cond}\n---\n"
    (tmp_path / "a.md").write_text(head.format(id="a", cond="{attentoin: [mla]}"))
    (tmp_path / "b.md").write_text(head.format(id="b", cond="{vllm_version: '~=0.12'}"))
    (tmp_path / "c.md").write_text(head.format(id="c", cond="{check: no-such-check}"))
    (tmp_path / "d.md").write_text(head.format(id="d", cond="{attention: [mla]}"))
    cat = catalog.load(tmp_path)
    assert [pb.id for pb in cat.failures] == ["d"] and len(cat.problems) == 3


def test_a_log_from_a_pipe_is_read_and_a_directory_or_device_is_one_line(kvops, tmp_path) -> None:
    """`--log <(kubectl logs POD)` names a FIFO (/dev/fd/63): it is read, not "not found". A
    directory and a stream of NUL bytes (/dev/zero) are one clear line and exit 2."""
    import os
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    text = (LOGS / "vllm-offload-dsa-indexer-keyerror.log").read_bytes()

    def feed() -> None:
        with open(fifo, "wb") as w:
            w.write(text)

    writer = threading.Thread(target=feed)
    writer.start()
    code, out, _ = kvops("doctor", "--log", str(fifo), "--json")
    writer.join(timeout=10)
    assert code == 1 and "mla-indexer-keyerror" in findings(out)
    code, out, err = kvops("doctor", "--log", str(tmp_path))
    assert code == 2 and err.strip().endswith("is a directory, not a log file") and len(err.splitlines()) == 1
    code, out, err = kvops("doctor", "--log", "/dev/zero")
    assert code == 2 and "looks binary" in err and len(err.splitlines()) == 1
