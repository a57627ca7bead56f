"""Issue 43: every fatal line doctor quotes is located in the releases' own code (the error-site
table, kvops/doctor/reading/error_sites.json.gz), as a user pastes it: one line, wrapped by
another message, cut short, with or without its traceback; native fatal lines are quoted too."""

from __future__ import annotations

import ast
import gzip
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kvops.doctor import gen_error_sites
from kvops.doctor.judging import catalog, logs
from kvops.doctor.reading import error_sites

Run = Callable[..., tuple[int, str, str]]


def _doctor(kvops: Run, tmp_path: Path, text: str, *extra: str) -> tuple[int, dict]:
    log = tmp_path / "paste.txt"
    log.write_text(text, encoding="utf-8")
    code, out, err = kvops("doctor", "--log", str(log), "--json", *extra)
    assert "Traceback" not in err, err
    return code, json.loads(out)


def _paths(finding: dict) -> list[str]:
    return [r["path"] for r in finding.get("raised_at", [])]


# ---- the user's pastes ---------------------------------------------------------------------------
def test_a_one_line_paste_is_quoted_and_located(kvops: Run, tmp_path: Path) -> None:
    line = "ValueError: Unsupported spec type: CPUOffloadSpec"
    code, result = _doctor(kvops, tmp_path, line + "\n", "--vllm-version", "0.32.0")
    assert code == 0
    [finding] = result["findings"]
    assert any(line in e for e in finding["evidence"])  # the log's own exception line
    assert _paths(finding)[0] == "vllm/v1/kv_offload/factory.py"
    first = finding["raised_at"][0]
    assert first["class"] == "OffloadingSpecFactory" and first["function"] == "get_spec_cls"
    assert any("0.32.0" in r or r.endswith("..0.33.0") for r in first["releases"])
    # raised under vllm/v1/kv_offload/: the offload family's playbook, at info, no fix
    assert finding["id"] == "vllm-offload-config-invalid" and finding["severity"] == "info"
    assert finding["fixed_command"] is None


def test_a_message_wrapped_by_another_is_looked_up_at_each_level(kvops: Run, tmp_path: Path) -> None:
    text = (
        "(EngineCore_DP0 pid=1) ERROR 11-20 10:00:00 [core.py:708] EngineCore failed to start.\n"
        "(EngineCore_DP0 pid=1) ERROR 11-20 10:00:00 [core.py:708] RuntimeError: Worker failed with error"
        " 'Secondary tier configuration must include 'type'', please check the stack trace above\n"
    )
    _, result = _doctor(kvops, tmp_path, text)
    located = [f for f in result["findings"] if f.get("raised_at")]
    assert located and _paths(located[0])[0] == "vllm/v1/kv_offload/tiering/factory.py"
    assert not any("component: unknown" in e for e in located[0]["evidence"])


def test_a_line_cut_short_is_located_by_its_head() -> None:
    found = error_sites.locate("ValueError: Secondary tier configuration must incl")
    assert found and found[0].site.path == "vllm/v1/kv_offload/tiering/factory.py"
    assert not found[0].whole


def test_a_release_without_the_message_is_a_hypothesis_not_a_fix(kvops: Run, tmp_path: Path) -> None:
    code, result = _doctor(
        kvops, tmp_path, "ValueError: Unsupported spec type: CPUOffloadSpec\n", "--vllm-version", "0.10.0"
    )
    [finding] = result["findings"]
    notes = " ".join(finding["notes"])
    assert "hypothesis: vllm 0.10.0's source has no such message" in notes
    assert finding["severity"] == "info" and code == 0


def test_an_unknown_message_gets_no_location(kvops: Run, tmp_path: Path) -> None:
    _, result = _doctor(kvops, tmp_path, "ValueError: kvops made this message up for the test\n")
    [finding] = result["findings"]
    assert finding["id"] == "unknown-failure" and "raised_at" not in finding


# ---- the shared /dev/shm helper (the table corrected the playbook) ---------------------------------
SHM_032 = (
    "RuntimeError: Insufficient space in /dev/shm for ShmTensorArena: 4096 MiB required, 64 MiB free."
    " Increase /dev/shm (e.g. --shm-size or --ipc=host).\n"
)


