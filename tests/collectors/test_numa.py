"""NUMA placement (issue 45): a GPU's node, a target's host memory per node, and the flag when the
offload pool sits on another node than its GPUs, from numa_maps to the exporter and `kvops top`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collectors import nvml_stub
from collectors.exporter_process import clean_env, free_port, nvml_exporter, page_text
from collectors.test_host_link import _sim
from kvops.collectors import numa
from kvops.collectors.procs import attach_gpus
from kvops.snapshot import GpuSample, ProcessMemory

# Two mappings of a process on a two-socket host: 4 KiB pages on both nodes, a 2 MiB huge page
# mapping on node 1 (the format of Documentation/filesystems/proc.rst, "numa_maps").
NUMA_MAPS = (
    "55f0c0a00000 default file=/usr/bin/python3.12 mapped=10 N0=6 N1=4 kernelpagesize_kB=4\n"
    "7f2a40000000 bind:1 anon=512 dirty=512 active=0 N1=512 kernelpagesize_kB=4\n"
    "7f3a00000000 default file=/dev/hugepages/pool huge dirty=3 N1=3 kernelpagesize_kB=2048\n"
)


def _proc(root: Path, pid: int, text: str) -> None:
    d = root / "proc" / str(pid)
    d.mkdir(parents=True)
    (d / "numa_maps").write_text(text)


def test_numa_maps_bytes_per_node(tmp_path: Path) -> None:
    _proc(tmp_path, 42, NUMA_MAPS)
    assert numa.read_numa_maps(42, str(tmp_path)) == {
        "0": 6 * 4096,
        "1": 4 * 4096 + 512 * 4096 + 3 * 2 * 2**20,
    }
    assert numa.read_numa_maps(43, str(tmp_path)) is None  # gone
    assert numa.read_numa_maps(42, str(tmp_path), deadline=time.monotonic() - 1) is None  # cut short


def test_numa_maps_of_this_process_add_up_to_about_its_rss() -> None:
    if not os.path.exists("/proc/self/numa_maps"):
        pytest.skip("kernel without NUMA support")
    got = numa.read_numa_maps(os.getpid())
    assert got
    with open("/proc/self/status") as f:
        rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
    assert 0.5 * rss <= sum(got.values()) <= 1.5 * rss  # resident pages, as numa_maps counts them


def test_gpu_node_from_pci_sysfs(tmp_path: Path) -> None:
    dev = tmp_path / "sys" / "bus" / "pci" / "devices"
    (dev / "0000:18:00.0").mkdir(parents=True)
    (dev / "0000:18:00.0" / "numa_node").write_text("1\n")
    (dev / "0000:3b:00.0").mkdir(parents=True)
    (dev / "0000:3b:00.0" / "numa_node").write_text("-1\n")  # firmware gave no proximity
    assert numa.gpu_numa_node("00000000:18:00.0", str(tmp_path)) == 1  # NVML's 8-digit domain
    assert numa.gpu_numa_node("00000000:3B:00.0", str(tmp_path)) is None
    assert numa.gpu_numa_node("00000000:AF:00.0", str(tmp_path)) is None
    assert numa.gpu_numa_node(None, str(tmp_path)) is None


def test_remote_share_needs_both_sides() -> None:
    pm = ProcessMemory("http://a:8000", pids=[7], numa_bytes={"0": 1.0, "1": 3.0})
    gpu = GpuSample("0", "GPU-0", "nvidia", processes={7: 1.0}, numa_node=0)
    attach_gpus(pm, [gpu])
    assert pm.numa_remote_ratio == 0.75
    gpu.numa_node = None
    attach_gpus(pm, [gpu])
    assert pm.numa_remote_ratio is None  # the GPU's node unknown: no verdict
    pm.numa_bytes = {}
    gpu.numa_node = 1
    attach_gpus(pm, [gpu])
    assert pm.numa_remote_ratio is None


def test_placement_reads_off_the_caller_thread_and_keeps_a_cap(tmp_path: Path) -> None:
    _proc(tmp_path, 42, NUMA_MAPS)
    placement = numa.NumaPlacement(str(tmp_path), every=3600)
    try:
        placement.watch({"t": [42, 99]})  # 99 is gone: skipped, not a failure
        deadline = time.monotonic() + 5
        while not placement.bytes_by_node("t"):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert placement.bytes_by_node("t")["0"] == 6 * 4096
        assert placement.last_pass_seconds is not None and placement.last_pass_seconds < 1
    finally:
        placement.close()
    capped = numa.NumaPlacement(str(tmp_path), every=3600, cap=-1.0)  # every pass is over its cap
    try:
        capped.watch({"t": [42]})
        time.sleep(0.3)
        assert capped.bytes_by_node("t") == {}  # a cut-short pass is not used
    finally:
        capped.close()


@pytest.mark.slow  # a simulated vLLM, the exporter and `kvops top`
def test_offload_pool_on_another_node_is_flagged_by_exporter_and_top(
    nvml_libdir: Path, tmp_path: Path
) -> None:
    """The stub GPU sits on node 1 (NVML's answer; this host's sysfs has no such device); the
    simulated vLLM's memory is all on node 0, the only node here: the exporter exports the share
    (1.0) and top flags it, naming the runbook."""
    if not os.path.exists("/proc/self/numa_maps"):
        pytest.skip("kernel without NUMA support")
    sim_port = free_port()
    sim_url = f"http://127.0.0.1:{sim_port}"
    sim = _sim(sim_port)
    try:
        gpu = nvml_stub.gpus(1)[0]
        gpu.numa_node = 1
        gpu.procs = {sim.pid: 1_000_000_000}
        config = nvml_stub.write_config(tmp_path / "nvml.conf", [gpu])
        with nvml_exporter(nvml_libdir, config, sim_url) as url:
            deadline = time.monotonic() + 20
            while "kvops_vllm_process_numa_remote_ratio{" not in (page := page_text(url)):
                assert time.monotonic() < deadline, "no NUMA share exported"
                time.sleep(0.5)
            assert f'kvops_gpu_numa_node{{gpu="0",uuid="{gpu.uuid}",vendor="nvidia"}} 1.0' in page
            assert f'kvops_vllm_process_numa_remote_ratio{{target="{sim_url}"}} 1.0' in page
            assert f'kvops_vllm_process_numa_memory_bytes{{node="0",target="{sim_url}"}}' in page
            runs = [
                subprocess.run(
                    [sys.executable, "-m", "kvops.cli", "top", "--once", *flags, "--interval", "1.2", url],
                    capture_output=True,
                    text=True,
                    env=clean_env(),
                    timeout=60,
                )
                for flags in (["--json"], [])
            ]
    finally:
        sim.kill()
        sim.wait()
    for run in runs:
        assert run.returncode == 0, run.stderr
    (engine,) = [t for t in json.loads(runs[0].stdout)["targets"] if t["target"] == sim_url]
    assert engine["host_memory_remote_numa_ratio"] == 1.0
    (flag,) = [line for line in runs[1].stdout.splitlines() if line.startswith("NUMA!")]
    assert sim_url in flag and "100.0 %" in flag and "KvopsOffloadPoolRemoteNuma" in flag
