"""GPU and host panels: units people read, and colours where a link is busy or memory short."""

from __future__ import annotations

from pathlib import Path

from kvops.frames.replay import ReplaySource
from kvops.snapshot import GpuSample, HostSample, Snapshot
from kvops.top.app import TopApp
from kvops.top.table import TargetTable

from .helpers import T1, T2, drive, screen_text, style_of, wait_until
from .test_sources import _vllm_target, exporter_text

LINK = 32e9  # bytes per second per direction, PCIe 5.0 x16 after encoding (rounded)
GIB = 2**30
ALARM_COLOUR = "#f4005f"  # what Textual's default theme draws "bold red" as


def alarm(style: str) -> bool:
    return style.startswith("bold " + ALARM_COLOUR)


def _exporter_dumps(tmp: Path, shm_free: float) -> list[str]:
    files = []
    for i, path in enumerate((T1, T2)):
        gpu = GpuSample(index="0", uuid="GPU-a", vendor="nvidia", name="H100", memory_used_bytes=70 * GIB,
                        memory_total_bytes=80 * GIB, pcie_tx_bytes=i * 0.95 * LINK,
                        pcie_rx_bytes=i * 0.40 * LINK, pcie_link_max_bytes_per_second=LINK)  # fmt: skip
        host = HostSample(memory_total_bytes=512 * GIB, memory_available_bytes=400 * GIB,
                          shm_total_bytes=256 * GIB, shm_free_bytes=shm_free)  # fmt: skip
        snap = Snapshot(time=i, targets=[_vllm_target(path, "http://gpu-host:8000")], gpus=[gpu], host=host)
        files.append(tmp / f"dump-{i}.prom")
        files[-1].write_text(exporter_text(snap))
    return [str(f) for f in files]


@drive
async def test_busy_link_and_short_shm_stand_out(tmp_path):
    # One interval of 1 s: 95 % of the link out of the GPU, 40 % into it; /dev/shm smaller
    # than the 128 GiB offload tier the exposition configures.
    app = TopApp(ReplaySource(_exporter_dumps(tmp_path, shm_free=100 * GIB), 1.0), 0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.ended)
        screen = screen_text(app)
        assert "30.40 (95 %)" in screen and "12.80 (40 %)" in screen  # GB/s, share of the link
        assert "70.0 / 80.0 GiB" in screen and "32.0" in screen
        assert alarm(style_of(app, "30.40 (95 %)"))
        assert not alarm(style_of(app, "12.80 (40 %)"))
        assert "RAM available 400.0 GiB of 512.0 GiB" in screen
        assert alarm(style_of(app, "100.0 GiB")) and "offload tier 128.0 GiB" in screen
        assert not alarm(style_of(app, "400.0 GiB of 512.0 GiB"))
        # The target came through the exporter dump under its own name.
        assert app.query_one("#targets", TargetTable).cursor_key == (
            "http://gpu-host:8000", "meta-llama/Llama-3.1-8B-Instruct", "0")  # fmt: skip


@drive
async def test_enough_shm_is_not_flagged(tmp_path):
    app = TopApp(ReplaySource(_exporter_dumps(tmp_path, shm_free=200 * GIB), 1.0), 0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.ended)
        assert "200.0 GiB" in screen_text(app) and not alarm(style_of(app, "200.0 GiB"))
