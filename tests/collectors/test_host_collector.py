"""HostCollector over the recorded tree in fixtures/host and over this machine's /proc."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kvops.collectors.host import HostCollector, read_meminfo, read_numa_nodes

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "host"
KB = 1024


def test_recorded_tree(tmp_path: Path) -> None:
    h = HostCollector(root=str(FIXTURE), shm_path=str(tmp_path)).collect()
    assert h.memory_total_bytes == 1056467156 * KB
    assert h.memory_available_bytes == 812345678 * KB
    assert h.shmem_bytes == 209725000 * KB
    assert h.mlocked_bytes == 4215664 * KB
    assert h.unevictable_bytes == 4216616 * KB
    assert (h.hugepages_total, h.hugepages_free, h.hugepage_size_bytes) == (512, 384, 2048 * KB)
    assert h.numa_nodes == {
        "0": {"total": 528233578 * KB, "free": 380000000 * KB, "used": (528233578 - 380000000) * KB},
        "1": {"total": 528233578 * KB, "free": 410123456 * KB, "used": (528233578 - 410123456) * KB},
    }
    st = os.statvfs(tmp_path)
    assert h.shm_total_bytes == st.f_blocks * st.f_frsize


def _proc_meminfo_kb(field: str) -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/meminfo")


def test_live_host_matches_proc_meminfo() -> None:
    h = HostCollector().collect()
    # fixed for the life of the machine: must be exact
    assert h.memory_total_bytes == _proc_meminfo_kb("MemTotal") * KB
    assert h.hugepage_size_bytes == _proc_meminfo_kb("Hugepagesize") * KB
    assert h.hugepages_total == _proc_meminfo_kb("HugePages_Total")
    # moving with other processes on a shared machine: same reading within 5%
    assert h.memory_available_bytes == pytest.approx(_proc_meminfo_kb("MemAvailable") * KB, rel=0.05)
    assert h.shmem_bytes is not None and h.mlocked_bytes is not None and h.unevictable_bytes is not None
    usage = shutil.disk_usage("/dev/shm")
    assert h.shm_total_bytes == usage.total
    assert h.shm_free_bytes == pytest.approx(usage.free, rel=0.05)


def test_kb_fields_become_bytes_and_counts_stay_counts(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").write_text(
        "MemTotal:  100 kB\nHugePages_Total:  7\nthis line is junk\nShmem: notanumber kB\nMlocked:\n"
    )
    assert read_meminfo(str(tmp_path)) == {"MemTotal": 100 * KB, "HugePages_Total": 7}


def test_no_numa_sysfs_and_no_shm_are_unknown_not_zero(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").write_text("MemTotal:  100 kB\n")
    h = HostCollector(root=str(tmp_path)).collect()  # no tmp/dev/shm, no tmp/sys
    assert h.numa_nodes == {}
    assert (h.shm_total_bytes, h.shm_free_bytes) == (None, None)
    assert h.mlocked_bytes is None
    assert read_numa_nodes(str(tmp_path)) == {}


def test_unreadable_meminfo_fails_the_collector(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        HostCollector(root=str(tmp_path)).collect()


def test_numa_nodes_are_listed_once_a_minute_and_read_every_time(tmp_path: Path) -> None:
    """Which nodes exist is looked up every NODE_LIST_SECONDS (memory hot-plug is rare); each
    node's meminfo is read on every collect."""
    from kvops.collectors import host

    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").write_text("MemTotal:  100 kB\n")
    nodes = tmp_path / "sys" / "devices" / "system" / "node"

    def node(n: int, free_kb: int) -> None:
        (nodes / f"node{n}").mkdir(parents=True, exist_ok=True)
        (nodes / f"node{n}" / "meminfo").write_text(
            f"Node {n} MemTotal:  1000 kB\nNode {n} MemFree:  {free_kb} kB\n"
            f"Node {n} MemUsed:  {1000 - free_kb} kB\n"
        )

    node(0, 400)
    now = [0.0]
    collector = HostCollector(root=str(tmp_path), shm_path=str(tmp_path), clock=lambda: now[0])
    assert collector.collect().numa_nodes == {"0": {"total": 1000 * KB, "free": 400 * KB, "used": 600 * KB}}
    node(0, 300)
    node(1, 900)
    now[0] = host.NODE_LIST_SECONDS - 1
    assert collector.collect().numa_nodes == {"0": {"total": 1000 * KB, "free": 300 * KB, "used": 700 * KB}}
    now[0] = host.NODE_LIST_SECONDS
    assert set(collector.collect().numa_nodes) == {"0", "1"}


def test_a_proc_file_longer_than_one_read_is_read_whole(tmp_path: Path) -> None:
    from kvops.collectors.procfs import read_small

    text = "".join(f"Field{i}:  {i} kB\n" for i in range(5000)).encode()  # ~80 KB
    (tmp_path / "long").write_bytes(text)
    assert read_small(tmp_path / "long") == text
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").write_bytes(text)
    assert read_meminfo(str(tmp_path))["Field4999"] == 4999 * KB
