"""Target -> process tree -> host memory and GPUs."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvops.collectors import procs
from kvops.collectors.procs import (
    ProcessTracker,
    attach_gpus,
    is_local_host,
    processes_for,
    read_status,
    target_processes,
    tree_memory,
)
from kvops.snapshot import GpuSample, ProcessMemory

FIXTURE = str(Path(__file__).resolve().parent / "fixtures" / "host")
KB = 1024


def test_tree_sums_the_vllm_processes_only() -> None:
    pm = tree_memory("http://127.0.0.1:8000", [100], FIXTURE)
    assert pm is not None
    assert pm.pids == [100, 101, 102, 103]  # not 1 (its parent) nor 200 (a sibling)
    assert pm.rss_anon == (1500000 + 2500000 + 3000000 + 3100000) * KB
    assert pm.rss_shmem == (2048 + 4096 + 104857600 * 2) * KB
    assert pm.locked == 64 * KB
    assert pm.pinned == 64 * KB


def test_tree_of_a_missing_process_is_none() -> None:
    assert tree_memory("t", [99999], FIXTURE) is None


def test_attach_gpus_from_vendor_process_lists() -> None:
    pm = ProcessMemory(target="t", pids=[100, 101, 102, 103])
    gpus = [
        GpuSample(index="0", uuid="GPU-a", vendor="nvidia", processes={102: 1e9}),
        GpuSample(index="1", uuid="GPU-b", vendor="nvidia", processes={103: None}),
        GpuSample(index="2", uuid="GPU-c", vendor="nvidia", processes={555: 1e9}),
    ]
    attach_gpus(pm, gpus)
    assert pm.gpus == [("0", "GPU-a"), ("1", "GPU-b")]


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("127.0.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", True),
        ("192.0.2.10", False),
        ("example.invalid", False),
        (socket.gethostname(), True),
    ],
)
def test_is_local_host(host: str, local: bool) -> None:
    assert is_local_host(host) is local


def test_remote_target_is_none() -> None:
    assert target_processes("http://192.0.2.10:8000/metrics") is None
    assert target_processes("not a url ::::") is None


# The child says when its 64 MiB are written (bytearray() zero-fills, so they are resident) and
# the server announces itself only then: the test reads a tree whose memory no longer grows.
# (A 0.3 s sleep for it was too short under load: the child had not started its allocation.)
_SERVER = """
import http.server, socketserver, subprocess, sys, time
hold = "import time; b = bytearray(64 << 20); print('ready', flush=True); time.sleep(60)"
child = subprocess.Popen([sys.executable, "-c", hold], stdout=subprocess.PIPE, text=True)
assert child.stdout.readline() == "ready\\n"
srv = socketserver.TCPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
print(srv.server_address[1], child.pid, flush=True)
srv.handle_request()
"""


@pytest.fixture
def local_server() -> Iterator[tuple[int, int, int]]:
    """A process listening on loopback with one child: (port, server pid, child pid)."""
    proc = subprocess.Popen([sys.executable, "-c", _SERVER], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    port, child = (int(x) for x in proc.stdout.readline().split())  # its child's buffer is written
    yield port, proc.pid, child
    subprocess.run(["kill", str(child)], check=False)
    proc.kill()
    proc.wait(timeout=10)


def test_live_target_process_tree(local_server: tuple[int, int, int]) -> None:
    port, server, child = local_server
    pm = target_processes(f"http://127.0.0.1:{port}/metrics")
    assert pm is not None
    assert pm.target == f"http://127.0.0.1:{port}/metrics"
    assert pm.pids == sorted([server, child])
    expected = [read_status(p) for p in (server, child)]
    assert all(e is not None for e in expected)
    assert pm.rss_anon == pytest.approx(sum(e["RssAnon"] for e in expected if e), rel=0.05)
    assert pm.rss_anon is not None and pm.rss_anon > 64 * 2**20  # the child's buffer is in the sum
    assert pm.locked == sum(e["VmLck"] for e in expected if e)


def test_every_interface_address_is_local() -> None:
    import psutil

    families = (socket.AF_INET, socket.AF_INET6)
    addrs = [
        a.address.split("%")[0] for nic in psutil.net_if_addrs().values() for a in nic if a.family in families
    ]
    assert addrs
    assert all(is_local_host(a) for a in addrs), addrs


def test_processes_for_joins_local_targets_to_their_gpus(local_server: tuple[int, int, int]) -> None:
    port, _server, child = local_server
    gpus = [GpuSample(index="1", uuid="GPU-b", vendor="nvidia", processes={child: 2e9})]
    local = f"http://localhost:{port}"
    (pm,) = processes_for([local, "http://192.0.2.10:8000"], gpus)
    assert (pm.target, pm.gpus) == (local, [("1", "GPU-b")])


def test_an_unchanged_tree_is_looked_for_less_often(
    local_server: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan that finds a target's processes runs at 30 s, then each interval twice the last
    while the tree stays the same, up to max_ttl; a changed tree starts again at 30 s."""
    port, server, child = local_server
    clock = [1000.0]
    scans: list[float] = []
    listener = [server]  # which process the scan finds on the port

    def counted_scan() -> dict[int, set[int]]:
        scans.append(clock[0] - 1000.0)
        return {port: set(listener)}

    monkeypatch.setattr(procs.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(procs, "_listening_by_port", counted_scan)
    tracker = ProcessTracker(ttl=30, max_ttl=100, background=False)  # the schedule, scans in line
    target = f"http://127.0.0.1:{port}"
    for second in range(0, 400):
        clock[0] = 1000.0 + second
        (pm,) = tracker.collect([target], [])
        assert pm.pids == sorted([server, child])
    # found at 0; the same at 31 (kept 60 now), 92 (100: the cap), 193, 294, 395
    assert scans == [0, 31, 92, 193, 294, 395]
    listener[:] = [child]  # as if the server restarted as the child: another tree
    pids = []
    for second in range(400, 700):
        clock[0] = 1000.0 + second
        (pm,) = tracker.collect([target], [])
        pids.append(pm.pids)
    # the next scan (496) finds the tree changed: 30 s again, then 60, then 100
    assert scans[6:] == [496, 527, 588, 689]
    assert pids[95] == sorted([server, child]) and pids[96] == [child]


@pytest.mark.parametrize("nodes", [["0"], ["0", "1"]])
def test_numa_memory_of_a_one_node_host_is_its_resident_set(
    local_server: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch, nodes: list[str]
) -> None:
    """One node: nothing can be remote, so numa_maps is not walked (no reader thread) and the
    tree's resident memory is on that node. Two nodes: numa_maps is read off the scrape path."""
    from kvops.collectors import numa

    port, server, child = local_server
    monkeypatch.setattr(numa, "host_nodes", lambda root="/": nodes)
    tracker = ProcessTracker()
    target = f"http://127.0.0.1:{port}"
    try:
        (pm,) = tracker.collect([target], [])
        assert tracker.numa is not None
        if len(nodes) == 1:
            assert tracker.numa._thread is None
            statuses = [read_status(p) for p in (server, child)]
            resident = sum(s["VmRSS"] for s in statuses if s)
            assert pm.numa_bytes == {"0": pytest.approx(resident, rel=0.05)}
            assert pm.numa_bytes["0"] > 64 * 2**20  # the child's buffer
        else:
            assert tracker.numa._thread is not None
            deadline = time.monotonic() + 10
            while not (pm := tracker.collect([target], [])[0]).numa_bytes:
                assert time.monotonic() < deadline, "numa_maps never read"
                time.sleep(0.05)
            assert sum(pm.numa_bytes.values()) > 64 * 2**20
    finally:
        tracker.close()


def test_host_nodes_from_sysfs(tmp_path: Path) -> None:
    from kvops.collectors import numa

    assert numa.host_nodes(str(tmp_path)) == []  # sysfs hidden: unknown, not one node
    base = tmp_path / "sys" / "devices" / "system" / "node"
    for name in ("node1", "node0", "node10", "possible", "has_cpu"):
        (base / name).mkdir(parents=True)
    assert numa.host_nodes(str(tmp_path)) == ["0", "1", "10"]


def test_a_stale_tree_is_looked_for_off_the_scrape(
    local_server: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a target with no tree waits for the scan; a known tree gone stale is scanned for on a
    thread while the scrape reads the processes it knows (the waiting scrapes were the p99)."""
    import threading

    port, server, child = local_server
    release, entered = threading.Event(), threading.Event()
    listener = [server]

    def slow_scan() -> dict[int, set[int]]:
        if scans:
            entered.set()
            assert release.wait(10)
        scans.append(1)
        return {port: set(listener)}

    scans: list[int] = []
    monkeypatch.setattr(procs, "_listening_by_port", slow_scan)
    tracker = ProcessTracker(ttl=0.2, max_ttl=0.2)
    target = f"http://127.0.0.1:{port}"
    try:
        (pm,) = tracker.collect([target], [])  # no tree yet: this scrape scans
        assert pm.pids == sorted([server, child]) and scans == [1]
        time.sleep(0.3)
        listener[:] = [child]
        started = time.monotonic()
        (pm,) = tracker.collect([target], [])  # stale: scanned on a thread, the scrape goes on
        assert time.monotonic() - started < 1.0 and pm.pids == sorted([server, child])
        assert entered.wait(5)
        release.set()
        deadline = time.monotonic() + 5
        while tracker.collect([target], [])[0].pids != [child]:
            assert time.monotonic() < deadline, "the scan's tree never reached a scrape"
            time.sleep(0.05)
    finally:
        release.set()
        tracker.close()


def test_status_fields_are_read_on_every_line_the_first_too_and_nowhere_else(tmp_path: Path) -> None:
    """Each field is found at the start of a line (after its newline, the first line's put
    there by read_status), never inside another line."""
    (tmp_path / "proc" / "9").mkdir(parents=True)
    (tmp_path / "proc" / "9" / "status").write_bytes(
        b"RssAnon:\t8 kB\nName:\tVmPin: 99 kB\nPPid:\t4\nXVmLck:\t5 kB\nRssShmem:\t2 kB\nVmRSS:\t10 kB\n"
    )
    assert read_status(9, str(tmp_path)) == {"RssAnon": 8 * 1024, "PPid": 4, "RssShmem": 2 * 1024,
                                              "VmRSS": 10 * 1024}  # fmt: skip
