from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kvops import names
from kvops.bench.report import bar, render_table, textfile_text, write_textfile
from kvops.bench.results import BenchRun, LinkMax

MIB = 2**20


def _row(table: str, start: str) -> str:
    rows = [line for line in table.splitlines() if line.strip().startswith(start)]
    assert rows, f"no row starting {start!r} in\n{table}"
    return rows[0]


def test_bar_is_proportional_in_eighths_and_clipped() -> None:
    assert bar(0.0) == ""
    assert bar(1.0, width=10) == "█" * 10
    assert bar(2.5, width=10) == "█" * 10
    assert bar(0.5, width=10) == "█" * 5
    assert bar(0.0625, width=10) == "▋"  # 5 eighths of one cell
    assert bar(0.05, width=10) == "▌"  # 4 eighths: half a cell


def test_table_shows_gb_per_second_link_fraction_and_bar(sample_run: BenchRun) -> None:
    table = render_table(sample_run, "GB")
    assert "1 GB = 10^9 bytes" in table
    assert "link max 63.0 GB/s per direction (nvidia collector, GPU 0 by uuid)" in table
    # 2 MiB in 100 µs = 20.97 GB/s, 33 % of 63 GB/s, 80 eighths of a 30-cell bar = 10 cells.
    h2d = table.split("pinned · host→device")[1]
    row = _row(h2d, "2 MiB")
    assert " 20.97 " in row and " 33% " in row
    assert row.endswith("█" * 10)
    # bidir: 4 MiB per transfer, median of 41.94/52.43/33.55 GB/s, held against 2 × 63 GB/s.
    bidir = _row(table.split("pinned · both at once")[1], "2 MiB")
    assert " 41.94 " in bidir and " 33% " in bidir and "33.55–52.43" in bidir


def test_table_in_gib_converts_with_two_to_the_thirty(sample_run: BenchRun) -> None:
    table = render_table(sample_run, "GiB")
    assert "1 GiB = 2^30 bytes" in table
    assert "link max 58.7 GiB/s" in table
    row = _row(table.split("pinned · host→device")[1], "2 MiB")
    assert " 19.53 " in row  # 20.97152e9 / 2^30


def test_failed_copy_check_is_flagged_on_its_row(sample_run: BenchRun) -> None:
    table = render_table(sample_run)
    row = _row(table.split("pageable · host→device")[1], "2 MiB ×64")
    assert "COPY CHECK FAILED" in row
    assert " 5.24 " in row  # 128 MiB in 25.6 ms


def test_unknown_link_max_is_said_and_bars_are_relative(sample_run: BenchRun) -> None:
    sample_run.link = LinkMax(None, "no nvidia collector in this build; give --link-max-gbps")
    table = render_table(sample_run)
    assert "link max unknown (no nvidia collector in this build" in table
    fastest = _row(table.split("pinned · both at once")[1], "2 MiB")
    assert " ? " in fastest and fastest.endswith("█" * 30)


def test_json_is_in_base_units(sample_run: BenchRun) -> None:
    data = json.loads(json.dumps(sample_run.as_dict()))
    first = data["results"][0]
    assert first["bytes_per_second"]["median"] == pytest.approx(2 * MIB / 100e-6)
    assert first["link_fraction"] == pytest.approx(2 * MIB / 100e-6 / 63e9)
    assert data["link_max"]["bytes_per_second"] == 63e9
    assert data["device"]["backend"] == "cuda"
    assert data["results"][2]["verified"] is False


def _families(text: str) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_textfile_parses_with_prometheus_client_and_uses_declared_names(sample_run: BenchRun) -> None:
    fams = _families(textfile_text(sample_run))
    declared = names.by_name()
    for name, samples in fams.items():
        assert name in declared, name
        for s in samples:
            assert set(s.labels) == set(declared[name].labels), name
    median = {
        (s.labels["direction"], s.labels["memory"], s.labels["blocks"]): s.value
        for s in fams["kvops_bench_dma_bandwidth_bytes_per_second"]
    }
    assert median[("h2d", "pinned", "1")] == pytest.approx(20.97152e9)
    assert median[("bidir", "pinned", "1")] == pytest.approx(4 * MIB / 100e-6)
    link = fams["kvops_bench_dma_link_max_bytes_per_second"][0]
    assert link.value == 63e9 and link.labels["uuid"] == sample_run.device.uuid
    ratios = [s.value for s in fams["kvops_bench_dma_link_ratio"]]
    assert len(ratios) == 3 and all(0 < r < 1 for r in ratios)
    assert fams["kvops_bench_dma_finished_timestamp_seconds"][0].value == 1_790_000_000.0


def test_textfile_labels_use_the_collectors_gpu_numbering_when_matched(sample_run: BenchRun) -> None:
    # torch's device 0 is the driver's GPU 3 (CUDA_VISIBLE_DEVICES=3): label as the exporter does.
    sample_run.link = LinkMax(63e9, "nvidia collector", gpu_index="3", gpu_uuid="GPU-58f4ef56")
    fams = _families(textfile_text(sample_run))
    for samples in fams.values():
        for s in samples:
            assert (s.labels["gpu"], s.labels["uuid"], s.labels["vendor"]) == ("3", "GPU-58f4ef56", "nvidia")


def test_textfile_without_link_max_has_no_ratio_series(sample_run: BenchRun) -> None:
    sample_run.link = LinkMax(None, "unknown")
    fams = _families(textfile_text(sample_run))
    assert "kvops_bench_dma_link_max_bytes_per_second" not in fams
    assert fams.get("kvops_bench_dma_link_ratio", []) == []
    assert len(fams["kvops_bench_dma_bandwidth_min_bytes_per_second"]) == 3


def test_write_textfile_writes_the_same_text(sample_run: BenchRun, tmp_path: Path) -> None:
    path = tmp_path / "kvops_bench.prom"
    write_textfile(sample_run, path)
    assert path.read_text() == textfile_text(sample_run)
    assert [p.name for p in tmp_path.iterdir()] == ["kvops_bench.prom"]  # no temp file left behind
