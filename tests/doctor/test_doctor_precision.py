"""Precision before recall, silent misconfigurations, and hostile input (issues 16 and 17).

A generic message alone is at most an `info` naming what would confirm it; a specific claim needs
the specific evidence. Silent misconfigurations come from the command, model and version alone.
Every string from outside is shown through kvops.termsafe.visible, and inputs built to break a
parser end in one line and exit 2, never a traceback.
"""

# ruff: noqa: E501 - log lines are kept whole, as vLLM and issue reports print them

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvops.doctor.judging import catalog, rules
from kvops.doctor.judging.diagnose import diagnose
from kvops.doctor.judging.inputs import Inputs
from kvops.doctor.judging.logs import scan

from .conftest import MODELS

LLAMA = str(MODELS / "llama-3.1-8b.json")


def findings(out: str) -> dict[str, dict]:
    return {f["id"]: f for f in json.loads(out)["findings"]}


def _log(tmp_path: Path, *lines: str) -> str:
    path = tmp_path / "report.log"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


# ---- precision ---------------------------------------------------------------------------------


def test_broadcast_error_without_lmcache_is_only_info_naming_the_evidence(kvops, tmp_path) -> None:
    log = _log(tmp_path, "ValueError: could not broadcast input array from shape (513,) into shape (512,)")
    code, out, _ = kvops("doctor", "--log", log, "--json")
    f = findings(out)["lmcache-dsa-pointer-mismatch"]
    assert code == 0 and f["severity"] == "info"
    assert any("LMCache" in n for n in f["notes"]) and any("DSA" in n for n in f["notes"])


def test_broadcast_error_with_lmcache_and_a_dsa_model_is_the_error(kvops, tmp_path) -> None:
    log = _log(
        tmp_path,
        "(APIServer pid=1) INFO 10-14 17:00:33 [utils.py:233] non-default args: {'model':"
        " 'deepseek-ai/DeepSeek-V3.2', 'kv_transfer_config': {'kv_connector': 'LMCacheConnectorV1'}}",
        "ValueError: could not broadcast input array from shape (99,) into shape (78,)",
    )
    code, out, _ = kvops("doctor", "--log", log, "--json")
    f = findings(out)["lmcache-dsa-pointer-mismatch"]
    assert code == 1 and f["severity"] == "error"
    assert any("(lmcache)" in e for e in f["evidence"]) and any("(dsa)" in e for e in f["evidence"])


def test_a_given_model_that_contradicts_the_failure_demotes_it(kvops, tmp_path) -> None:
    log = _log(
        tmp_path,
        "from lmcache.v1 import cache_engine  # LMCacheConnectorV1, DeepSeek-V3.2",
        "ValueError: could not broadcast input array from shape (99,) into shape (78,)",
    )
    code, out, _ = kvops("doctor", "--log", log, "--model", LLAMA, "--json")
    assert code == 0 and findings(out)["lmcache-dsa-pointer-mismatch"]["severity"] == "info"


FP8 = "ValueError(\"type fp8e4nv not supported in this architecture. The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')\")"


def test_fp8_weight_kernel_failure_is_not_called_an_fp8_kv_cache_failure(kvops, tmp_path) -> None:
    log = _log(tmp_path, "[Bug]: Qwen3 FP8 on 0.8.5: type fp8e4nv not supported in this architecture.", FP8)
    code, out, _ = kvops("doctor", "--log", log, "--json")
    f = findings(out)["fp8-kv-unsupported-arch"]
    assert code == 0 and f["severity"] == "info" and any("FP8 KV cache" in n for n in f["notes"])
    # ...and its --kv-cache-dtype fix is not pushed on a command that has no FP8 KV cache
    code, text, _ = kvops("doctor", "--log", log)
    assert "INFO fp8-kv-unsupported-arch" in text and "ERROR" not in text


def test_fp8_kv_cache_in_the_command_confirms_the_fp8_kv_failure(kvops, tmp_path) -> None:
    log = _log(tmp_path, FP8)
    code, out, _ = kvops("doctor", "--log", log, "--cmd", "vllm serve m --kv-cache-dtype fp8", "--json")
    f = findings(out)["fp8-kv-unsupported-arch"]
    assert code == 1 and f["severity"] == "error"
    assert "--kv-cache-dtype=fp8_e5m2" in f["fixed_command"]


