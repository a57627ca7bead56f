# ruff: noqa: E501 - log lines are kept whole, as vLLM and issue reports print them

from __future__ import annotations

import io
import re

import pytest

from kvops.doctor.judging import catalog, logs
from kvops.errors import UsageError

from .conftest import LOGS

RENAMED = {
    "VLLM-OFFLOAD-DSA-INDEXER-KEYERROR": "mla-indexer-keyerror",
    "ROCM-AITER-CK-MOE-GEMM-UNSUPPORTED": "aiter-gemm-unsupported",
}


@pytest.fixture(scope="module")
def books() -> catalog.Catalog:
    return catalog.load()


def test_every_catalogued_failure_is_found_in_its_realistic_log(failures, books) -> None:
    missed = []
    for entry in failures:
        if entry["signature_regex"] is None:
            continue  # a silent misconfiguration: read from the command, never from a log
        expected = RENAMED.get(entry["id"], entry["id"].lower())
        path = LOGS / f"{entry['id'].lower()}.log"
        text = path.read_text()
        # the fixture carries the catalogue's own signature, independent of the playbook copy
        assert re.search(entry["signature_regex"], text), path.name
        scan = logs.scan_file(str(path), books.failures)
        if expected not in scan.hits:
            missed.append(expected)
        if not entry["id"].startswith("SGLANG-"):  # SGLang's logs carry no vLLM banner
            assert scan.version == "0.17.0"
    assert missed == []


def test_clean_offloading_startup_matches_nothing(books) -> None:
    scan = logs.scan_file(str(LOGS / "clean-llama-3.1-8b-offload.log"), books.failures)
    assert scan.hits == {}


def test_same_keyerror_is_told_apart_by_its_traceback(books) -> None:
    pp = logs.scan_file(str(LOGS / "vllm-pp-get-layers-keyerror.log"), books.failures)
    assert "vllm-pp-get-layers-keyerror" in pp.hits and "mla-indexer-keyerror" not in pp.hits
    dsa = logs.scan_file(str(LOGS / "vllm-offload-dsa-indexer-keyerror.log"), books.failures)
    assert "mla-indexer-keyerror" in dsa.hits and "vllm-pp-get-layers-keyerror" not in dsa.hits
    assert any("register_kv_caches" in e for e in dsa.hits["mla-indexer-keyerror"].evidence())


def test_bare_signature_without_context_is_not_claimed(books) -> None:
    lines = [
        "(EngineCore_DP0 pid=1) ERROR 10-14 17:00:48 [core.py:708] KeyError: 'model.layers.0.self_attn.attn'"
    ]
    assert "vllm-offload-mla-keyerror" not in logs.scan(lines, books.failures).hits
    # ...but the serve command can supply the context
    hits = logs.scan(lines, books.failures, command_text="vllm serve m --kv-offloading-size 64").hits
    assert "vllm-offload-mla-keyerror" in hits


def test_context_after_the_signature_counts(books) -> None:
    lines = ["KeyError: 'model.layers.0.self_attn.attn'"]
    lines += ["noise"] * 5 + ["  File offloading_connector.py, line 1, in REGISTER_KV_CACHES"]
    hit = logs.scan(lines, books.failures).hits["vllm-offload-mla-keyerror"]
    assert hit.context_line is not None and hit.context_line[0] == 7  # context case-insensitive


def test_prefix_is_stripped() -> None:
    line = "(EngineCore_DP0 pid=123) ERROR 10-14 17:00:48 [core.py:708] KeyError: 'x'"
    assert logs.strip_prefix(line) == "KeyError: 'x'"
    assert logs.strip_prefix("INFO 10-14 17:00:30 [__init__.py:216] hi") == "hi"


def test_binary_log_is_a_usage_error(tmp_path, books) -> None:
    path = tmp_path / "core"
    path.write_bytes(b"\x7fELF\x00\x00\x01" * 100)
    with pytest.raises(UsageError, match="binary"):
        logs.scan_file(str(path), books.failures)