def test_the_0_32_wording_is_what_the_message_proves(kvops: Run, tmp_path: Path) -> None:
    code, result = _doctor(kvops, tmp_path, SHM_032, "--cmd", "docker run vllm/vllm-openai:v0.32.0 m")
    found = {f["id"]: f for f in result["findings"]}
    shm = found["vllm-shm-insufficient"]
    assert shm["severity"] == "error" and code == 1
    assert "vllm-offload-shm-insufficient" not in found  # not an offload region: no offload claim
    paths = _paths(shm)
    assert paths[0] == "vllm/distributed/device_communicators/shm_tensor_arena.py"
    # the remedy is quoted from the table's template, not from the log's text
    assert any("names the remedy" in n and "(e.g. --shm-size or --ipc=host)" in n for n in shm["notes"])
    assert "--ipc=host" in (shm["fixed_command"] or "")


def test_the_offload_region_wording_stays_the_offload_playbook(kvops: Run, tmp_path: Path) -> None:
    path = Path(__file__).parent / "logs" / "vllm-offload-shm-insufficient.log"
    _, out, _ = kvops("doctor", "--log", str(path), "--json")
    found = {f["id"]: f for f in json.loads(out)["findings"]}
    assert found["vllm-offload-shm-insufficient"]["severity"] == "error"
    assert found["vllm-shm-insufficient"]["severity"] == "info"  # superseded by the specific one
    raised = _paths(found["vllm-offload-shm-insufficient"])
    assert "vllm/distributed/device_communicators/shm_broadcast.py" in raised


def test_the_table_shows_the_helper_raises_for_several_callers() -> None:
    table = error_sites.load()
    assert table is not None
    rows = table.starting("Insufficient space in ")
    callers = {table.site(i).path for i in rows if "MiB required" in table.row(i)[0]}
    assert "vllm/distributed/device_communicators/shm_broadcast.py" in callers
    assert "vllm/v1/kv_offload/cpu/shared_offload_region.py" in callers
    assert "vllm/distributed/device_communicators/shm_tensor_arena.py" in callers


# ---- fatal lines that are not Python exceptions ------------------------------------------------------
@pytest.mark.parametrize(
    "line",
    [
        "Memory access fault by GPU node-2 (Agent handle: 0x55d0c2f0) on address 0x7f1c00000000."
        " Reason: Unknown.",
        "E1128 12:00:01.123456  4242 transfer_engine.cpp:211] Failed to open the RDMA device mlx5_0",
        "[rank0]:[E1128 12:00:01.000 ProcessGroupNCCL.cpp:616] [PG 0 Rank 0] Watchdog caught collective"
        " operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600000 milliseconds",
    ],
    ids=["hip-memory-fault", "glog-E", "nccl-watchdog"],
)
def test_a_native_fatal_line_is_quoted(kvops: Run, tmp_path: Path, line: str) -> None:
    _, result = _doctor(kvops, tmp_path, "INFO starting\n" + line + "\n")
    [finding] = result["findings"]
    assert finding["id"] == "unknown-failure" and finding["severity"] == "info"
    assert any(line[:40] in e for e in finding["evidence"])


def test_a_native_line_stands_beside_a_playbook_finding(kvops: Run, tmp_path: Path) -> None:
    oom = (Path(__file__).parent / "logs" / "gpu-oom-generic.log").read_text()
    text = "Memory access fault by GPU node-1 (Agent handle: 0x1) on address 0x2. Reason: Unknown.\n" + oom
    _, result = _doctor(kvops, tmp_path, text)
    ids = {f["id"] for f in result["findings"]}
    assert "gpu-oom-generic" in ids and "unknown-failure" in ids


def test_every_log_finding_carries_the_exception_line(kvops: Run) -> None:
    path = Path(__file__).parent / "logs" / "vllm-kv-max-seq-len-too-large.log"
    _, out, _ = kvops("doctor", "--log", str(path), "--json")
    for finding in json.loads(out)["findings"]:
        if finding["source"] == "log":
            assert any("(exception)" in e or "ValueError: To serve" in e for e in finding["evidence"])


def test_engine_version_is_checked(kvops: Run, tmp_path: Path) -> None:
    log = tmp_path / "l.txt"
    log.write_text("x\n")
    code, _, err = kvops("doctor", "--log", str(log), "--engine-version", "tensorrt==1")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err


