"""`kvops bench dma` as a user runs it: refusal, dry run without torch, flags, outputs."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from prometheus_client.parser import text_string_to_metric_families

from kvops.bench import dma
from kvops.cli import main

from .helpers import DEVICE, host_clock_timer

# Makes `import torch` fail in the child, as on a machine without the bench extra.
BLOCK_TORCH = "import sys; sys.modules['torch'] = None; "


def kvops(
    *args: str, prelude: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    code = prelude + f"from kvops.cli import main; sys.exit(main({list(args)!r}))"
    if not prelude:
        code = "import sys; " + code
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_refuses_without_a_gpu_in_one_line_exit_2() -> None:
    # Hiding every device makes this the no-GPU machine even where one is installed.
    proc = kvops("bench", "dma", env={"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""})
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("kvops bench: error: no CUDA/ROCm device visible to torch (torch 2.")
    assert lines[0].endswith("; nothing was measured")


def test_dry_run_and_help_work_where_torch_cannot_be_imported() -> None:
    plan = kvops("bench", "dma", "--dry-run", "--sizes", "2MiB", prelude=BLOCK_TORCH)
    assert plan.returncode == 0, plan.stderr
    assert "kvops bench dma plan: device 0, 12 cases" in plan.stdout
    assert "2 MiB×64" in plan.stdout
    usage = kvops("bench", "dma", "--help", prelude=BLOCK_TORCH)
    assert usage.returncode == 0 and "--dry-run" in usage.stdout
    as_json = kvops("bench", "dma", "--dry-run", "--json", "--link-max-gbps", "63", prelude=BLOCK_TORCH)
    data = json.loads(as_json.stdout)
    assert len(data["plan"]["cases"]) == 108
    assert data["link_max"] == {"bytes_per_second": 63e9, "source": "--link-max-gbps"}


def test_measuring_without_torch_says_how_to_get_it() -> None:
    proc = kvops("bench", "dma", prelude=BLOCK_TORCH)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    # the command for this install (kvops/install_hint.py): kvops is not on PyPI as kvops[bench]
    assert "torch is not importable" in proc.stderr and " -m pip install " in proc.stderr, proc.stderr
    assert "'kvops[bench]'" not in proc.stderr


def test_dry_run_never_imports_torch_even_where_installed() -> None:
    code = (
        "import sys; from kvops.cli import main; rc = main(['bench', 'dma', '--dry-run']); "
        "sys.exit(10 if 'torch' in sys.modules else rc)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bench"], "which benchmark?"),
        (["bench", "dma", "--sizes", "2M"], "ambiguous unit 'M'"),
        (["bench", "dma", "--repeats", "0"], "--repeats must be at least 1"),
        (["bench", "dma", "--blocks", "0"], "--blocks must be at least 1"),
        (["bench", "dma", "--warmup", "-1"], "--warmup must be 0 or more"),
        (["bench", "dma", "--link-max-gbps", "0"], "--link-max-gbps must be a positive"),
        (["bench", "dma", "--textfile", "/nonexistent-dir/x.prom"], "does not exist"),
        (["bench", "dma", "--directions", "sideways"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) if "--directions" in argv else _no_exit():
        rc = main(argv)
        assert rc == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


class _no_exit:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


@pytest.fixture
def host_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """The two GPU-only pieces replaced: the device lookup and the event timer. Copies are real."""
    monkeypatch.setattr(dma, "open_device", lambda index: dataclasses.replace(DEVICE, torch_device="cpu"))
    monkeypatch.setattr(dma, "time_transfer", host_clock_timer)


ARGS = [
    "bench",
    "dma",
    "--sizes",
    "16KiB,64KiB",
    "--memory",
    "pageable",
    "--blocks",
    "2",
    "--repeats",
    "2",
    "--warmup",
    "1",
]


def test_json_and_textfile_from_a_full_run(
    host_stand_in: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    textfile = tmp_path / "bench.prom"
    rc = main([*ARGS, "--link-max-gbps", "63", "--json", "--textfile", str(textfile)])
    out = capsys.readouterr().out
    assert rc == 0
    data = json.loads(out)  # --json: stdout is JSON only
    assert len(data["results"]) == 12 and data["failures"] == []
    assert all(r["verified"] for r in data["results"])
    assert data["link_max"]["bytes_per_second"] == 63e9 and data["link_max"]["source"] == "--link-max-gbps"
    fams = {f.name: f.samples for f in text_string_to_metric_families(textfile.read_text())}
    medians = fams["kvops_bench_dma_bandwidth_bytes_per_second"]
    assert len(medians) == 12
    by_case = {
        (r["direction"], r["block_bytes"], r["blocks"]): r["bytes_per_second"]["median"]
        for r in data["results"]
    }
    for s in medians:
        key = (s.labels["direction"], int(s.labels["block_bytes"]), int(s.labels["blocks"]))
        assert s.value == pytest.approx(by_case[key])


def test_table_from_a_full_run_says_its_units_and_link(
    host_stand_in: None, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(ARGS)
    out = capsys.readouterr().out
    assert rc == 0
    assert "1 GB = 10^9 bytes" in out
    assert "pageable · host→device (load) · one copy per transfer" in out
    assert "64 KiB ×2" in out
    # No collector for this stand-in device's figure here, no flag: said plainly.
    assert "link max unknown (" in out


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="needs torch without a pinned allocator (the CPU build)"
)
def test_a_refused_pinned_allocation_fails_its_cases_only(
    host_stand_in: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # The CPU build of torch has no pinned allocator: a real refusal, as on a host out of lockable memory.
    rc = main(
        [
            "bench",
            "dma",
            "--sizes",
            "16KiB",
            "--memory",
            "pinned",
            "pageable",
            "--blocks",
            "1",
            "--repeats",
            "2",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 1
    assert "pageable · host→device (load)" in captured.out
    assert "pinned · " not in captured.out
    failed = [line for line in captured.out.splitlines() if line.startswith("failed: pinned")]
    assert len(failed) == 3 and all("pin_memory" in line for line in failed)
    assert captured.err.count("case failed: pinned") == 3


def test_ctrl_c_keeps_the_cases_already_measured(
    host_stand_in: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[int] = []

    def interrupted_on_third(streams_copies, repeats: int, warmup: int) -> list[float]:  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return host_clock_timer(streams_copies, repeats, warmup)

    monkeypatch.setattr(dma, "time_transfer", interrupted_on_third)
    textfile = tmp_path / "bench.prom"
    rc = main([*ARGS, "--json", "--textfile", str(textfile)])
    data = json.loads(capsys.readouterr().out)
    assert rc == 130
    assert data["interrupted"] is True and len(data["results"]) == 2
    fams = {f.name: f.samples for f in text_string_to_metric_families(textfile.read_text())}
    assert len(fams["kvops_bench_dma_bandwidth_bytes_per_second"]) == 2
