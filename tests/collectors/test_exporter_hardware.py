"""`kvops exporter` as a user runs it: host metrics, NVIDIA through the stub, no GPU libraries."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from collectors import nvml_stub
from collectors.exporter_process import clean_env, nvml_env, page_samples, running_exporter
from collectors.nvml_stub import StubGpu
from kvops.exporter.command import ROUND_REUSE_SECONDS

KB = 1024


def _meminfo() -> dict[str, int]:
    with open("/proc/meminfo") as f:
        return {line.split(":")[0]: int(line.split()[1]) for line in f if line.split()[-1] == "kB"}


@pytest.mark.slow  # starts the exporter
def test_no_gpu_host_serves_host_memory_and_reports_gpu_collectors_down() -> None:
    with running_exporter(clean_env()) as (url, proc):
        got = page_samples(url)
        mem = _meminfo()
        proc.terminate()
        _, stderr = proc.communicate(timeout=10)
    assert got[("kvops_host_memory_total_bytes", ())] == mem["MemTotal"] * KB
    for name, field in (("available", "MemAvailable"), ("shmem", "Shmem"), ("mlocked", "Mlocked")):
        # the exporter read /proc/meminfo a moment before we did, on a shared machine
        assert abs(got[(f"kvops_host_memory_{name}_bytes", ())] - mem[field] * KB) <= max(
            0.05 * mem[field] * KB, 64 * 2**20
        )
    assert got[("kvops_collector_success", (("collector", "host"),))] == 1
    assert got[("kvops_collector_success", (("collector", "nvidia"),))] == 0
    assert got[("kvops_collector_success", (("collector", "amd"),))] == 0
    assert "Traceback" not in stderr
    nvidia = [line for line in stderr.splitlines() if "nvidia" in line.lower()]
    amd = [line for line in stderr.splitlines() if "amd" in line.lower()]
    assert len(nvidia) == 1 and "NVML library not found" in nvidia[0], stderr
    assert len(amd) == 1 and "libamd_smi.so" in amd[0], stderr


@pytest.mark.slow  # starts the exporter
def test_stub_gpus_through_the_exporter(nvml_libdir: Path, tmp_path: Path) -> None:
    devices = nvml_stub.gpus(2)
    devices[1] = StubGpu(uuid="GPU-lossy", busid="00000000:3B:00.0", pcie_tx_bytes=None, field_ret={197: 3})
    config = nvml_stub.write_config(tmp_path / "nvml.conf", devices)
    with running_exporter(nvml_env(nvml_libdir, config)) as (url, _):
        got = page_samples(url)
        devices[0].pcie_rx_bytes = 9_000_000
        devices[1].lost = True
        nvml_stub.write_config(config, devices)
        time.sleep(ROUND_REUSE_SECONDS + 0.1)  # a scrape sooner would share the last round
        after = page_samples(url)

    def g(i: int) -> tuple[tuple[str, str], ...]:
        return tuple(sorted({"gpu": str(i), "uuid": devices[i].uuid, "vendor": "nvidia"}.items()))

    assert got[("kvops_collector_success", (("collector", "nvidia"),))] == 1
    assert got[("kvops_gpu_pcie_transmit_bytes_total", g(0))] == devices[0].pcie_tx_bytes
    assert got[("kvops_gpu_pcie_receive_bytes_total", g(0))] == 2_000_000
    assert got[("kvops_gpu_memory_used_bytes", g(1))] == devices[1].memory_used
    assert ("kvops_gpu_pcie_transmit_bytes_total", g(1)) not in got  # NotSupported: absent
    assert round(got[("kvops_gpu_pcie_link_max_bytes_per_second", g(0))] / 1e9, 1) == 63.0
    # GPU 1 lost: GPU 0 still reported, with its new counter
    assert after[("kvops_gpu_pcie_receive_bytes_total", g(0))] == 9_000_000
    assert ("kvops_gpu_memory_used_bytes", g(1)) not in after
    assert after[("kvops_collector_success", (("collector", "nvidia"),))] == 1