def test_device_gemm_without_the_word_aiter_is_found_on_rocm(kvops, tmp_path) -> None:
    line = "RuntimeError: wrong! device_gemm with the specified compilation parameters does not support this GEMM problem"
    code, out, _ = kvops(
        "doctor", "--log", _log(tmp_path, "8x AMD Instinct MI300X, ROCm 6.4", line), "--json"
    )
    assert code == 1 and findings(out)["aiter-gemm-unsupported"]["severity"] == "error"
    # The message alone is Composable Kernel's, and CK is built for ROCm only: it is its own
    # platform evidence, so the bare line is the same error (with the ROCm evidence named).
    (tmp_path / "bare").mkdir()
    code, out, _ = kvops("doctor", "--log", _log(tmp_path / "bare", line), "--json")
    f = findings(out)["aiter-gemm-unsupported"]
    assert code == 1 and f["severity"] == "error"
    assert any("(rocm)" in e for e in f["evidence"])


def test_env_variable_names_are_matched_case_insensitively() -> None:
    from kvops.doctor.reading.platform import Platform

    ctx = rules.Context(platform=Platform(env={"vllm_rocm_use_aiter": "1"}))
    assert rules.evaluate({"env_on": ["VLLM_ROCM_USE_AITER"]}, ctx, here=True).holds is True


# ---- silent misconfigurations --------------------------------------------------------------------


def test_cpu_offload_gb_on_a_bare_command_is_info_naming_what_would_confirm_it(kvops) -> None:
    code, out, _ = kvops("doctor", "--cmd", "vllm serve m --cpu-offload-gb 32", "--json")
    f = findings(out)["cpu-offload-gb-is-weights"]
    assert code == 0 and f["severity"] == "info" and f["fixed_command"] is None
    assert any("weights fit in GPU memory" in n and "--here" in n for n in f["notes"])


def test_cpu_offload_gb_warns_when_the_report_asks_for_kv_offloading(kvops, tmp_path) -> None:
    said = _log(tmp_path, "I want to offload the KV cache to CPU RAM, so I pass --cpu-offload-gb")
    code, out, _ = kvops("doctor", "--cmd", "vllm serve m --cpu-offload-gb 32", "--log", said, "--json")
    f = findings(out)["cpu-offload-gb-is-weights"]
    assert code == 0 and f["severity"] == "warning"
    assert f["fixed_command"] == "vllm serve m --kv-offloading-backend=native --kv-offloading-size=32"
    code, text, _ = kvops("doctor", "--cmd", "vllm serve m --cpu-offload-gb 32", "--log", said)
    assert "WARNING cpu-offload-gb-is-weights" in text
    assert "vllm serve m --kv-offloading-backend=native --kv-offloading-size=32" in text


def test_cpu_offload_gb_is_judged_by_whether_the_weights_fit(kvops, tmp_path) -> None:
    cmd = "vllm serve m --cpu-offload-gb 32"
    # vLLM's own lines: what the weights took on the GPU (after moving 32 GiB away) and the GPU's size
    fits = _log(
        tmp_path,
        "GPU 0: NVIDIA A100-SXM4-80GB",
        "INFO [gpu_model_runner.py:1] Model loading took 15.2 GiB memory",
    )
    f = findings(kvops("doctor", "--cmd", cmd, "--log", fits, "--json")[1])["cpu-offload-gb-is-weights"]
    assert f["severity"] == "warning" and any("they fit without" in e for e in f["evidence"])
    (tmp_path / "big").mkdir()
    needs = _log(tmp_path / "big", "GPU 0: NVIDIA A100-SXM4-80GB", "Model loading took 70.5 GiB memory")
    out = kvops("doctor", "--cmd", cmd, "--log", needs, "--json")[1]
    assert "cpu-offload-gb-is-weights" not in findings(out)  # never: removing it breaks the start-up


