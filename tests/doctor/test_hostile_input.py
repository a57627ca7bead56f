"""Hostile input (issue 29, item 8): every regex doctor runs over a log is linear, YAML aliases are
bounded, --vllm-version is a release number and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kvops.doctor.judging import catalog, logs
from kvops.doctor.reading import serve_line, yaml_bounded
from kvops.doctor.reading.cmdline import config_tokens
from kvops.doctor.reading.vllm_release import release_number
from kvops.errors import UsageError

from .adversarial import lines_for

KVOPS = [sys.executable, "-c", "import sys; from kvops.cli import main; sys.exit(main())"]
LINE = logs.MAX_LINE  # the longest line the scanner ever hands a regex


def _timed(fn: Callable[[], object], limit: float) -> float:
    """Seconds `fn` took, the best of three tries when the first is over `limit` (a loaded machine
    slows a linear search too, never by the 10-100x a quadratic one costs)."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
        if best < limit:
            break
    return best


def _log_regexes() -> list[tuple[str, object]]:
    cat = catalog.load()
    out: list[tuple[str, object]] = []
    for pb in cat.failures:
        out += [(f"{pb.id} signature", s) for s in pb.signatures]
        out += [(f"{pb.id} context", c) for c in pb.context]
    out += [(f"fact {name}", rx) for name, rx in logs.FACTS.items()]
    out += [("version", logs.VERSION), ("prefix", logs.PREFIX)]
    return out


@pytest.mark.timeout(600)
def test_every_log_regex_is_linear_on_lines_made_of_its_own_head() -> None:
    # A quadratic pattern takes 0.4-4 s on one 64 KiB line of its own head repeated (measured:
    # `offloading_connector.py ` x 2,700 took 3.7 s with `.*`, the stale-mmap `\S+` 0.9 s); a
    # linear one at most ~0.06 s here, so 0.5 s leaves room for a loaded machine.
    slow = []
    for name, rx in _log_regexes():
        for line in lines_for(rx.pattern, LINE):  # type: ignore[attr-defined]
            took = _timed(lambda rx=rx, line=line: rx.search(line), 0.5)  # type: ignore[attr-defined]
            if took >= 0.5:
                slow.append(f"{name}: {took:.2f} s on {line[:40]!r}... ({LINE:,} characters)")
    assert not slow, "\n".join(slow)


def test_the_issue_adversarial_log_scans_within_a_second(tmp_path: Path) -> None:
    # 6 lines of `offloading_connector.py ` x 4,200: over 60 s before (a `.*` signature tried on
    # every join of two or three 64 KiB lines)
    path = tmp_path / "hostile.log"
    path.write_text(("offloading_connector.py " * 4200 + "\n") * 6)
    failures = catalog.load().failures
    assert _timed(lambda: logs.scan_file(str(path), failures), 1.0) < 1.0


def test_a_signature_wrapped_over_three_lines_is_still_found_after_the_bound() -> None:
    # the wrap joins only the text near the breaks; a real wrapped traceback line still matches
    pb = catalog.load().get("vllm-offload-scheduler-assert")
    assert pb is not None
    wrapped = ["x" * 5000 + ' File "/v/offloading_conn', 'ector.py", line 41', "2, in _build_store_jobs"]
    wrapped.append("AssertionError")  # the entry's context: a frame alone is not an assertion
    found = logs.scan(wrapped, [pb])
    assert "vllm-offload-scheduler-assert" in found.hits


def _bomb(levels: int, width: int, key: str = "args") -> str:
    """The classic billion-laughs shape: each level is `width` aliases of the one before."""
    lines = ['a0: &a0 ["--x=lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]")
    lines += ["command: [vllm, serve, m]", f"{key}: *a{levels - 1}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels,width", [(9, 9), (10, 10)])
def test_an_alias_bomb_in_cmd_is_one_line_exit_2_fast(levels: int, width: int) -> None:
    text = _bomb(levels, width)
    assert len(text) < 520  # the issue's 395- and 470-byte bombs are this shape
    start = time.perf_counter()
    proc = subprocess.run(
        [*KVOPS, "doctor", "--cmd", text],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert time.perf_counter() - start < 5
    assert proc.returncode == 2, proc.stderr[-500:]
    assert len(proc.stdout) + len(proc.stderr) < 100_000
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "alias" in proc.stderr


def test_compose_anchors_used_legitimately_still_read() -> None:
    compose = """\
x-common: &common
  image: vllm/vllm-openai:v0.14.0
  environment: &env
    HF_HOME: /models
    VLLM_LOGGING_LEVEL: INFO
services:
  a:
    <<: *common
    command: ["--model", "m1", "--kv-offloading-size", "8"]
  b:
    <<: *common
    environment: *env
    command: ["--model", "m2"]
"""
    tokens = serve_line.extract(compose)
    assert tokens[-4:] == ["--model", "m1", "--kv-offloading-size", "8"] and "HF_HOME=/models" in tokens


def test_a_self_referencing_alias_is_bounded() -> None:
    with pytest.raises(yaml_bounded.AliasBombError):
        yaml_bounded.load("a: &a [x, *a, *a, *a, *a]\nb: [*a, *a, *a, *a, *a, *a, *a, *a]\n" * 1)


def test_an_alias_bomb_in_a_config_file_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "serve.yaml"
    path.write_text(_bomb(10, 10, key="max-model-len"))
    start = time.perf_counter()
    assert config_tokens(str(path)) is None
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize(
    "given,release",
    [
        ("0.4.0.post1", "0.4.0.post1"),
        ("0.11.0rc2", "0.11.0rc2"),
        ("0.14.0.dev3", "0.14.0.dev3"),
        ("0.11", "0.11"),
        ("v0.17.0", "0.17.0"),
        ("0.10.1+cu128", "0.10.1+cu128"),
    ],
)
def test_vllm_version_takes_releases_as_vllm_numbers_them(given: str, release: str) -> None:
    assert release_number(given) == release


@pytest.mark.parametrize(
    "given",
    [
        "0.99.0\n",
        "\u0660.\u0661\u0664.\u0660",
        "1." * 3001 + "0",
        "",
        "latest",
        "0.14.0; rm -rf /",
        "0.14.0 x",
    ],
)
def test_anything_else_is_one_line_and_exit_2(given: str) -> None:
    with pytest.raises(UsageError):
        release_number(given)
    proc = subprocess.run(
        [*KVOPS, "doctor", "--vllm-version", given, "--repro", "mla-indexer-keyerror"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr[-500:]
    assert proc.stdout == "" and len(proc.stderr) < 300 and "pip" not in proc.stderr
