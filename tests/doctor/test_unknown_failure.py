"""A fatal error no playbook knows is quoted as one `info` finding (issue 29, item 4).

The logs here are real ones: tests/doctor/real/ holds reports copied from public trackers whose
cause is outside the catalog; one constructed log checks the parts of the finding one by one.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from kvops.doctor.judging import catalog, logs
from kvops.doctor.reading.fatal import Fatal

REAL = Path(__file__).parent / "real"
E = "(EngineCore_DP0 pid=6302) ERROR 11-13 11:03:06 [core.py:708]"
SITE = "/opt/venv/lib/python3.12/site-packages"


def findings(out: str) -> dict[str, dict]:
    return {f["id"]: f for f in json.loads(out)["findings"]}


def _log(tmp_path: Path, *lines: str) -> str:
    path = tmp_path / "server.log"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_an_unknown_fatal_error_is_quoted_with_release_component_and_search_terms(kvops, tmp_path) -> None:
    log = _log(
        tmp_path,
        "INFO 11-13 11:02:00 [api_server.py:1839] vLLM API server version 0.11.0",
        f"{E} EngineCore failed to start.",
        f"{E} Traceback (most recent call last):",
        f'{E}   File "{SITE}/vllm/v1/engine/core.py", line 699, in run_engine_core',
        f"{E}     engine_core = EngineCoreProc(*args, **kwargs)",
        f'{E}   File "{SITE}/kvcached/integration/vllm/patches.py", line 212, in init_kv_cache',
        f"{E}     raise NotImplementedError(",
        f"{E} NotImplementedError: Hybrid models with more than one KV cache type are not supported yet",
        f"{E} RuntimeError: Engine core initialization failed. See root cause above.",
    )
    code, out, _ = kvops("doctor", "--log", log, "--json")
    f = findings(out)["unknown-failure"]
    assert code == 0 and f["severity"] == "info" and f["fixed_command"] is None  # DESIGN: info exits 0
    ev = "\n".join(f["evidence"])
    assert (
        "log line 2 (first fatal line): (EngineCore_DP0 pid=6302)" in ev
        and "EngineCore failed to start." in ev
    )
    assert "log line 8 (exception)" in ev and "NotImplementedError: Hybrid models with more than one" in ev
    assert "release: vLLM 0.11.0 (log)" in ev
    assert "component: kvcached/integration/vllm/patches.py" in ev  # the deepest frame, not vLLM's core
    assert "search terms: vLLM NotImplementedError Hybrid models with more than one KV cache type" in ev
    text = kvops("doctor", "--log", log)[1]
    assert "INFO unknown-failure" in text and "No known failure matched" not in text


def test_a_known_failure_is_not_also_quoted_as_unknown(kvops) -> None:
    log = str(Path(__file__).parent / "logs" / "vllm-kv-no-memory.log")
    found = findings(kvops("doctor", "--log", log, "--json")[1])
    assert "vllm-kv-no-memory" in found and "unknown-failure" not in found


def test_a_log_without_a_fatal_error_has_no_unknown_finding(kvops) -> None:
    log = str(Path(__file__).parent / "logs" / "clean-llama-3.1-8b-offload.log")
    code, out, _ = kvops("doctor", "--log", log, "--json")
    assert code == 0 and findings(out) == {}


def test_rust_panics_and_sglang_schedulers_count_as_fatal(kvops, tmp_path) -> None:
    panic = _log(
        tmp_path,
        "thread 'tokio-runtime-worker' panicked at /opt/dynamo/lib/llm/src/block_manager/storage/cuda.rs:220",
    )
    f = findings(kvops("doctor", "--log", panic, "--json")[1])["unknown-failure"]
    assert any("panicked at" in e for e in f["evidence"])
    (tmp_path / "s").mkdir()
    sglang = _log(
        tmp_path / "s",
        "[2025-07-02 21:35:27 TP2] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl-workspace/sglang/python/sglang/srt/mem_cache/radix_cache.py", line 143, in __init__',
        "    k_pool=self.token_to_kv_pool_allocator._kvcache.k_buffer,",
        "AttributeError: 'MLATokenToKVPool' object has no attribute 'k_buffer'. Did you mean: 'kv_buffer'?",
    )
    f = findings(kvops("doctor", "--log", sglang, "--json")[1])["unknown-failure"]
    ev = "\n".join(f["evidence"])
    assert "component: sglang/srt/mem_cache/radix_cache.py" in ev and "release: SGLang" in ev
    assert "search terms: SGLang AttributeError object has no attribute" in ev


def _negatives() -> list[Path]:
    """The real reports whose cause the catalog does not know (the others are judged elsewhere)."""
    return [p for p in sorted(REAL.glob("*.json")) if json.loads(p.read_text())["expected"] == "none"]


@pytest.mark.parametrize("path", _negatives(), ids=lambda p: p.stem)
def test_every_real_report_with_a_traceback_and_no_known_cause_is_quoted(kvops, path: Path) -> None:
    meta = json.loads(path.read_text())
    books = catalog.load().failures
    scan = logs.scan_file(str(REAL / f"{meta['id']}.txt"), books)
    argv = ["doctor", "--log", str(REAL / f"{meta['id']}.txt"), "--json"]
    found = findings(kvops(*argv, *(["--cmd", meta["cmd"]] if meta.get("cmd") else []))[1])
    if scan.fatal.found and not any(
        f["source"] == "log" and f["id"] != "unknown-failure" for f in found.values()
    ):
        assert found["unknown-failure"]["severity"] == "info"


def test_the_fatal_reader_is_linear_on_hostile_lines() -> None:
    lines = ['  File "' + "a/" * 30_000 + '", line 1, in f', "E" * 60_000 + "Error: " + "x" * 4000] * 50
    # This thread's CPU time, not the wall clock: under load (the full suite at load average
    # ~20 on 2 cores) the thread waited for a core longer than it worked and the wall clock
    # passed 2 s. A quadratic reader costs CPU time as much as wall clock.
    fatal, start = Fatal(), time.thread_time()
    for n, line in enumerate(lines):
        fatal.feed(n, line)
    assert time.thread_time() - start < 2.0


def test_a_reports_sentence_gives_way_to_the_logs_own_fatal_line() -> None:
    """sglang#26258 said "the service shuts down ... with a watchdog timeout error displayed."
    above the scheduler's own watchdog line: the log's line is the failure quoted."""
    fatal = Fatal()
    sentence = "the service shuts down after a while with a watchdog timeout error displayed."
    fatal.feed(20, sentence, None, sentence)
    logged = "[2026-05-25 10:00:00] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)"
    fatal.feed(21, logged.split("] ", 1)[1], None, logged)
    fatal.settle()
    assert fatal.exception == (21, logged) and fatal.first_line == (21, logged)
    # a log line first stays first; a sentence alone is still quoted
    first = Fatal()
    first.feed(21, logged.split("] ", 1)[1], None, logged)
    first.feed(22, sentence, None, sentence)
    first.settle()
    assert first.exception == (21, logged)
    alone = Fatal()
    alone.feed(20, sentence, None, sentence)
    alone.settle()
    assert alone.exception == (20, sentence)


def test_a_native_fatal_line_a_finding_quotes_is_not_also_unknown(kvops, tmp_path) -> None:
    """A watchdog abort with HiCache on (modelled on sglang#26258): sglang-hicache-crash quotes
    the watchdog line as its evidence, so it is not also "a fatal error no playbook knows"."""
    explained = _log(
        tmp_path,
        "[2026-05-25 09:59:00] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', "
        "enable_hierarchical_cache=True)",
        "[2026-05-25 09:59:30] Prefill batch. #new-seq: 1, #new-token: 8192, hicache load_back 12 pages",
        "[2026-05-25 10:00:00] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
    )
    code, out, _ = kvops("doctor", "--log", explained, "--json")
    found = findings(out)
    assert code == 1 and found["sglang-hicache-crash"]["severity"] == "error"
    assert "unknown-failure" not in found
