"""SGLang and Dynamo reports read as their own (issue 29, item 6): launch lines, logs, versions,
connectors by their own names, and the entries a more specific cause supersedes."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from kvops.doctor.judging import catalog, logs
from kvops.doctor.reading import cmdline, engines


def findings(out: str) -> dict[str, dict]:
    return {f["id"]: f for f in json.loads(out)["findings"]}


def _log(tmp_path: Path, *lines: str) -> str:
    path = tmp_path / "server.log"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize(
    ("line", "engine", "connector"),
    [
        (
            "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --enable-hierarchical-cache",
            "sglang",
            "HiCache",
        ),
        ("sglang serve --model-path google/gemma-4-31B-it --tp 2 --hicache-ratio 1", "sglang", None),
        ("python3 -m dynamo.vllm --model Qwen/Qwen3-0.6B --connector kvbm", "dynamo", "DynamoConnector"),
        (
            'vllm serve m --kv-transfer-config \'{"kv_connector":"DynamoConnector"}\'',
            "vllm",
            "DynamoConnector",
        ),
    ],
)
def test_launch_lines_say_their_engine_and_connector(line: str, engine: str, connector: str | None) -> None:
    cmd = cmdline.parse(line)
    assert cmd.engine == engine and cmd.connector() == connector
    assert cmd.offloading() != "lmcache"


def test_an_sglang_line_is_not_judged_with_vllms_flags(kvops) -> None:
    line = (
        "python -m sglang.launch_server --model-path X --enable-hierarchical-cache --hicache-ratio 2"
        " --cpu-offload-gb 8"
    )
    code, out, err = kvops("doctor", "--cmd", line, "--json")
    assert code == 0 and not err
    assert json.loads(out)["command"]["launcher"] == "sglang"
    assert findings(out) == {}  # neither vllm-serve-flags-invalid nor vLLM's --cpu-offload-gb rule


def test_an_sglang_log_names_its_engine_and_release(tmp_path) -> None:
    log = _log(
        tmp_path,
        "sglang: 0.5.17",
        "[2026-08-25 08:53:41 TP4 EP4] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 5060,'
        " in run_scheduler_process",
    )
    scan = logs.scan_file(log, catalog.load().failures)
    assert (scan.engine, scan.engine_version, scan.version) == ("sglang", "0.5.17", None)


@pytest.mark.parametrize(
    "line",
    [
        "[2026-05-25 09:59:00] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', tp_size=1)",
        "[2026-05-25 10:00:00] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
    ],
)
def test_sglangs_own_start_and_watchdog_lines_name_it(tmp_path, line: str) -> None:
    """A log with neither a module path nor a version line (a report's excerpt) is SGLang's by
    its launch_server's first line or its scheduler's watchdog line; vLLM prints neither."""
    scan = logs.scan_file(_log(tmp_path, "some other line", line), catalog.load().failures)
    assert scan.engine == "sglang"
    vllm = _log(tmp_path, "INFO 05-25 10:00:00 [utils.py:233] non-default args: {'model': 'Qwen/Qwen3-8B'}")
    assert logs.scan_file(vllm, catalog.load().failures).engine is None


@pytest.mark.parametrize(
    ("line", "version"),
    [
        ("Image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0 (stock, from NGC)", "1.4.0"),
        ("pip install ai-dynamo==0.7.0 and kvbm", "0.7.0"),
    ],
)
def test_dynamo_versions_are_read(line: str, version: str) -> None:
    assert engines.version_in(engines.DYNAMO, line) == version


def test_dynamoconnector_is_not_lmcache(kvops, tmp_path) -> None:
    log = _log(
        tmp_path,
        "(EngineCore_DP0 pid=1) ERROR 08-25 10:00:00 [core.py:708] ValueError: Connector DynamoConnector"
        " does not support HMA but HMA is enabled. Please set `--disable-hybrid-kv-cache-manager`.",
    )
    code, out, _ = kvops("doctor", "--log", log, "--json")
    found = findings(out)
    assert code == 1 and found["dynamo-kvbm-connector-no-hma"]["severity"] == "error"
    lm = found.get("lmcache-connector-no-hma")
    assert lm is None or (lm["severity"] == "info" and lm["fixed_command"] is None)
    (tmp_path / "lm").mkdir()
    lmcache = _log(
        tmp_path / "lm", "ValueError: Connector LMCacheConnectorV1 does not support HMA but HMA is enabled"
    )
    assert (
        findings(kvops("doctor", "--log", lmcache, "--json")[1])["lmcache-connector-no-hma"]["severity"]
        == "error"
    )


def test_stale_offload_files_in_prose_are_their_own_cause(kvops, tmp_path) -> None:
    log = _log(
        tmp_path,
        "After the OOM kill the pod restarts in a loop: /dev/shm is full of leftover vllm_offload mmap files"
        " from the previous run.",
        "RuntimeError: Insufficient space in /dev/shm: 65536 MiB required, 1405 MiB free. Increase /dev/shm"
        " (e.g. --shm-size or --ipc=host).",
    )
    cmd = "docker run --ipc=host vllm/vllm-openai:v0.20.0 --model m --kv-offloading-size 64"
    code, out, _ = kvops("doctor", "--log", log, "--cmd", cmd, "--json")
    found = findings(out)
    assert found["vllm-offload-stale-shm-mmap"]["severity"] == "warning"
    shm = found["vllm-offload-shm-insufficient"]
    assert shm["severity"] == "info" and shm["fixed_command"] is None  # never "--ipc=host" for leftovers
    assert code == 0


def test_a_healthy_offload_startup_line_is_not_stale(kvops, tmp_path) -> None:
    log = _log(
        tmp_path,
        "INFO 10-14 17:00:41 [shared_offload_region.py:68] Created mmap file"
        " /dev/shm/vllm_offload_1780928262818256525_dp0.mmap (3.22 GB)",
    )
    assert "vllm-offload-stale-shm-mmap" not in findings(kvops("doctor", "--log", log, "--json")[1])


def test_the_generic_offload_assertion_yields_to_a_specific_cause(kvops, tmp_path) -> None:
    e = "(EngineCore_DP0 pid=1) ERROR 10-14 17:00:48 [core.py:708]"
    v = "/usr/local/lib/python3.12/dist-packages/vllm"
    log = _log(
        tmp_path,
        f"{e} Traceback (most recent call last):",
        f'{e}   File "{v}/v1/kv_offload/cpu/spec.py", line 61, in __init__',
        f"{e}     assert self.tokens_per_block % tokens_per_hash == 0, (",
        f"{e} AssertionError: tokens_per_block=4 not divisible by tokens_per_hash=8704. Hybrid models (e.g."
        " Mamba+Attention) need --enable-prefix-caching to align block sizes.",
    )
    found = findings(kvops("doctor", "--log", log, "--json")[1])
    assert found["vllm-offload-hash-align-assert"]["severity"] == "error"
    assert found.get("vllm-offload-scheduler-assert", {"severity": "info"})["severity"] == "info"


@pytest.mark.parametrize(
    "pid", ["vllm-offload-scheduler-assert", "vllm-offload-stale-shm-mmap", "sglang-hicache-crash"]
)
def test_widened_signatures_stay_linear(pid: str) -> None:
    pb = catalog.load().get(pid)
    hostile = [
        "offloading_connector.py " * 4200,
        "kv_offload/" + "a/" * 30_000,
        "stale " * 10_000 + "offload",
        "/dev/shm " * 7000,
        "sglang/srt/mem_cache/storage/" + "a" * 60_000,
    ]
    for line in hostile:
        start = time.perf_counter()
        for sig in pb.signatures:
            sig.search(line)
        assert time.perf_counter() - start < 1.0, (pid, line[:40])


def test_new_entries_find_their_reports(kvops) -> None:
    real = Path(__file__).parent / "real"
    for meta in (json.loads(p.read_text()) for p in real.glob("*.json")):
        if re.match(r"(sglang|dynamo|llmd|llm-d)", meta["expected"]) and not meta.get("miss"):
            out = kvops("doctor", "--log", str(real / f"{meta['id']}.txt"), "--json")[1]
            assert findings(out).get(meta["expected"], {}).get("severity") in ("error", "warning"), meta["id"]
