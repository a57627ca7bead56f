"""NvidiaCollector through the real pynvml module over the stub libnvidia-ml.so.1."""

from __future__ import annotations

import ctypes
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collectors import nvml_stub
from collectors.nvml_stub import StubGpu
from collectors.stub_calls import call_log, wait_for_calls
from kvops.collectors.nvidia import NvidiaCollector, NvmlUnavailable, WrappingCounter

ROOT = Path(__file__).resolve().parents[2]
GEN5_X16 = 32e9 * 16 * 128 / 130 / 8  # hardware.md §1.5: 63.0 GB/s per direction

Script = Callable[..., Path]


COLLECTOR = NvidiaCollector  # what conftest's `collector` fixture builds


def _stub(libdir: Path) -> ctypes.CDLL:
    return call_log(ctypes.CDLL(str(libdir / nvml_stub.LIB_NAME)))


def test_two_gpus_report_what_the_driver_says(nvml_script: Script, collector: NvidiaCollector) -> None:
    a = StubGpu(
        uuid="GPU-aaaa",
        busid="00000000:18:00.0",
        memory_total=80 * 2**30,
        memory_used=30 * 2**30,
        memory_reserved=2**29,
        pcie_tx_bytes=123_456_789_012,
        pcie_rx_bytes=987_654_321,
        util_gpu=73,
        replay=4,
        procs={4242: 30 * 2**30, 4243: None},
    )
    b = StubGpu(
        uuid="GPU-bbbb",
        name="NVIDIA L4",
        busid="00000000:3B:00.0",
        memory_total=24 * 2**30,
        memory_used=2**30,
        pcie_tx_bytes=5,
        pcie_rx_bytes=6,
        link_gen=4,
        link_width=8,
        util_gpu=0,
    )
    nvml_script([a, b])

    g0, g1 = collector.collect()

    assert (g0.index, g0.uuid, g0.vendor, g0.name, g0.pci_bus_id) == (
        "0",
        "GPU-aaaa",
        "nvidia",
        "NVIDIA H100 80GB HBM3",
        "00000000:18:00.0",
    )
    assert g0.memory_total_bytes == 80 * 2**30
    assert g0.memory_used_bytes == 30 * 2**30  # v2: allocated only, reserved not added in
    assert g0.utilization == pytest.approx(0.73)
    assert (g0.pcie_tx_bytes, g0.pcie_rx_bytes) == (123_456_789_012, 987_654_321)
    assert g0.pcie_link_max_bytes_per_second == pytest.approx(GEN5_X16)
    assert round(g0.pcie_link_max_bytes_per_second / 1e9, 1) == 63.0
    assert (g0.pcie_link_gen, g0.pcie_link_width) == (5, 16)
    assert g0.pcie_replays == 4
    assert g0.processes == {4242: float(30 * 2**30), 4243: None}  # usedGpuMemory None kept as unknown
    assert g0.pcie_tx_bytes_per_second is None  # counters present: no sampling
    assert (g1.uuid, g1.name, g1.pci_bus_id) == ("GPU-bbbb", "NVIDIA L4", "00000000:3B:00.0")
    assert g1.pcie_link_max_bytes_per_second == pytest.approx(16e9 * 8 * 128 / 130 / 8)  # Gen4 x8
    assert (g1.pcie_tx_bytes, g1.pcie_rx_bytes, g1.utilization) == (5, 6, 0.0)


def test_counters_follow_the_driver_between_collections(
    nvml_script: Script, collector: NvidiaCollector
) -> None:
    g = StubGpu(uuid="GPU-a", pcie_tx_bytes=1000, pcie_rx_bytes=2000)
    nvml_script([g])
    assert collector.collect()[0].pcie_tx_bytes == 1000
    g.pcie_tx_bytes, g.pcie_rx_bytes = 51_000, 2500
    nvml_script([g])
    (s,) = collector.collect()
    assert (s.pcie_tx_bytes, s.pcie_rx_bytes) == (51_000, 2500)


