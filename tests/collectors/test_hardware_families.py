"""Samples -> exposition: parse what prometheus_client renders and compare with the inputs."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from collectors.nvml_stub import StubGpu
from kvops import names
from kvops.collectors.host import HostCollector
from kvops.collectors.nvidia import NvidiaCollector
from kvops.exporter.families import gpu_families, host_families, process_families
from kvops.snapshot import GpuSample, ProcessMemory

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "host"
KB = 1024


class _Static:
    def __init__(self, metrics: list[Metric]) -> None:
        self.metrics = metrics

    def collect(self) -> Iterable[Metric]:
        return self.metrics


def exposed(metrics: list[Metric]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(sample name, sorted labels): value} as a Prometheus server would read it."""
    reg = CollectorRegistry()
    reg.register(_Static(metrics))  # type: ignore[arg-type]
    text = generate_latest(reg).decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if not s.name.endswith("_created"):
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def gl(index: str, uuid: str, vendor: str = "nvidia", **extra: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"gpu": index, "uuid": uuid, "vendor": vendor, **extra}.items()))


def test_stub_gpus_end_to_end(nvml_script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a = StubGpu(
        uuid="GPU-a",
        memory_total=80 * 2**30,
        memory_used=2**30,
        pcie_tx_bytes=111,
        pcie_rx_bytes=222,
        replay=3,
        util_gpu=25,
        nvlink_kib={0: (1, 2)},
        procs={77: 5 * 2**20, 78: None},
    )
    b = StubGpu(uuid="GPU-b", busid="00000000:3B:00.0", pcie_tx_bytes=None, pcie_rx_bytes=None, util_gpu=None)
    nvml_script([a, b])
    c = NvidiaCollector()
    try:
        got = exposed(gpu_families(c.collect()))
    finally:
        c.close()
    assert (
        got[("kvops_gpu_info", gl("0", "GPU-a", name="NVIDIA H100 80GB HBM3", pci_bus_id="00000000:18:00.0"))]
        == 1
    )
    assert got[("kvops_gpu_memory_total_bytes", gl("0", "GPU-a"))] == 80 * 2**30
    assert got[("kvops_gpu_memory_used_bytes", gl("0", "GPU-a"))] == 2**30
    assert got[("kvops_gpu_utilization_ratio", gl("0", "GPU-a"))] == 0.25
    assert got[("kvops_gpu_pcie_transmit_bytes_total", gl("0", "GPU-a"))] == 111
    assert got[("kvops_gpu_pcie_receive_bytes_total", gl("0", "GPU-a"))] == 222
    assert got[("kvops_gpu_pcie_replay_total", gl("0", "GPU-a"))] == 3
    link_max = got[("kvops_gpu_pcie_link_max_bytes_per_second", gl("0", "GPU-a"))]
    assert round(link_max / 1e9, 1) == 63.0  # Gen5 x16 after 128b/130b
    assert got[("kvops_gpu_pcie_link_generation", gl("0", "GPU-a", kind="current"))] == 5
    assert got[("kvops_gpu_pcie_link_width_lanes", gl("0", "GPU-a", kind="max"))] == 16
    assert got[("kvops_gpu_nvlink_transmit_bytes_total", gl("0", "GPU-a", link="0"))] == 1024
    assert got[("kvops_gpu_nvlink_receive_bytes_total", gl("0", "GPU-a", link="0"))] == 2048
    assert got[("kvops_gpu_process_memory_bytes", gl("0", "GPU-a", pid="77"))] == 5 * 2**20
    # unknown is absent, never 0
    assert ("kvops_gpu_process_memory_bytes", gl("0", "GPU-a", pid="78")) not in got
    assert ("kvops_gpu_pcie_transmit_bytes_total", gl("1", "GPU-b")) not in got
    assert ("kvops_gpu_utilization_ratio", gl("1", "GPU-b")) not in got
    assert got[("kvops_gpu_memory_total_bytes", gl("1", "GPU-b"))] == b.memory_total


def test_every_family_is_a_spec_name() -> None:
    g = GpuSample(
        index="0",
        uuid="u",
        vendor="amd",
        extra={"gtt_used_bytes": 5.0, "gtt_total_bytes": 9.0},
        xgmi_read_bytes={"1": 10.0},
        xgmi_write_bytes={"1": 20.0},
    )
    metrics = gpu_families([g]) + host_families(HostCollector(str(FIXTURE), "/nonexistent").collect())
    metrics += process_families([ProcessMemory(target="t", pids=[1], rss_anon=1.0, gpus=[("0", "u")])])
    specs = {s.family_name: s for s in names.all_specs()}
    for m in metrics:
        assert m.name in specs, m.name
        assert m.documentation == specs[m.name].help
        for s in m.samples:
            assert set(s.labels) == set(specs[m.name].labels), (m.name, s.labels)
    got = exposed(metrics)
    assert got[("kvops_gpu_gtt_used_bytes", gl("0", "u", "amd"))] == 5
    assert got[("kvops_gpu_xgmi_write_bytes_total", gl("0", "u", "amd", link="1"))] == 20


def test_host_families_from_recorded_tree() -> None:
    got = exposed(host_families(HostCollector(str(FIXTURE), "/nonexistent").collect()))
    assert got[("kvops_host_memory_total_bytes", ())] == 1056467156 * KB
    assert got[("kvops_host_memory_available_bytes", ())] == 812345678 * KB
    assert got[("kvops_host_memory_shmem_bytes", ())] == 209725000 * KB
    assert got[("kvops_host_memory_mlocked_bytes", ())] == 4215664 * KB
    assert got[("kvops_host_memory_unevictable_bytes", ())] == 4216616 * KB
    assert got[("kvops_host_hugepages_bytes", (("state", "total"),))] == 512 * 2048 * KB
    assert got[("kvops_host_hugepages_bytes", (("state", "free"),))] == 384 * 2048 * KB
    assert got[("kvops_host_numa_memory_free_bytes", (("node", "1"),))] == 410123456 * KB
    assert ("kvops_host_shm_free_bytes", ()) not in got  # no /dev/shm there: absent


def test_process_families() -> None:
    pm = ProcessMemory(
        target="http://127.0.0.1:8000",
        pids=[1, 2],
        rss_anon=10.0,
        rss_shmem=20.0,
        locked=0.0,
        pinned=None,
        gpus=[("0", "GPU-a"), ("3", "GPU-d")],
    )
    got = exposed(process_families([pm]))
    t = ("target", "http://127.0.0.1:8000")
    assert got[("kvops_vllm_process_memory_bytes", (("kind", "rss_anon"), t))] == 10
    assert got[("kvops_vllm_process_memory_bytes", (("kind", "rss_shmem"), t))] == 20
    assert got[("kvops_vllm_process_memory_bytes", (("kind", "locked"), t))] == 0
    assert ("kvops_vllm_process_memory_bytes", (("kind", "pinned"), t)) not in got
    assert got[("kvops_target_gpu_info", (("gpu", "3"), t, ("uuid", "GPU-d")))] == 1
