"""Host memory as it bears on KV offload buffers: /proc/meminfo, /dev/shm, NUMA nodes.

Reads the files directly rather than through psutil: psutil.virtual_memory() has no
Mlocked, Unevictable or HugePages, and its PROCFS_PATH is one process-wide setting,
whereas every reader here takes a root so tests hand it a recorded /proc and /sys tree
(as node_exporter's --path.procfs does). Pinned CUDA host buffers land in Shmem (and in
the owning process's RssShmem), not in Mlocked: hardware.md §4.2.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from kvops.snapshot import HostSample

_KB = 1024
_NODE_DIR = re.compile(r"node(\d+)$")


def read_meminfo(root: str = "/") -> dict[str, float]:
    """/proc/meminfo as {field: value}; fields given in kB come back in bytes, counts as counts."""
    out: dict[str, float] = {}
    with open(Path(root, "proc/meminfo"), encoding="ascii", errors="replace") as f:
        for line in f:
            key, sep, rest = line.partition(":")
            if not sep:
                continue
            parts = rest.split()
            if not parts:
                continue
            try:
                value = float(parts[0])
            except ValueError:
                continue
            if not math.isfinite(value):  # "nan", "inf": float() takes them, a count is not one
                continue
            out[key.strip()] = value * _KB if len(parts) > 1 and parts[1] == "kB" else value
    return out


def read_numa_nodes(root: str = "/") -> dict[str, dict[str, float]]:
    """Per NUMA node {"total", "free", "used"} bytes from /sys/devices/system/node/node*/meminfo.

    Empty where the kernel has no NUMA sysfs (containers may hide it).
    """
    base = Path(root, "sys/devices/system/node")
    nodes: dict[str, dict[str, float]] = {}
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return nodes
    for entry in entries:
        m = _NODE_DIR.match(entry)
        if not m:
            continue
        values: dict[str, float] = {}
        try:
            with open(base / entry / "meminfo", encoding="ascii", errors="replace") as f:
                for line in f:
                    # "Node 0 MemTotal:        6121684 kB"
                    parts = line.split()
                    if len(parts) >= 4 and parts[2] in ("MemTotal:", "MemFree:", "MemUsed:"):
                        values[parts[2][3:-1].lower()] = float(parts[3]) * _KB
        except (OSError, ValueError):
            continue
        if values:
            nodes[m.group(1)] = values
    return nodes


def read_shm(path: str) -> tuple[float | None, float | None]:
    """(size, free) bytes of the filesystem at `path` (/dev/shm), (None, None) if absent.

    Free is what an unprivileged writer can still allocate (f_bavail), as `df` shows.
    """
    try:
        st = os.statvfs(path)
    except OSError:
        return None, None
    return float(st.f_blocks * st.f_frsize), float(st.f_bavail * st.f_frsize)


class HostCollector:
    """Collects a HostSample. `root` prefixes /proc and /sys; `shm_path` defaults to root/dev/shm."""

    name = "host"
    # procfs, sysfs and /dev/shm's statvfs never block: read on the round's thread while the
    # targets answer (kvops.scrape.runner), which saves a worker's wake-up and GIL hand-offs.
    inline = True

    def __init__(self, root: str = "/", shm_path: str | None = None) -> None:
        self.root = root
        self.shm_path = shm_path if shm_path is not None else str(Path(root, "dev/shm"))

    def collect(self) -> HostSample:
        mem = read_meminfo(self.root)  # an unreadable /proc/meminfo fails the collector: nothing to report
        shm_total, shm_free = read_shm(self.shm_path)
        return HostSample(
            memory_total_bytes=mem.get("MemTotal"),
            memory_available_bytes=mem.get("MemAvailable"),
            shmem_bytes=mem.get("Shmem"),
            mlocked_bytes=mem.get("Mlocked"),
            unevictable_bytes=mem.get("Unevictable"),
            hugepages_total=mem.get("HugePages_Total"),
            hugepages_free=mem.get("HugePages_Free"),
            hugepage_size_bytes=mem.get("Hugepagesize"),
            shm_total_bytes=shm_total,
            shm_free_bytes=shm_free,
            numa_nodes=read_numa_nodes(self.root),
        )

    def close(self) -> None:
        """Nothing held open; here so every collector has the same shape."""
