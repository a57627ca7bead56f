"""GpuSample / HostSample / ProcessMemory -> prometheus_client metric families.

Names, HELP and labels come from kvops.names. A None value is no sample: a value the
driver or kernel does not give is absent, never 0.
"""

from __future__ import annotations

from prometheus_client.core import Metric

from kvops import names
from kvops.exporter.families import add, bound_families, family
from kvops.snapshot import GpuSample, HostSample, ProcessMemory


def gpu_families(gpus: list[GpuSample]) -> list[Metric]:
    info = family(names.GPU_INFO)
    gtt_used, gtt_total = family(names.GPU_GTT_USED), family(names.GPU_GTT_TOTAL)
    proc_mem = family(names.GPU_PROCESS_MEMORY)
    for g in gpus:
        base = [g.index, g.uuid, g.vendor]
        add(info, [*base, g.name or "", g.pci_bus_id or ""], 1.0)
        # Vendor extras and per-process memory are keyed outside the bound fields.
        add(gtt_used, base, g.extra.get("gtt_used_bytes"))
        add(gtt_total, base, g.extra.get("gtt_total_bytes"))
        for pid, mem in sorted(g.processes.items()):
            add(proc_mem, [*base, str(pid)], mem)
    return [info, *bound_families("gpu", gpus), gtt_used, gtt_total, proc_mem]


def host_families(host: HostSample) -> list[Metric]:
    huge = family(names.HOST_HUGEPAGES)
    if host.hugepage_size_bytes is not None:
        for state, pages in (("total", host.hugepages_total), ("free", host.hugepages_free)):
            add(huge, [state], None if pages is None else pages * host.hugepage_size_bytes)
    numa_total, numa_free = family(names.HOST_NUMA_MEM_TOTAL), family(names.HOST_NUMA_MEM_FREE)
    for node, mem in sorted(host.numa_nodes.items(), key=lambda kv: int(kv[0])):
        add(numa_total, [node], mem.get("total"))
        add(numa_free, [node], mem.get("free"))
    return [*bound_families("host", [host]), huge, numa_total, numa_free]


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
