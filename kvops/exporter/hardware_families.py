"""GpuSample / HostSample / ProcessMemory -> prometheus_client metric families.

Names, HELP and labels come from kvops.names. A None value is no sample: a value the
driver or kernel does not give is absent, never 0.
"""

from __future__ import annotations

from prometheus_client.core import Metric

from kvops import names
from kvops.exporter.families import add, family
from kvops.snapshot import GpuSample, HostSample, ProcessMemory


def gpu_families(gpus: list[GpuSample]) -> list[Metric]:
    info = family(names.GPU_INFO)
    used = family(names.GPU_MEMORY_USED)
    total = family(names.GPU_MEMORY_TOTAL)
    util = family(names.GPU_UTILIZATION)
    tx, rx = family(names.GPU_PCIE_TX), family(names.GPU_PCIE_RX)
    tx_rate, rx_rate = family(names.GPU_PCIE_TX_RATE), family(names.GPU_PCIE_RX_RATE)
    link_max = family(names.GPU_PCIE_LINK_MAX)
    link_gen, link_width = family(names.GPU_PCIE_LINK_GENERATION), family(names.GPU_PCIE_LINK_WIDTH)
    replays = family(names.GPU_PCIE_REPLAYS)
    nvl_tx, nvl_rx = family(names.GPU_NVLINK_TX), family(names.GPU_NVLINK_RX)
    xgmi_r, xgmi_w = family(names.GPU_XGMI_READ), family(names.GPU_XGMI_WRITE)
    gtt_used, gtt_total = family(names.GPU_GTT_USED), family(names.GPU_GTT_TOTAL)
    proc_mem = family(names.GPU_PROCESS_MEMORY)

    for g in gpus:
        base = [g.index, g.uuid, g.vendor]
        add(info, [*base, g.name or "", g.pci_bus_id or ""], 1.0)
        add(used, base, g.memory_used_bytes)
        add(total, base, g.memory_total_bytes)
        add(util, base, g.utilization)
        add(tx, base, g.pcie_tx_bytes)
        add(rx, base, g.pcie_rx_bytes)
        add(tx_rate, base, g.pcie_tx_bytes_per_second)
        add(rx_rate, base, g.pcie_rx_bytes_per_second)
        add(link_max, base, g.pcie_link_max_bytes_per_second)
        add(link_gen, [*base, "current"], g.pcie_link_gen)
        add(link_gen, [*base, "max"], g.pcie_link_gen_max)
        add(link_width, [*base, "current"], g.pcie_link_width)
        add(link_width, [*base, "max"], g.pcie_link_width_max)
        add(replays, base, g.pcie_replays)
        for metric, per_link in (
            (nvl_tx, g.nvlink_tx_bytes),
            (nvl_rx, g.nvlink_rx_bytes),
            (xgmi_r, g.xgmi_read_bytes),
            (xgmi_w, g.xgmi_write_bytes),
        ):
            for link, value in sorted(per_link.items(), key=lambda kv: int(kv[0])):
                add(metric, [*base, link], value)
        add(gtt_used, base, g.extra.get("gtt_used_bytes"))
        add(gtt_total, base, g.extra.get("gtt_total_bytes"))
        for pid, mem in sorted(g.processes.items()):
            add(proc_mem, [*base, str(pid)], mem)
    return [
        info,
        used,
        total,
        util,
        tx,
        rx,
        tx_rate,
        rx_rate,
        link_max,
        link_gen,
        link_width,
        replays,
        nvl_tx,
        nvl_rx,
        xgmi_r,
        xgmi_w,
        gtt_used,
        gtt_total,
        proc_mem,
    ]


def host_families(host: HostSample) -> list[Metric]:
    out: list[Metric] = []
    for spec, value in (
        (names.HOST_MEM_TOTAL, host.memory_total_bytes),
        (names.HOST_MEM_AVAILABLE, host.memory_available_bytes),
        (names.HOST_MEM_SHMEM, host.shmem_bytes),
        (names.HOST_MEM_MLOCKED, host.mlocked_bytes),
        (names.HOST_MEM_UNEVICTABLE, host.unevictable_bytes),
        (names.HOST_SHM_SIZE, host.shm_total_bytes),
        (names.HOST_SHM_FREE, host.shm_free_bytes),
    ):
        m = family(spec)
        add(m, [], value)
        out.append(m)
    huge = family(names.HOST_HUGEPAGES)
    if host.hugepage_size_bytes is not None:
        for state, pages in (("total", host.hugepages_total), ("free", host.hugepages_free)):
            add(huge, [state], None if pages is None else pages * host.hugepage_size_bytes)
    numa_total, numa_free = family(names.HOST_NUMA_MEM_TOTAL), family(names.HOST_NUMA_MEM_FREE)
    for node, mem in sorted(host.numa_nodes.items(), key=lambda kv: int(kv[0])):
        add(numa_total, [node], mem.get("total"))
        add(numa_free, [node], mem.get("free"))
    return [*out, huge, numa_total, numa_free]


def process_families(procs: list[ProcessMemory]) -> list[Metric]:
    mem = family(names.PROCESS_MEMORY)
    gpu_info = family(names.TARGET_GPU_INFO)
    for pm in procs:
        for kind, value in (
            ("rss_anon", pm.rss_anon),
            ("rss_shmem", pm.rss_shmem),
            ("locked", pm.locked),
            ("pinned", pm.pinned),
        ):
            add(mem, [pm.target, kind], value)
        for index, uuid in pm.gpus:
            add(gpu_info, [pm.target, index, uuid], 1.0)
    return [mem, gpu_info]