def test_gpu_lost_mid_run_leaves_the_others(
    nvml_script: Script, collector: NvidiaCollector, caplog: pytest.LogCaptureFixture
) -> None:
    devices = nvml_stub.gpus(3)
    nvml_script(devices)
    assert [s.uuid for s in collector.collect()] == [d.uuid for d in devices]

    devices[1].lost = True
    devices[2].memory_used = 12345
    nvml_script(devices)
    with caplog.at_level(logging.WARNING, logger="kvops.collectors.nvidia"):
        first = collector.collect()
        second = collector.collect()
    for got in (first, second):
        assert [(s.index, s.uuid) for s in got] == [("0", devices[0].uuid), ("2", devices[2].uuid)]
        assert got[1].memory_used_bytes == 12345
        assert got[1].pcie_rx_bytes == devices[2].pcie_rx_bytes
    lost_lines = [r.getMessage() for r in caplog.records if "lost" in r.getMessage()]
    assert lost_lines == ["NVIDIA GPU 1 is lost (fell off the bus?)"]  # once, not per scrape


def test_gpu_lost_between_handle_and_values(nvml_script: Script, collector: NvidiaCollector) -> None:
    devices = nvml_stub.gpus(2)
    # the handle is still handed out but the values call says the GPU is gone
    devices[0].fail = {"nvmlDeviceGetFieldValues": 15}
    nvml_script(devices)
    assert [s.uuid for s in collector.collect()] == [devices[1].uuid]


def test_not_supported_field_degrades_only_that_value(
    nvml_script: Script, collector: NvidiaCollector, nvml_libdir: Path
) -> None:
    g = StubGpu(uuid="GPU-a", pcie_tx_bytes=777, pcie_rx_bytes=888, field_ret={198: 3}, util_gpu=None)
    nvml_script([g])
    (s,) = collector.collect()
    assert s.pcie_tx_bytes == 777  # 197's own nvmlReturn is SUCCESS
    assert s.pcie_rx_bytes is None  # 198's entry said NOT_SUPPORTED: absent, never 0
    assert s.utilization is None
    assert s.memory_total_bytes == g.memory_total  # everything else still there
    assert s.pcie_link_max_bytes_per_second == pytest.approx(GEN5_X16)

    stub = _stub(nvml_libdir)
    before = stub.kvops_stub_calls(b"nvmlDeviceGetUtilizationRates")
    collector.collect()
    collector.collect()
    # NotSupported is remembered: not asked again on every scrape
    assert stub.kvops_stub_calls(b"nvmlDeviceGetUtilizationRates") == before


def test_transient_error_degrades_one_value_and_is_asked_again(
    nvml_script: Script, collector: NvidiaCollector
) -> None:
    g = StubGpu(
        uuid="GPU-a", procs={1: 10}, fail={"nvmlDeviceGetComputeRunningProcesses_v3": 4}
    )  # NO_PERMISSION
    nvml_script([g])
    (s,) = collector.collect()
    assert s.processes == {}
    assert s.memory_used_bytes == g.memory_used
    g.fail = {}
    nvml_script([g])
    assert collector.collect()[0].processes == {1: 10.0}


def test_the_max_link_is_read_once_known_and_asked_again_until_then(
    nvml_script: Script, collector: NvidiaCollector, nvml_libdir: Path
) -> None:
    """The link a GPU and its slot can train to does not change while the driver runs: read
    until NVML gives both halves, then kept (a transient error is asked again)."""
    stub = _stub(nvml_libdir)
    g = StubGpu(
        uuid="GPU-a", link_gen_max=5, link_width_max=16, fail={"nvmlDeviceGetMaxPcieLinkGeneration": 999}
    )
    nvml_script([g])
    (s,) = collector.collect()
    assert (s.pcie_link_gen_max, s.pcie_link_width_max) == (None, 16)  # 999: NVML_ERROR_UNKNOWN
    g.fail = {}
    nvml_script([g])
    (s,) = collector.collect()
    assert (s.pcie_link_gen_max, s.pcie_link_width_max) == (5, 16)
    asked = stub.kvops_stub_calls(b"nvmlDeviceGetMaxPcieLinkGeneration")
    g.link_gen_max = 3  # not something a running driver does: shows the value is kept
    nvml_script([g])
    for _ in range(3):
        (s,) = collector.collect()
        assert (s.pcie_link_gen_max, s.pcie_link_width_max) == (5, 16)
    assert stub.kvops_stub_calls(b"nvmlDeviceGetMaxPcieLinkGeneration") == asked