def test_long_log_is_streamed_and_counted(books) -> None:
    noise = b"(APIServer pid=1) INFO 10-14 17:00:48 [loggers.py:123] Engine 000: Running: 3 reqs\n"
    body = noise * 200_000 + (LOGS / "rocm-aiter-ck-moe-gemm-unsupported.log").read_bytes() + noise * 1000
    scan = logs.scan(logs.decoded_lines(io.BytesIO(body), "big"), books.failures)
    assert "aiter-gemm-unsupported" in scan.hits
    assert scan.lines == body.count(b"\n")
    assert scan.hits["aiter-gemm-unsupported"].line_no > 200_000


def test_repeated_signature_is_counted_once(books) -> None:
    line = (
        "(EngineCore_DP0 pid=1) ERROR 10-14 17:00:48 [core.py:708]"
        " ValueError: No available memory for the cache blocks."
    )
    hit = logs.scan([line] * 10, books.failures).hits["vllm-kv-no-memory"]
    assert hit.count == 10 and "10 matching lines" in hit.evidence()[-1]


@pytest.mark.parametrize("noise_lines", [0, logs.BLOCK - 3, 3 * logs.BLOCK - 20, 3 * logs.BLOCK + 7])
def test_tracebacks_across_block_boundaries_keep_line_numbers_and_context(books, noise_lines: int) -> None:
    failure = (LOGS / "vllm-offload-dsa-indexer-keyerror.log").read_text().splitlines()
    noise = [
        "(APIServer pid=1) INFO 10-14 17:00:48 [loggers.py:123] Engine 000: Running: 3 reqs"
    ] * noise_lines
    scan = logs.scan(noise + failure, books.failures)
    hit = scan.hits["mla-indexer-keyerror"]
    expected = noise_lines + 1 + next(i for i, line in enumerate(failure) if "indexer.k_cache'" in line)
    assert hit.line_no == expected
    assert hit.context_line is not None and "offloading_connector.py" in hit.context_line[1]
    assert scan.lines == noise_lines + len(failure) and scan.version == "0.17.0"


def test_prefilter_literals_are_in_every_catalogued_example(failures, books) -> None:
    needles = logs.literals_for(s for pb in books.failures for s in pb.signatures)
    assert needles is not None
    for entry in failures:
        example = entry["example_log_line"]
        if entry["signature_regex"] is None:
            continue  # no log line to pre-filter for
        if re.search(entry["signature_regex"], example):
            assert any(n in example for n in needles), entry["id"]


def test_binary_content_after_a_first_text_line_is_rejected(tmp_path, books) -> None:
    path = tmp_path / "mixed.log"
    path.write_bytes(b"looks like text\n" + b"\x00\x01" * 500 + b"\n")
    with pytest.raises(UsageError, match="binary"):
        logs.scan_file(str(path), books.failures)


def test_over_long_lines_are_cut_and_counted_once(books) -> None:
    long_line = b"x" * (3 * logs.MAX_LINE + 5) + b"\n"
    tail = b"ValueError: No available memory for the cache blocks.\n"
    lines = list(logs.decoded_lines(io.BytesIO(long_line + tail), "t"))
    assert len(lines) == 2 and len(lines[0]) == logs.MAX_LINE
    assert "vllm-kv-no-memory" in logs.scan(lines, books.failures).hits


def test_log_from_stdin(kvops, monkeypatch) -> None:
    data = (LOGS / "vllm-kv-no-memory.log").read_bytes()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
    code, out, _ = kvops("doctor", "--log", "-", "--json")
    assert code == 1 and '"vllm-kv-no-memory"' in out


# ---- logs as people paste them -----------------------------------------------------------------