def test_cpu_offload_gb_fix_is_sized_by_kvops_size_when_the_model_is_known(kvops, tmp_path) -> None:
    cmd = "vllm serve meta-llama/Llama-3.1-8B-Instruct --cpu-offload-gb 8 --max-model-len 32768"
    said = _log(tmp_path, "we use --cpu-offload-gb for KV cache offloading")
    _code, out, _ = kvops("doctor", "--cmd", cmd, "--model", LLAMA, "--log", said, "--json")
    _size_code, size_out, _ = kvops("size", "--model", LLAMA, "--max-model-len", "32768", "--json")
    gib = json.loads(size_out)["recommended_kv_offloading_size_gib"]
    f = findings(out)["cpu-offload-gb-is-weights"]
    assert (
        f"--kv-offloading-size={gib}" in f["fixed_command"] and "--cpu-offload-gb" not in f["fixed_command"]
    )
    assert any("kvops size" in n for n in f["notes"])


def test_cpu_offload_gb_per_gpu_becomes_the_total_over_tp_ranks(kvops, tmp_path) -> None:
    said = _log(tmp_path, "how do I offload KV cache to the CPU?")
    cmd = "vllm serve m --cpu-offload-gb 16 --tensor-parallel-size 4"
    out = kvops("doctor", "--cmd", cmd, "--log", said, "--json")[1]
    assert "--kv-offloading-size=64" in findings(out)["cpu-offload-gb-is-weights"]["fixed_command"]


@pytest.mark.parametrize(
    ("version", "fires"), [("0.10.2", True), ("0.11.0", True), ("0.11.1", False), ("0.17.0", False)]
)
def test_offloading_flags_on_a_release_that_lacks_them(kvops, version: str, fires: bool) -> None:
    cmd = "vllm serve m --kv-offloading-backend native --kv-offloading-size 32"
    code, out, _ = kvops("doctor", "--cmd", cmd, "--vllm-version", version, "--json")
    got = findings(out).get("vllm-offload-flags-unsupported-release")
    assert (got is not None and got["severity"] == "error") == fires
    assert code == (1 if fires else 0)


def test_offloading_flags_with_an_unknown_release_say_nothing(kvops, monkeypatch) -> None:
    from kvops.doctor.judging import diagnose as diagnose_mod

    monkeypatch.setattr(diagnose_mod, "resolve_version", lambda flag, log, command_text="": (None, "unknown"))
    out = kvops("doctor", "--cmd", "vllm serve m --kv-offloading-size 32", "--json")[1]
    assert "vllm-offload-flags-unsupported-release" not in findings(out)


def test_offload_tier_larger_than_a_given_host_ram_or_shm(kvops) -> None:
    cmd = "vllm serve m --kv-offloading-backend native --kv-offloading-size 64"
    code, out, _ = kvops("doctor", "--cmd", cmd, "--host-ram", "96G", "--shm", "32GiB", "--json")
    f = findings(out)
    assert code == 1
    assert f["vllm-offload-host-ram-oom"]["source"] == "config"
    assert any("--host-ram" in e for e in f["vllm-offload-host-ram-oom"]["evidence"])
    assert any("--shm" in e for e in f["vllm-offload-shm-insufficient"]["evidence"])
    code, out, _ = kvops("doctor", "--cmd", cmd, "--host-ram", "512G", "--shm", "256G", "--json")
    assert not {"vllm-offload-host-ram-oom", "vllm-offload-shm-insufficient"} & set(findings(out))


def test_list_checks_shows_the_silent_misconfigurations(kvops) -> None:
    _code, out, _ = kvops("doctor", "--list-checks", "--json")
    silent = {r["id"] for r in json.loads(out)["checks"] if r["silent"]}
    assert {"cpu-offload-gb-is-weights", "vllm-offload-flags-unsupported-release"} <= silent
    text = kvops("doctor", "--list-checks")[1]
    assert "silent misconfigurations" in text and "cpu-offload-gb-is-weights" in text


# ---- one registry --------------------------------------------------------------------------------


