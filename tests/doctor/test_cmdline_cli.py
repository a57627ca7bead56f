"""`kvops doctor --cmd` end to end: serve-line findings from the release's own flag table, and a
command doctor cannot read never throws away the log given with it."""

from __future__ import annotations

import json

from kvops.doctor.judging import cli_checks, rules
from kvops.doctor.reading import cli_schema, cmdline

from .conftest import LOGS


def findings(out: str) -> dict[str, dict]:
    return {f["id"]: f for f in json.loads(out)["findings"]}


def test_invalid_kv_transfer_config_json_is_a_finding_with_the_exact_error(kvops) -> None:
    code, out, err = kvops(
        "doctor", "--cmd", "vllm serve m --kv-transfer-config '{bad'", "--vllm-version", "0.14.0", "--json"
    )
    f = findings(out)["vllm-serve-flags-invalid"]
    assert code == 1 and err == "" and f["severity"] == "error"
    assert (
        "--kv-transfer-config is not valid JSON: Expecting property name enclosed in double quotes:"
        " line 1 column 2 (char 1)" in f["evidence"]
    )


def test_flag_missing_from_the_release_is_named_with_the_release(kvops) -> None:
    cmd = "vllm serve m --kv-offloading-size 64 --kv-offloading-backend native"
    code, out, _ = kvops("doctor", "--cmd", cmd, "--vllm-version", "0.10.0", "--json")
    ev = findings(out)["vllm-serve-flags-invalid"]["evidence"]
    assert code == 1 and any(e.startswith("`--kv-offloading-size` does not exist in vLLM 0.10.x") for e in ev)
    code, out, _ = kvops("doctor", "--cmd", cmd, "--vllm-version", "0.14.0", "--json")
    assert "vllm-serve-flags-invalid" not in findings(out)


def test_unknown_release_reads_with_the_nearest_schema_in_one_note(kvops) -> None:
    code, out, _ = kvops(
        "doctor",
        "--cmd",
        "vllm serve m --enforce-eager --max-model-len 4096",
        "--vllm-version",
        "0.9.2",
        "--json",
    )
    doc = json.loads(out)
    assert code == 0 and "vllm-serve-flags-invalid" not in findings(out)
    assert "kvops has no flag list for vLLM 0.9.2: read with vLLM 0.10.0's" in doc["notes"]


def test_a_command_doctor_cannot_read_still_judges_the_log(kvops) -> None:
    log = str(LOGS / "vllm-offload-dsa-indexer-keyerror.log")
    code, out, err = kvops("doctor", "--cmd", "make serve MODEL=x", "--log", log, "--json")
    doc = json.loads(out)
    assert code == 1 and err == "" and "mla-indexer-keyerror" in findings(out)
    assert doc["notes"][0].startswith("--cmd not understood, judged without it: --cmd is not a vllm serve")


def test_a_serve_line_inside_bash_c_gets_a_fixed_command(kvops) -> None:
    log = str(LOGS / "vllm-offload-dsa-indexer-keyerror.log")
    cmd = (
        'bash -c "pip install -U vllm && vllm serve deepseek-ai/DeepSeek-V3.2 -tp 8 '
        '--kv-offloading-size 64 --kv-offloading-backend native --max-num-batched-tokens 8192"'
    )
    code, out, _ = kvops("doctor", "--cmd", cmd, "--log", log, "--json")
    f = findings(out)["mla-indexer-keyerror"]
    # the wrapper comes back as written: only the serve segment inside the script changes
    assert code == 1 and f["fixed_command"] == (
        'bash -c "pip install -U vllm && vllm serve deepseek-ai/DeepSeek-V3.2 -tp 8 '
        '--max-num-batched-tokens 8192 --kv-cache-dtype=fp8"'
    )


def test_without_the_release_a_flag_problem_is_info_but_bad_json_stays_an_error(kvops) -> None:
    # another release's table is no evidence about this one (issue 29: evidence before severity)
    cmd = "vllm serve m --future-flag 1 --enforce-eager True"
    code, out, _ = kvops("doctor", "--cmd", cmd, "--vllm-version", "0.9.2", "--json")  # no table for 0.9
    f = findings(out)["vllm-serve-flags-unverified"]
    assert code == 0 and f["severity"] == "info" and "vllm-serve-flags-invalid" not in findings(out)
    assert f["evidence"][-1] == (
        "flags read with the parser of vLLM 0.10.0"
        " (kvops has no flag list for vLLM 0.9.2: read with vLLM 0.10.0's)"
    )
    code, out, _ = kvops(
        "doctor", "--cmd", "vllm serve m --kv-transfer-config '{bad'", "--vllm-version", "0.9.2", "--json"
    )
    assert code == 1 and findings(out)["vllm-serve-flags-invalid"]["severity"] == "error"
    assert "vllm-serve-flags-unverified" not in findings(out)


def test_with_no_version_every_releases_flags_judge_and_only_warn() -> None:
    cmd = cmdline.parse("vllm serve m --future-flag 1 --kv-offloading-size 8")
    ctx = rules.Context(cmd=cmd, version=None)
    assert cli_checks.check_serve_flags(ctx).holds is False
    unverified = cli_checks.check_serve_flags_unverified(ctx)
    assert unverified.holds and unverified.evidence == [
        f"`--future-flag` is not a flag of any vLLM release kvops knows ({cli_schema.releases()[0]}.."
        f"{cli_schema.releases()[-1]})",
        "flags read with the parser of every vLLM release kvops knows",
    ]