def test_a_signature_wrapped_mid_word_by_a_terminal_is_found(books) -> None:
    lines = [
        "(EngineCore_DP0 pid=9) ERROR 10-14 17:00:48 [core.py:708] ValueError: To serve at least one request"
        " with the models's max seq len (262144), (24.00 GiB KV cach",
        "e is needed, which is larger than the available KV cache memory (8.04 GiB). Based on the available",
    ]
    hit = logs.scan(lines, books.failures).hits["vllm-kv-max-seq-len-too-large"]
    assert hit.line_no == 1 and "KV cach" in hit.line and "e is needed" in hit.line


def test_a_signature_wrapped_at_a_space_inside_a_markdown_quote_is_found(books) -> None:
    lines = [
        "> the engine aborts during warmup with",
        "> `RuntimeError: wrong! device_gemm with the specified compilation parameters",
        "> does not support this GEMM problem` (raised from `aiter` `ck_moe_stage2`).",
    ]
    hit = logs.scan([*lines, "> This reproduces at both TP=4 and TP=8."], books.failures).hits[
        "aiter-gemm-unsupported"
    ]
    assert hit.count == 1 and hit.line_no == 2  # one wrap, one finding line, markers dropped
    assert hit.line.startswith("`RuntimeError: wrong! device_gemm") and ">" not in hit.line


def test_a_line_that_matches_whole_is_not_counted_again_through_a_wrap(books) -> None:
    lines = [
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
        "when initializing the engine.",
    ]
    assert logs.scan(lines, books.failures).hits["vllm-kv-no-memory"].count == 1


def test_wrapped_words_alone_do_not_make_a_match(books) -> None:
    lines = ["No available memory", "on the host: the cache blocks stayed on the GPU."]
    assert logs.scan(lines, books.failures).hits == {}


@pytest.mark.parametrize(
    ("line", "version"),
    [
        # the ASCII-art banner (vllm/entrypoints/utils.py), as quoted in public issue reports
        (
            "(APIServer pid=10) INFO 05-18 19:01:56 [utils.py:325]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.15.1",
            "0.15.1",
        ),
        (
            "2026-04-19 12:09:18.295 | (APIServer pid=1) INFO 04-19 10:09:18 [utils.py:299]  ▄▄ ▄█ █     █"
            "     █ ▀▄▀ █  version 0.19.2rc1.dev8+g4b7f5ea1a",
            "0.19.2rc1.dev8+g4b7f5ea1a",
        ),
        (
            "(EngineCore_DP0 pid=5) INFO 10-14 17:00:41 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with",
            "0.11.0",
        ),
        (
            "INFO 04-27 10:11:03 llm_engine.py:70] Initializing an LLM engine (v0.4.0.post1) with config:",
            "0.4.0.post1",
        ),
        ("INFO 06-25 15:26:04 api_server.py:177] vLLM API server version 0.5.0.post1", "0.5.0.post1"),
        ("vLLM Version                 : 0.10.1.1", "0.10.1.1"),
        ("vllm==0.2.7", "0.2.7"),
        ("vllm                              0.13.0", "0.13.0"),  # `pip list` in a report
        ("  vllm    v0.11.1rc2", "0.11.1rc2"),
    ],
)
def test_every_banner_form_gives_the_version(books, line: str, version: str) -> None:
    assert logs.scan([line], books.failures).version == version


@pytest.mark.parametrize(
    "line",
    [
        "vllm serve m --max-model-len 100",
        "I upgraded vllm 0.13.0 yesterday",
        "vllm  0.13.0 /src/vllm",
        "vllm  0.1",
    ],
)
def test_lines_that_only_mention_vllm_and_a_number_give_no_version(books, line: str) -> None:
    assert logs.scan([line], books.failures).version is None


def test_a_source_build_version_is_not_taken_for_a_release(books) -> None:
    lines = ["vLLM Version                 : 0.1.dev5+g97c162676 (git sha: 97c162676)", "vllm==0.9.1"]
    assert logs.scan(lines, books.failures).version == "0.9.1"