def test_a_new_rule_is_one_registry_entry_and_one_playbook(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(rules, "CONDITIONS", dict(rules.CONDITIONS))

    @rules.condition("max_num_seqs_above", needs="cmd")
    def _above(want, ctx, here):  # type: ignore[no-untyped-def]
        value = ctx.cmd.get("--max-num-seqs")
        hit = value is not None and value.isdigit() and int(value) > int(want)
        return rules.Verdict(hit, evidence=[f"--max-num-seqs {value}"] if hit else [])

    (tmp_path / "too-many-seqs.md").write_text(
        "---\nid: too-many-seqs\nkind: failure\ntitle: t\nseverity: warning\n"
        "conditions:\n  max_num_seqs_above: 512\nfix:\n  note: lower it\n---\n## Meaning\nm\n"
    )
    cat = catalog.load(tmp_path)
    assert cat.problems == ()
    from kvops.doctor.reading import cmdline

    got = diagnose(cat, Inputs(cmd=cmdline.parse("vllm serve m --max-num-seqs 1024")))
    assert [(f.id, f.severity, f.evidence) for f in got.findings] == [
        ("too-many-seqs", "warning", ["--max-num-seqs 1024"])
    ]
    (tmp_path / "bad.md").write_text(
        "---\nid: bad\nkind: failure\ntitle: t\nseverity: warning\nconditions:\n  no_such_rule: 1\n---\n"
    )
    assert any("unknown condition 'no_such_rule'" in p for p in catalog.load(tmp_path).problems)


# ---- hostile input (issue 17) ----------------------------------------------------------------------


def test_escape_sequences_from_a_log_reach_the_terminal_visible_not_raw(kvops, tmp_path) -> None:
    log = _log(
        tmp_path,
        "INFO 06-25 15:26:04 api_server.py:177] vLLM API server version 0.17.0\x07\x9b2J",
        "8x MI300X \x1b[2J\x1b]52;c;ZXZpbA==\x07",
        "RuntimeError: wrong! device_gemm with the specified compilation parameters does not support this"
        " GEMM problem \x1b[31mred\x1b[0m\x9b6n\x08\u202e",
    )
    _code, out, _ = kvops("doctor", "--log", log)
    # colour/OSC sequences of a terminal capture are dropped; every other control is shown escaped
    assert not any(c in out for c in "\x1b\x07\x9b\x08\u202e")
    assert "GEMM problem red\\x9b6n\\x08\\u202e" in out
    data = json.loads(kvops("doctor", "--log", log, "--json")[1])
    assert not any(c in json.dumps(data, ensure_ascii=False) for c in "\x1b\x07\x9b")
    assert data["vllm_version"]["version"] == "0.17.0"


def test_a_model_name_with_escapes_is_shown_visible(kvops, tmp_path) -> None:
    cfg = json.loads(Path(LLAMA).read_text())
    cfg["model_type"] = "llama\x1b]0;owned\x07"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    _code, out, _ = kvops("doctor", "--model", str(path), "--cmd", "vllm serve m")
    assert "\x1b" not in out and "\x07" not in out


def test_a_100k_deep_config_json_is_one_line_and_exit_2(kvops, tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    code, _out, err = kvops("doctor", "--model", str(path))
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_5000_digit_version_is_one_short_line_and_exit_2(kvops) -> None:
    code, _out, err = kvops("doctor", "--cmd", "vllm serve m", "--vllm-version", "9" * 5000)
    assert code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and len(err) < 300
    code, _out, err = kvops("doctor", "--cmd", "vllm serve m", "--vllm-version", "0." + "1" * 5000)
    assert code == 2 and len(err) < 300


def test_a_deep_kv_transfer_config_never_gives_a_traceback(kvops) -> None:
    # 20,000 deep: far past json's recursion limit (splitting a larger line is the parser's cost)
    deep = "'" + '{"a":' * 20_000 + "1" + "}" * 20_000 + "'"
    code, out, err = kvops("doctor", "--cmd", f"vllm serve m --kv-transfer-config {deep}")
    assert code in (0, 1, 2) and "Traceback" not in err and "RecursionError" not in err + out
    assert len(err.strip().splitlines()) <= 1


def test_facts_come_from_the_log_text_not_only_the_signature_line(tmp_path) -> None:
    books = catalog.load().failures
    got = scan(["GPU 0: Radeon PRO W7900", "x", "This GEMM is not supported!"], books)
    assert "rocm" in got.facts and "rocm-aiter-dense-gemm-not-supported" in got.hits


def test_a_command_rebuilt_from_the_log_does_not_demote_a_log_match(kvops, tmp_path) -> None:
    # vLLM's default --block-size is not in the non-default args: the DSA block-size error stands
    log = _log(
        tmp_path,
        "(APIServer pid=1) INFO 10-14 17:00:33 [utils.py:233] non-default args: {'model': 'deepseek-ai/DeepSeek-V3.2'}",
        "ValueError: No common block size for 16 between kv_manager=[16] and backend=[64]",
    )
    code, out, _ = kvops("doctor", "--log", log, "--json")
    assert code == 1 and findings(out)["vllm-dsa-block-size-64"]["severity"] == "error"


def test_the_get_attn_backends_keyerror_without_pipeline_parallelism_is_not_the_pp_bug(
    kvops, tmp_path
) -> None:
    # LMCache on a hybrid model raises the same KeyError from get_attn_backends_for_group (no PP)
    frames = [
        '(EngineCore pid=9) ERROR 07-02 10:00:00 [core.py:1100]   File "vllm/v1/worker/gpu_model_runner.py",'
        " line 6265, in get_attn_backends_for_group",
        "(EngineCore pid=9) ERROR 07-02 10:00:00 [core.py:1100] KeyError: 'language_model.model.layers.5.self_attn.attn'",
    ]
    code, out, _ = kvops("doctor", "--log", _log(tmp_path, *frames), "--json")
    f = findings(out)["vllm-pp-get-layers-keyerror"]
    assert code == 0 and f["severity"] == "info" and any("pipeline" in n for n in f["notes"])
    code, out, _ = kvops(
        "doctor",
        "--log",
        _log(tmp_path, *frames),
        "--cmd",
        "vllm serve m --pipeline-parallel-size 2",
        "--json",
    )
    assert code == 1 and findings(out)["vllm-pp-get-layers-keyerror"]["severity"] == "error"


def test_an_unreadable_command_in_the_log_never_loses_the_log(kvops, tmp_path) -> None:
    log = _log(
        tmp_path,
        "(APIServer pid=1) INFO 10-14 17:00:33 [utils.py:233] non-default args: {'model': 'm',"
        " 'kv_transfer_config': '{\"kv_connector\": \"LMCacheConnectorV1\", bad json'}",
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
    )
    code, out, err = kvops("doctor", "--log", log, "--json")
    json.loads(out)  # --json: only JSON on stdout
    assert code == 1 and "vllm-kv-no-memory" in findings(out) and err == ""
    # the rebuilt command is read; its bad JSON is a finding with json's own words, not a lost log
    bad_json = findings(out)["vllm-serve-flags-invalid"]
    assert any(
        "--kv-transfer-config is not valid JSON: Expecting property name" in e for e in bad_json["evidence"]
    )


def test_weights_estimated_from_the_config_against_the_gpu_named_in_the_log(kvops, tmp_path) -> None:
    gpu = _log(tmp_path, "GPU 0: NVIDIA A100-SXM4-80GB")
    small = "vllm serve meta-llama/Llama-3.1-8B-Instruct --cpu-offload-gb 8"
    out = kvops("doctor", "--cmd", small, "--model", LLAMA, "--log", gpu, "--json")[1]
    f = findings(out)["cpu-offload-gb-is-weights"]
    assert f["severity"] == "warning" and any("estimated from config.json" in e for e in f["evidence"])
    big = "vllm serve meta-llama/Llama-3.1-405B-Instruct --cpu-offload-gb 40 --tensor-parallel-size 8"
    out = kvops(
        "doctor", "--cmd", big, "--model", str(MODELS / "llama-3.1-405b.json"), "--log", gpu, "--json"
    )[1]
    assert "cpu-offload-gb-is-weights" not in findings(out)  # 101 GiB per rank on an 80 GB GPU
    out = kvops("doctor", "--cmd", big, "--model", str(MODELS / "llama-3.1-405b.json"), "--json")[1]
    assert findings(out)["cpu-offload-gb-is-weights"]["severity"] == "info"  # no GPU: cannot tell