# ---- the table itself ------------------------------------------------------------------------------
def test_the_table_is_small_and_loads_quickly() -> None:
    assert error_sites.TABLE.stat().st_size < 5 * 1024 * 1024
    error_sites.load.cache_clear()
    start = time.perf_counter()
    table = error_sites.load()
    assert table is not None and len(table.lines) > 10_000
    assert time.perf_counter() - start < 0.4  # 200 ms on a quiet machine; this one is shared
    header = json.loads(gzip.decompress(error_sites.TABLE.read_bytes()).split(b"\n", 1)[0])
    assert header["releases"]["vllm"] == list(gen_error_sites.VLLM_RELEASES)
    assert header["releases"]["sglang"][0] == "0.4.10.post2"
    assert header["releases"]["lmcache"] == list(gen_error_sites.LMCACHE_RELEASES)


def test_a_log_without_a_fatal_line_never_loads_the_table() -> None:
    error_sites.load.cache_clear()
    books = catalog.load()
    lines = ["(APIServer pid=1) INFO 10-14 17:01:00 [loggers.py:123] Engine 000: Running: 1 reqs"] * 50
    scan = logs.scan(lines, books.failures)
    from kvops.doctor.judging.diagnose import diagnose
    from kvops.doctor.judging.inputs import Inputs

    diagnose(books, Inputs(log=scan, version="0.32.0", version_source="test"))
    assert error_sites.load.cache_info().currsize == 0


# ---- the recorder, on source written for the test -----------------------------------------------
SOURCE = """
import logging
logger = logging.getLogger(__name__)

def check_room(required, name="the default region"):
    if required > 1:
        raise RuntimeError(f"No room for {name}: {required} MiB required")

class Factory:
    def get(self, kind):
        if kind is None:
            raise ValueError(f"Unsupported spec type: {kind}")
        assert kind != "x", "kind %s is not allowed" % kind
        logger.error("Tier {} failed".format(kind))
        raise KeyError(kind)  # no literal text: not a site
        check_room(3, name="Arena")

def other():
    check_room(5)
"""


def test_the_recorder_reads_each_kind_of_site(tmp_path: Path) -> None:
    package = tmp_path / "vllm"
    package.mkdir()
    (package / "mod.py").write_text(SOURCE)
    sites, unparsed = gen_error_sites.release_sites(tmp_path, "vllm")
    w = gen_error_sites.WILD
    got = {(t, k, cls, fn) for t, k, _, cls, fn in sites}
    assert unparsed == 0
    assert (f"Unsupported spec type: {w}", "ValueError", "Factory", "get") in got
    assert (f"kind {w} is not allowed", "AssertionError", "Factory", "get") in got
    assert (f"Tier {w} failed", "logger.error", "Factory", "get") in got
    assert (f"No room for {w}: {w} MiB required", "RuntimeError", "", "check_room") in got
    # the helper's call sites, with their literal argument (or the default) filled in
    assert (f"No room for Arena: {w} MiB required", "RuntimeError", "Factory", "get") in got
    assert (f"No room for the default region: {w} MiB required", "RuntimeError", "", "other") in got
    assert not any(k == "KeyError" for _, k, _, _ in got)
    ast.parse(SOURCE)  # the source itself is valid Python: nothing was imported or run


def test_a_recording_gives_the_same_bytes_whatever_the_hash_seed(tmp_path: Path) -> None:
    """Sets of sites iterate in a per-process order (string hashing): the bytes must not."""
    import os
    import subprocess
    import sys

    for version, text in (("0.5.1", SOURCE), ("0.5.1.post1", SOURCE.replace("Tier", "Layer"))):
        root = tmp_path / "sglang" / version
        (root / "sglang").mkdir(parents=True)
        (root / "sglang" / "mod.py").write_text(text)
        (root / "RECORD").write_text("")
    outputs = []
    GEN = [sys.executable, "-m", "kvops.doctor.gen_error_sites"]
    for seed in ("1", "2"):
        proc = subprocess.run(
            [*GEN, "--sources", str(tmp_path), "--releases", "sglang==0.5.1", "sglang==0.5.1.post1"],
            capture_output=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            check=True,
        )
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1] and len(outputs[0]) > 100
    table = tmp_path / "t.gz"
    table.write_bytes(outputs[0])
    rows = gen_error_sites.read(table)[1]
    w = gen_error_sites.WILD
    assert ["0.5.1"] in [r[6] for r in rows if r[0] == f"Tier {w} failed"]
    spec = [r[6] for r in rows if r[0].startswith("Unsupported spec type")]
    assert spec == [["0.5.1..0.5.1.post1"]]