@pytest.mark.parametrize(
    "line",
    [
        "[2025-03-10T15:07:20Z] ERROR 03-10 08:07:20 [core.py:302] ValueError: boom",
        "  | [2025-03-10T15:07:20Z] ERROR 03-10 08:07:20 [core.py:302] ValueError: boom",
        "(APIServer pid=45) (EngineCore_DP0 pid=386) ERROR 04-29 18:34:40 [core.py:1100] ValueError: boom",
        "(RayWorkerWrapper pid=206994, ip=192.168.10.25) ERROR 03-27 10:29:13 [worker_base.py:620] ValueError: boom",
        "ERROR 10-26 11:35:32 registry.py:267] ValueError: boom",
        "[rank0]: ValueError: boom",
        "2026-04-19 12:09:18.295 | (APIServer pid=1) INFO 04-19 10:09:18 [utils.py:299] ValueError: boom",
    ],
)
def test_prefixes_of_ci_logs_compose_ray_and_old_releases_are_stripped(line: str) -> None:
    assert logs.strip_prefix(line) == "ValueError: boom"


def test_evidence_facts_are_read_case_insensitively(books) -> None:
    lines = [
        "GPU: AMD Instinct MI300X, ROCm 6.4",
        "VLLM_ROCM_USE_AITER=1 vllm serve m --KV-Cache-Dtype fp8",
        "from LMCache.v1 import x",
    ]
    facts = logs.scan(lines, books.failures).facts
    assert {"rocm", "fp8_kv", "lmcache"} <= set(facts) and facts["lmcache"][0] == 3


def test_colour_codes_and_crlf_of_a_terminal_capture_are_removed(tmp_path, books) -> None:
    path = tmp_path / "tty.log"
    path.write_bytes(
        b"\x1b[1;36m(EngineCore_DP0 pid=7)\x1b[0;0m \x1b[31mERROR\x1b[0m 10-14 17:00:48 [core.py:708]"
        b" ValueError: No available memory for the cache blocks.\r\n"
    )
    hit = logs.scan_file(str(path), books.failures).hits["vllm-kv-no-memory"]
    assert "\x1b" not in hit.line and not hit.line.endswith("\r")
    assert logs.strip_prefix(hit.line).startswith("ValueError: No available memory")


def test_text_copied_from_a_web_page_reads_like_the_log(tmp_path, books) -> None:
    path = tmp_path / "page.log"
    path.write_text(
        "ValueError: Free memory on device cuda:0 (12.18/23.56 GiB) on startup is less than desired GPU"
        " memory utilization (0.92, 21.67 GiB).\n"
        "KeyError: &#39;model.layers.30.self_attn.indexer.k_cache&#39; in get_attn_backends_for_group\n"
        "KeyError: \u2018model.layers.0.self_attn.attn\u2019 in register_kv_caches\n"
    )
    hits = logs.scan_file(str(path), books.failures).hits
    assert {"vllm-free-memory-startup", "vllm-pp-get-layers-keyerror", "vllm-offload-mla-keyerror"} <= set(
        hits
    )


@pytest.mark.parametrize(
    "line",
    [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 72.00 MiB. GPU 0 has a total capacity of 31.33 GiB",
        "torch.cuda.OutOfMemoryError: HIP out of memory. Tried to allocate 768.00 MiB. GPU 0 has a total capacity of 15.87 GiB",
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 23.69 GiB total capacity; 22.1 GiB already allocated)",
        "Inspect the stacktrace to find the original error: OutOfMemoryError('CUDA out of memory. Tried to allocate 128.00 MiB. GPU 0')",
        # issue 43: the variants a held-out set showed missed (no "Tried to allocate"; the driver's own)
        "torch.OutOfMemoryError: CUDA out of memory. GPU 0 has a total capacity of 79.19 GiB",
        "RuntimeError: CUDA error: out of memory",
        "RuntimeError: HIP error: out of memory",
    ],
)
def test_every_oom_wording_torch_has_used_is_found(books, line: str) -> None:
    assert "gpu-oom-generic" in logs.scan([line], books.failures).hits