def test_wrapped_32bit_counter_keeps_counting(nvml_script: Script, collector: NvidiaCollector) -> None:
    g = StubGpu(
        uuid="GPU-a",
        pcie_counter_type=nvml_stub.VALUE_TYPE_UNSIGNED_INT,
        pcie_tx_bytes=2**32 - 100,
        pcie_rx_bytes=10,
    )
    nvml_script([g])
    assert collector.collect()[0].pcie_tx_bytes == 2**32 - 100
    g.pcie_tx_bytes = 50  # 150 bytes later the 32-bit counter wrapped
    nvml_script([g])
    (s,) = collector.collect()
    assert s.pcie_tx_bytes == 2**32 - 100 + 150
    assert s.pcie_rx_bytes == 10


def test_64bit_counter_going_down_counts_as_reset(nvml_script: Script, collector: NvidiaCollector) -> None:
    g = StubGpu(uuid="GPU-a", pcie_tx_bytes=10_000, pcie_rx_bytes=1)
    nvml_script([g])
    collector.collect()
    g.pcie_tx_bytes = 300  # driver reloaded: counting again from 0
    nvml_script([g])
    assert collector.collect()[0].pcie_tx_bytes == 10_300


@pytest.mark.parametrize(
    ("readings", "bits", "signed", "expected"),
    [
        ([5, 9], 32, False, 9),
        ([2**32 - 1, 0], 32, False, 2**32),
        ([65_000, 100], 16, False, 65_000 + 636),
        ([10, 3], 64, False, 13),
        ([10, 3], 32, True, 13),
    ],
)
def test_wrapping_counter(readings: list[int], bits: int, signed: bool, expected: int) -> None:
    c = WrappingCounter()
    for r in readings:
        total = c.update(r, bits, signed)
    assert total == expected


def test_nvlink_counters_per_link(nvml_script: Script, collector: NvidiaCollector) -> None:
    nvml_script([StubGpu(uuid="GPU-a", nvlink_kib={0: (10, 20), 1: (30, 40)})])
    (s,) = collector.collect()
    assert s.nvlink_tx_bytes == {"0": 10 * 1024, "1": 30 * 1024}
    assert s.nvlink_rx_bytes == {"0": 20 * 1024, "1": 40 * 1024}


def test_no_nvlink_means_no_link_series(nvml_script: Script, collector: NvidiaCollector) -> None:
    nvml_script([StubGpu(uuid="GPU-a")])
    (s,) = collector.collect()
    assert s.nvlink_tx_bytes == {} and s.nvlink_rx_bytes == {}


def test_link_max_falls_back_to_max_link_when_current_unknown(
    nvml_script: Script, collector: NvidiaCollector
) -> None:
    nvml_script([StubGpu(uuid="GPU-a", link_gen=None, link_width=None, link_gen_max=4, link_width_max=16)])
    (s,) = collector.collect()
    assert s.pcie_link_max_bytes_per_second == pytest.approx(31.5e9, rel=1e-3)


def test_memory_falls_back_to_v1_on_old_driver(nvml_script: Script, collector: NvidiaCollector) -> None:
    g = StubGpu(uuid="GPU-a", memory_used=1000, memory_reserved=24, fail={"nvmlDeviceGetMemoryInfo_v2": 13})
    nvml_script([g])
    (s,) = collector.collect()
    assert s.memory_used_bytes == 1024  # v1 used = reserved + allocated


