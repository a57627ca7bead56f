"""AmdCollector through the real amdsmi package over the stub libamd_smi.so."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from collectors.amd_stub import StubAmdGpu
from collectors.stub_calls import call_log, wait_for_calls
from kvops.collectors.amd import AmdCollector, AmdSmiUnavailable

ROOT = Path(__file__).resolve().parents[2]
GEN5_X16 = 32e9 * 16 * 128 / 130 / 8
Script = Callable[..., Path]


COLLECTOR = AmdCollector  # what conftest's `collector` fixture builds


def _stub(amdsmi_module: ModuleType) -> ctypes.CDLL:
    return call_log(amdsmi_module.amdsmi_wrapper._libraries["libamd_smi.so"])


def test_two_gpus_report_what_amdsmi_says(amd_script: Script, collector: AmdCollector) -> None:
    a = StubAmdGpu(
        uuid="amd-a",
        procs={321: 5 * 2**30},
        xgmi_read_kb=[10, None, 30, None, None, None, None, None],
        xgmi_write_kb=[11, None, 31, None, None, None, None, None],
    )
    b = StubAmdGpu(
        uuid="amd-b", bdf="0000:d1:00.0", vram_used=1234, gtt_used=None, pcie_speed=160, pcie_width=8
    )
    amd_script([a, b])
    g0, g1 = collector.collect()
    assert (g0.index, g0.uuid, g0.vendor, g0.name, g0.pci_bus_id) == (
        "0",
        "amd-a",
        "amd",
        "AMD Instinct MI300X",
        "0000:c1:00.0",
    )
    assert (g0.memory_total_bytes, g0.memory_used_bytes) == (a.vram_total, a.vram_used)
    assert g0.extra == {"gtt_total_bytes": a.gtt_total, "gtt_used_bytes": a.gtt_used}
    assert g0.pcie_link_max_bytes_per_second == pytest.approx(GEN5_X16)
    assert round(g0.pcie_link_max_bytes_per_second / 1e9, 1) == 63.0
    assert (g0.pcie_link_gen, g0.pcie_link_width, g0.pcie_link_gen_max, g0.pcie_link_width_max) == (
        5,
        16,
        5,
        16,
    )
    assert g0.pcie_replays == 7
    assert g0.utilization == pytest.approx(0.42)
    assert g0.xgmi_read_bytes == {"0": 10 * 1024, "2": 30 * 1024}  # "N/A" links absent
    assert g0.xgmi_write_bytes == {"0": 11 * 1024, "2": 31 * 1024}
    assert g0.processes == {321: 5 * 2**30}
    assert (g1.uuid, g1.pci_bus_id, g1.memory_used_bytes) == ("amd-b", "0000:d1:00.0", 1234)
    assert "gtt_used_bytes" not in g1.extra
    assert g1.pcie_link_max_bytes_per_second == pytest.approx(16e9 * 8 * 128 / 130 / 8)  # Gen4 x8


def test_na_values_are_unknown_not_zero(amd_script: Script, collector: AmdCollector) -> None:
    amd_script([StubAmdGpu(uuid="amd-a", pcie_width=None, pcie_speed=None, replay=None, gfx_activity=None)])
    (g,) = collector.collect()
    assert (g.pcie_replays, g.utilization, g.pcie_link_gen, g.pcie_link_width) == (None, None, None, None)
    assert g.xgmi_read_bytes == {}
    # the current link is "N/A": the max link from amdsmi_get_pcie_info stands in
    assert g.pcie_link_max_bytes_per_second == pytest.approx(GEN5_X16)


def test_not_supported_call_degrades_only_its_values(
    amd_script: Script, collector: AmdCollector, amdsmi_module: ModuleType
) -> None:
    amd_script([StubAmdGpu(uuid="amd-a", fail={"amdsmi_get_gpu_metrics_info": 2})])
    (g,) = collector.collect()
    assert (g.pcie_replays, g.utilization) == (None, None)
    assert g.memory_used_bytes == 100_000_000_000
    stub = _stub(amdsmi_module)
    before = stub.kvops_stub_calls(b"amdsmi_get_gpu_metrics_info")
    collector.collect()
    assert stub.kvops_stub_calls(b"amdsmi_get_gpu_metrics_info") == before  # not asked again


def test_pci_throughput_runs_off_the_scrape_thread(
    amd_script: Script, collector: AmdCollector, amdsmi_module: ModuleType
) -> None:
    amd_script([StubAmdGpu(uuid="amd-a", pci=(1000, 3000, 256))], pci_sleep_ms=20)
    stub = _stub(amdsmi_module)
    before = stub.kvops_stub_calls(b"amdsmi_get_gpu_pci_throughput")
    (first,) = collector.collect()
    assert first.pcie_tx_bytes_per_second is None  # nothing sampled yet; collect did not wait
    wait_for_calls(stub, b"amdsmi_get_gpu_pci_throughput", before + 2)
    (g,) = collector.collect()
    assert (g.pcie_tx_bytes_per_second, g.pcie_rx_bytes_per_second) == (1000 * 256, 3000 * 256)
    assert stub.kvops_stub_last_tid(b"amdsmi_get_gpu_pci_throughput") != threading.get_native_id()


def test_init_failure_is_one_line(amd_script: Script, collector: AmdCollector) -> None:
    amd_script([], init_ret=34)
    with pytest.raises(AmdSmiUnavailable) as e:
        collector.collect()
    assert str(e.value) == "AMD SMI init failed: AMDSMI_STATUS_DRIVER_NOT_LOADED"


_PROBE = """
import sys
from kvops.collectors.amd import AmdCollector
c = AmdCollector()
for _ in range(2):
    try:
        c.collect()
    except Exception as e:
        print(type(e).__name__ + ": " + str(e), file=sys.stderr)
c.close()
"""


def test_no_rocm_is_one_clear_line_and_nothing_on_stdout() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("ROCM_PATH", "ROCM_HOME", "LD_LIBRARY_PATH")}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert out.returncode == 0
    assert out.stdout == ""  # amdsmi's own "Unable to find libamd_smi.so" print is captured
    line = "AmdSmiUnavailable: AMD SMI library (libamd_smi.so) not found (no ROCm on this host)\n"
    assert out.stderr == line * 2
