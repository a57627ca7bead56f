"""GPUs failing mid-run, seen through a running exporter: NVML's NotSupported and GpuIsLost,
AMD SMI's "N/A". The real pynvml/amdsmi bindings drive stub vendor libraries
(tests/collectors/*_stub.py); the exporter, its HTTP server and a vLLM target are real."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from collectors import amd_stub, nvml_stub
from collectors.amd_stub import StubAmdGpu
from collectors.nvml_stub import StubGpu

from kvops.exporter.families import render
from kvops.exporter.server import ExporterServer
from kvops.scrape.runner import ScrapeRunner
from support.exporter_harness import Samples, parse_exposition, value
from support.paths import VLLM_FIXTURES
from support.upstream import body

GOOD = (VLLM_FIXTURES / "0.33.0" / "offload-t2.prom").read_bytes()
NVML_NOT_SUPPORTED = 3
NVML_GPU_IS_LOST = 15


class HardwareExporter:
    """An in-process exporter over one good vLLM target and one GPU collector."""

    def __init__(self, target: str, collector: Any) -> None:
        from kvops.scrape.target import TargetScraper

        self.collector = collector
        self.runner = ScrapeRunner([TargetScraper(target)], [collector], timeout=3.0)
        self.server = ExporterServer(("127.0.0.1", 0), lambda t: render(self.runner.snapshot(t)))
        self.server.serve_in_thread()
        self.target = target

    def scrape(self) -> Samples:
        import requests

        resp = requests.get(self.server.url + "/metrics", timeout=10)
        assert resp.status_code == 200
        s = parse_exposition(resp.text)
        assert not {k: v for k, v in s.items() if v < 0}
        # the vLLM side is untouched by whatever the GPUs do
        assert value(s, "kvops_target_up", target=self.target) == 1.0
        assert value(s, "kvops_vllm_requests_running", target=self.target) == 97.0
        return s

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.runner.close()


def gpu_value(s: Samples, name: str, gpu: int) -> float | None:
    return value(s, name, gpu=str(gpu))


def gpus_reported(s: Samples) -> set[str]:
    return {dict(k[1])["gpu"] for k in s if k[0] == "kvops_gpu_info"}


# --- NVIDIA -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nvml_libdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    libdir = nvml_stub.build(tmp_path_factory.mktemp("nvml"))
    nvml_stub.preload(libdir)
    return libdir


@pytest.fixture
def nvidia_exporter(
    nvml_libdir: Path, upstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[HardwareExporter, Callable[[list[StubGpu]], Path]]]:
    from kvops.collectors.nvidia import NvidiaCollector

    config = tmp_path / "nvml.conf"
    monkeypatch.setenv(nvml_stub.CONFIG_ENV, str(config))

    def script(devices: list[StubGpu]) -> Path:
        return nvml_stub.write_config(config, devices)

    exp = HardwareExporter(upstream.route("good", body(GOOD)), NvidiaCollector(throughput_interval=0.05))
    yield exp, script
    exp.stop()


def test_nvml_not_supported_and_gpu_lost_mid_run(nvidia_exporter, caplog: pytest.LogCaptureFixture):
    exp, script = nvidia_exporter
    devices = nvml_stub.gpus(3)
    script(devices)
    s = exp.scrape()
    assert gpus_reported(s) == {"0", "1", "2"}
    assert gpu_value(s, "kvops_gpu_utilization_ratio", 1) == 0.5
    assert gpu_value(s, "kvops_gpu_pcie_replay_total", 1) == 0
    assert value(s, "kvops_collector_success", collector="nvidia") == 1.0

    # GPU 1 stops supporting two queries (a driver update, MIG mode): those values go, the rest stay
    devices[1].fail = {"nvmlDeviceGetUtilizationRates": NVML_NOT_SUPPORTED,
                       "nvmlDeviceGetPcieReplayCounter": NVML_NOT_SUPPORTED}  # fmt: skip
    script(devices)
    s = exp.scrape()
    assert gpu_value(s, "kvops_gpu_utilization_ratio", 1) is None  # absent, never 0
    assert gpu_value(s, "kvops_gpu_pcie_replay_total", 1) is None
    assert gpu_value(s, "kvops_gpu_memory_used_bytes", 1) == devices[1].memory_used
    assert gpu_value(s, "kvops_gpu_utilization_ratio", 0) == 0.5
    assert value(s, "kvops_collector_success", collector="nvidia") == 1.0

    # GPU 0 falls off the bus: every call on it says GPU_IS_LOST
    caplog.set_level(logging.WARNING)
    devices[0].lost = True
    script(devices)
    for _ in range(3):
        s = exp.scrape()
        assert gpus_reported(s) == {"1", "2"}
        assert not [k for k in s if dict(k[1]).get("gpu") == "0"]  # no stale series of GPU 0
        assert gpu_value(s, "kvops_gpu_pcie_transmit_bytes_total", 2) == devices[2].pcie_tx_bytes
        assert value(s, "kvops_collector_success", collector="nvidia") == 1.0
    lost_lines = [r for r in caplog.records if "lost" in r.getMessage()]
    assert len(lost_lines) == 1, [r.getMessage() for r in lost_lines]  # once, not per scrape

    # GPU 2's PCIe counter entry alone reports GPU_IS_LOST (NVML's per-field return code)
    devices[2].field_ret = {nvml_stub.FI_PCIE_COUNT_TX_BYTES: NVML_GPU_IS_LOST}
    script(devices)
    s = exp.scrape()
    assert gpus_reported(s) == {"1"}
    assert gpu_value(s, "kvops_gpu_memory_used_bytes", 1) == devices[1].memory_used


def test_nvml_pcie_counter_going_backwards_never_goes_negative(nvidia_exporter):
    """A 32-bit counter wraps and a 64-bit one resets (driver reload) between scrapes."""
    exp, script = nvidia_exporter
    devices = nvml_stub.gpus(2)
    devices[0].pcie_counter_type = nvml_stub.VALUE_TYPE_UNSIGNED_INT
    devices[0].pcie_tx_bytes = 2**32 - 1000
    devices[1].pcie_tx_bytes = 5_000_000
    script(devices)
    first = exp.scrape()
    devices[0].pcie_tx_bytes = 500  # wrapped
    devices[1].pcie_tx_bytes = 100  # reset
    script(devices)
    second = exp.scrape()
    tx = "kvops_gpu_pcie_transmit_bytes_total"
    assert gpu_value(second, tx, 0) == pytest.approx(gpu_value(first, tx, 0) + 1500)
    assert gpu_value(second, tx, 1) >= gpu_value(first, tx, 1)  # a counter never goes backwards


# --- AMD ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def amdsmi_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    yield amd_stub.import_amdsmi(amd_stub.build(tmp_path_factory.mktemp("rocm")))
    for name in [m for m in sys.modules if m == "amdsmi" or m.startswith("amdsmi.")]:
        del sys.modules[name]  # later tests import amdsmi afresh and see a host without ROCm


def test_amdsmi_na_values_mid_run_are_absent_not_zero(
    amdsmi_module: ModuleType, upstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from kvops.collectors.amd import AmdCollector

    config = tmp_path / "amdsmi.conf"
    monkeypatch.setenv(amd_stub.CONFIG_ENV, str(config))

    def script(devices: list[StubAmdGpu]) -> None:
        amd_stub.write_config(config, amdsmi_module, devices, pci_sleep_ms=0)

    a = StubAmdGpu(uuid="amd-a", xgmi_read_kb=[10] * 8, xgmi_write_kb=[11] * 8)
    b = StubAmdGpu(uuid="amd-b", bdf="0000:d1:00.0")
    script([a, b])
    exp = HardwareExporter(upstream.route("good", body(GOOD)), AmdCollector(throughput_interval=0.05))
    try:
        s = exp.scrape()
        assert gpus_reported(s) == {"0", "1"}
        assert gpu_value(s, "kvops_gpu_utilization_ratio", 0) == pytest.approx(0.42)
        assert gpu_value(s, "kvops_gpu_pcie_replay_total", 0) == 7
        assert value(s, "kvops_gpu_xgmi_read_bytes_total", gpu="0", link="3") == 10 * 1024

        # mid-run the driver answers "N/A" for everything on GPU 0 it can
        a_na = StubAmdGpu(uuid="amd-a", vram_used=None, gtt_total=None, gtt_used=None, pcie_width=None,
                          pcie_speed=None, pcie_max_width=None, pcie_max_speed=None, replay=None,
                          gfx_activity=None)  # fmt: skip
        script([a_na, b])
        s = exp.scrape()
    finally:
        exp.stop()
    assert value(s, "kvops_collector_success", collector="amd") == 1.0
    gpu0 = {k[0]: v for k, v in s.items() if dict(k[1]).get("gpu") == "0"}
    for name in ("kvops_gpu_utilization_ratio", "kvops_gpu_pcie_replay_total", "kvops_gpu_memory_used_bytes",
                 "kvops_gpu_gtt_used_bytes", "kvops_gpu_pcie_link_max_bytes_per_second",
                 "kvops_gpu_xgmi_read_bytes_total"):  # fmt: skip
        assert name not in gpu0, (name, gpu0.get(name))  # "N/A" is unknown: no sample, never 0
    # no N/A sentinel (0xFFFF..., 65535) leaked through as a value
    assert all(v < 2**16 - 1 or v == a.vram_total for k, v in gpu0.items() if k != "kvops_gpu_info"), gpu0
    assert gpu_value(s, "kvops_gpu_memory_total_bytes", 0) == a.vram_total
    assert gpu_value(s, "kvops_gpu_utilization_ratio", 1) == pytest.approx(0.42)  # GPU 1 intact
    assert gpu_value(s, "kvops_gpu_memory_used_bytes", 1) == b.vram_used