def test_throughput_sample_runs_off_the_scrape_thread(
    nvml_script: Script, collector: NvidiaCollector, nvml_libdir: Path
) -> None:
    nvml_script(
        [StubGpu(uuid="GPU-a", pcie_tx_bytes=None, pcie_rx_bytes=None, pcie_tx_kbps=1000, pcie_rx_kbps=3)]
    )
    stub = _stub(nvml_libdir)
    calls_before = stub.kvops_stub_calls(b"nvmlDeviceGetPcieThroughput")
    (first,) = collector.collect()
    assert first.pcie_tx_bytes is None and first.pcie_rx_bytes is None
    wait_for_calls(stub, b"nvmlDeviceGetPcieThroughput", calls_before + 2)
    time.sleep(0.1)  # let the sampler store its first pair
    (s,) = collector.collect()
    assert s.pcie_tx_bytes_per_second == 1000 * 1024
    assert s.pcie_rx_bytes_per_second == 3 * 1024
    assert stub.kvops_stub_last_tid(b"nvmlDeviceGetPcieThroughput") != threading.get_native_id()


def test_driver_not_loaded_is_one_line(nvml_script: Script, collector: NvidiaCollector) -> None:
    nvml_script([], init_ret=9)
    with pytest.raises(NvmlUnavailable, match=r"^NVIDIA driver not loaded$"):
        collector.collect()


def _run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT
    )


_PROBE = """
from kvops.collectors.nvidia import NvidiaCollector
c = NvidiaCollector()
try:
    gpus = c.collect()
except Exception as e:
    import sys
    print(type(e).__name__ + ": " + str(e), file=sys.stderr)
else:
    import sys
    print(len(gpus), gpus[-1].uuid, file=sys.stderr)
c.close()
"""


def test_no_library_is_one_clear_line_and_nothing_on_stdout() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", nvml_stub.CONFIG_ENV)}
    out = _run(_PROBE, env)
    assert out.returncode == 0
    assert out.stdout == ""
    assert out.stderr == "NvmlUnavailable: NVML library not found (no NVIDIA driver on this host)\n"


def test_subprocess_finds_stub_through_ld_library_path(nvml_libdir: Path, tmp_path: Path) -> None:
    config = nvml_stub.write_config(tmp_path / "eight.conf", nvml_stub.gpus(8))
    env = dict(os.environ, LD_LIBRARY_PATH=str(nvml_libdir), **{nvml_stub.CONFIG_ENV: str(config)})
    out = _run(_PROBE, env)
    assert out.stderr == f"8 {nvml_stub.gpus(8)[-1].uuid}\n"
    assert out.stdout == ""


@given(start=st.integers(0, 2**32 - 1), steps=st.lists(st.integers(0, 2**32 - 1), max_size=30))
def test_wrapping_32bit_counter_total_is_start_plus_true_increments(start: int, steps: list[int]) -> None:
    """Whatever the increments (each under one wrap), the total is what really went over the link."""
    c = WrappingCounter()
    raw = start
    total = c.update(raw, 32)
    for step in steps:
        raw = (raw + step) % 2**32
        total = c.update(raw, 32)
    assert total == start + sum(steps)


def test_handles_and_uuids_are_asked_once(
    nvml_script: Script, collector: NvidiaCollector, nvml_libdir: Path
) -> None:
    """Count, handles and UUIDs are fixed while NVML is initialised: a scrape after the first
    asks none of them (1 + 2 per GPU calls a scrape before), and still reads every GPU."""
    devices = nvml_stub.gpus(3)
    nvml_script(devices)
    assert [s.uuid for s in collector.collect()] == [d.uuid for d in devices]
    stub = _stub(nvml_libdir)
    names = (b"nvmlDeviceGetCount_v2", b"nvmlDeviceGetHandleByIndex_v2", b"nvmlDeviceGetUUID")
    before = [stub.kvops_stub_calls(n) for n in names]
    devices[2].memory_used = 4242
    nvml_script(devices)
    got = collector.collect()
    assert [s.uuid for s in got] == [d.uuid for d in devices] and got[2].memory_used_bytes == 4242
    assert [stub.kvops_stub_calls(n) for n in names] == before
    assert before[2] >= 3  # the counter sees these calls at all