def test_the_table_bytes_are_deterministic(tmp_path: Path) -> None:
    package = tmp_path / "vllm"
    package.mkdir()
    (package / "mod.py").write_text(SOURCE)
    sites, _ = gen_error_sites.release_sites(tmp_path, "vllm")
    per = {"vllm": {"0.10.0": sites, "0.10.1": sites, "0.11.0": set(list(sites)[:2])}}
    first = gen_error_sites.merge(per)
    assert first == gen_error_sites.merge(per)
    table = tmp_path / "t.gz"
    table.write_bytes(first)
    assert gen_error_sites.join([table]) == first
    rows = gen_error_sites.read(table)[1]
    assert any(r[6] == ["0.10.0..0.10.1"] for r in rows)


def test_the_logs_engine_comes_first_and_test_code_never(kvops: Run) -> None:
    real = Path(__file__).parent / "real"
    _, out, _ = kvops("doctor", "--log", str(real / "vllm-9515.txt"), "--json")
    [finding] = [f for f in json.loads(out)["findings"] if f.get("raised_at")]
    assert finding["raised_at"][0]["package"] == "vllm"  # SGLang carries a copy of the same raise
    _, out, _ = kvops("doctor", "--log", str(real / "genesis-vllm-patches-1.txt"), "--json")
    for f in json.loads(out)["findings"]:  # torch's OOM; only SGLang's unit tests mimic it
        assert not any("/test/" in r["path"] for r in f.get("raised_at", []))


# ---- item 6: the remedy's flags are the template's, never the log's --------------------------------
HOSTILE_SHM = (
    "INFO vLLM API server version 0.32.0\n"
    "RuntimeError: Insufficient space in /dev/shm for ShmTensorArena --evil-flag=1 $(touch /tmp/pwn) --rm:"
    " 4096 MiB required, 64 MiB free. Increase /dev/shm --privileged (e.g. --shm-size or --ipc=host).\n"
)
DOCKER = "docker run --gpus all vllm/vllm-openai:v0.32.0 --model m"


def test_the_shm_fix_flags_come_from_the_template_not_the_log(kvops: Run, tmp_path: Path) -> None:
    code, result = _doctor(kvops, tmp_path, HOSTILE_SHM, "--cmd", DOCKER)
    shm = {f["id"]: f for f in result["findings"]}["vllm-shm-insufficient"]
    assert code == 1 and shm["severity"] == "error"
    assert shm["fix"]["docker_add"] == ["--ipc=host"]  # the template's one complete flag
    assert shm["fix"]["note"].startswith("the message says: Increase … (e.g. --shm-size or --ipc=host).")
    assert "no value for: --shm-size" in shm["fix"]["note"]
    assert shm["fixed_command"] == "docker run --gpus all --ipc=host vllm/vllm-openai:v0.32.0 --model m"
    fixes = json.dumps([[f["fix"], f["fixed_command"], f["alternatives"]] for f in result["findings"]])
    for hostile in ("--evil-flag", "$(", "touch", "--rm", "--privileged"):
        assert hostile not in fixes


def test_a_docker_line_that_has_the_messages_flag_gets_no_fixed_command(kvops: Run, tmp_path: Path) -> None:
    _, result = _doctor(kvops, tmp_path, HOSTILE_SHM, "--cmd", DOCKER.replace("--gpus all", "--ipc=host"))
    shm = {f["id"]: f for f in result["findings"]}["vllm-shm-insufficient"]
    assert shm["fixed_command"] is None and "the command already carries this fix" in shm["notes"]


def test_remedy_flags_are_read_from_literal_pieces_only() -> None:
    from kvops.doctor.judging.located import remedy_flags

    w = error_sites.WILD
    template = f"max model len {w} is larger than {w}. Try --gpu-memory-utilization or --max-model-len=4096"
    assert remedy_flags(template) == ["--gpu-memory-utilization", "--max-model-len=4096"]
    assert remedy_flags(f"Increase {w} (e.g. --shm-size or --ipc=host).") == ["--shm-size", "--ipc=host"]
    # a flag split by a wildcard is not a flag the template names
    assert remedy_flags(f"use --ipc={w} or --a{w}b or {w}--c") == []
