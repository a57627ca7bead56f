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
import time
from collections.abc import Callable
from pathlib import Path

from kvops.collectors.procfs import read_small
from kvops.snapshot import HostSample

_KB = 1024
_NODE_DIR = re.compile(r"node(\d+)$")


# "Key:   value [unit]" after a newline (read_meminfo puts one before the first line): one
# search over the file instead of a partition and a split per line in Python. Read on every
# scrape: the collector's 8 fields by name (_COLLECTED), 40 -> 17 us a read (best of 5 x 2,000).
_MEMINFO_LINE = re.compile(rb"\n([^:\n]+):[ \t]*(\S+)(?:[ \t]+(\S+))?")
_COLLECTED = re.compile(
    rb"\n(MemTotal|MemAvailable|Shmem|Mlocked|Unevictable|HugePages_Total|HugePages_Free|Hugepagesize):"
    rb"[ \t]*(\S+)(?:[ \t]+(\S+))?"
)
# "Node 0 MemTotal:  6121684 kB"
_NODE_MEMINFO_LINE = re.compile(rb"\nNode[ \t]+\d+[ \t]+Mem(Total|Free|Used):[ \t]*(\S+)")
NODE_LIST_SECONDS = 60.0  # NUMA nodes come and go only with memory hot-plug: listed this often


def read_meminfo(root: str = "/", collected_only: bool = False) -> dict[str, float]:
    """/proc/meminfo as {field: value}; fields given in kB come back in bytes, counts as counts.
    `collected_only`: just the fields HostCollector reports."""
    out: dict[str, float] = {}
    data = b"\n" + read_small(Path(root, "proc/meminfo"))
    for key, token, unit in (_COLLECTED if collected_only else _MEMINFO_LINE).findall(data):
        try:
            value = float(token)
        except ValueError:
            continue
        if not math.isfinite(value):  # "nan", "inf": float() takes them, a count is not one
            continue
        out[key.decode("ascii", "replace").strip()] = value * _KB if unit == b"kB" else value
    return out


def numa_node_dirs(root: str = "/") -> list[tuple[str, Path]]:
    """(node id, its sysfs directory) for each NUMA node; empty where the kernel has no NUMA
    sysfs (containers may hide it)."""
    base = Path(root, "sys/devices/system/node")
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return []
    return [(m.group(1), base / entry) for entry in entries if (m := _NODE_DIR.match(entry))]


def read_numa_nodes(
    root: str = "/", nodes: list[tuple[str, Path]] | None = None
) -> dict[str, dict[str, float]]:
    """Per NUMA node {"total", "free", "used"} bytes from /sys/devices/system/node/node*/meminfo
    (`nodes`: numa_node_dirs(root), listed again when not given). Empty where the kernel has no
    NUMA sysfs."""
    out: dict[str, dict[str, float]] = {}
    for node, directory in numa_node_dirs(root) if nodes is None else nodes:
        try:
            data = b"\n" + read_small(directory / "meminfo")
            values = {
                kind.decode().lower(): float(token) * _KB for kind, token in _NODE_MEMINFO_LINE.findall(data)
            }
        except (OSError, ValueError):
            continue
        if values:
            out[node] = values
    return out


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

    def __init__(
        self, root: str = "/", shm_path: str | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.root = root
        self.shm_path = shm_path if shm_path is not None else str(Path(root, "dev/shm"))
        self.clock = clock
        self._nodes: list[tuple[str, Path]] = []
        self._nodes_listed: float | None = None

    def _node_dirs(self) -> list[tuple[str, Path]]:
        now = self.clock()
        if self._nodes_listed is None or now - self._nodes_listed >= NODE_LIST_SECONDS:
            self._nodes, self._nodes_listed = numa_node_dirs(self.root), now
        return self._nodes

    def collect(self) -> HostSample:
        # an unreadable /proc/meminfo fails the collector: nothing to report
        mem = read_meminfo(self.root, collected_only=True)
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
            numa_nodes=read_numa_nodes(self.root, self._node_dirs()),
        )

    def close(self) -> None:
        """Nothing held open; here so every collector has the same shape."""
