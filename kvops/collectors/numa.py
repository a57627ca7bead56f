"""Which NUMA node a GPU sits on, and on which nodes a vLLM's host memory lives (issue 45).

An offload pool pinned on the far socket of a two-socket host costs host<->GPU bandwidth: every
copy crosses the socket link. The GPU's node is its PCI device's `numa_node` in sysfs (-1, no
proximity information, is unknown); where sysfs has no entry NVML's `nvmlDeviceGetNumaNodeId`
answers on Grace, where the GPU memory is itself a node.

The process side is /proc/PID/numa_maps: per mapping, pages per node (`N0=...`) and the page
size. The kernel walks the page tables to write it, so a process holding 100 GB costs real time
(docs/collectors.md has the measurement): it is read on a thread of its own, at most once a
minute, and each pass stops at a time cap, keeping what it read (a partial pass is said in the
log and its figures are not used). On a host with one node nothing can sit on another, so no
page is walked there: a target's memory is its processes' resident set, all on that node.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Mapping

log = logging.getLogger(__name__)

# N<node>=<pages>, and the mapping's page size that ends each numa_maps line
_TOKEN_RE = re.compile(rb"\bN(\d+)=(\d+)|\bkernelpagesize_kB=(\d+)")

# Reading a 6 GiB python process's numa_maps took 107 ms (best of 5; median 114 ms, 76 ms of it
# CPU, on a shared 2-core machine, 2026-11-28): mostly the kernel's page walk inside os.read (the
# GIL is released there), about 18 ms a GiB, so some 2 s for 100 GiB.
# Passes start at most once a minute, and never sooner than 30 times the last pass took
# (a 4 s pass runs every 2 minutes: 3 % of a core); a pass stops at the cap.
READ_EVERY_SECONDS = 60.0
IDLE_FACTOR = 30.0
PASS_CAP_SECONDS = 10.0


_NODE_DIR_RE = re.compile(r"node(\d+)\Z")


def host_nodes(root: str = "/") -> list[str]:
    """The host's NUMA nodes ("0", "1", ...) from sysfs; empty where sysfs does not say
    (a container may hide it), which is not the same as one node."""
    try:
        entries = os.listdir(os.path.join(root, "sys", "devices", "system", "node"))
    except OSError:
        return []
    return sorted((m.group(1) for e in entries if (m := _NODE_DIR_RE.match(e))), key=int)


def gpu_numa_node(bus_id: str | None, root: str = "/") -> int | None:
    """The NUMA node of the PCI device `bus_id` (NVML's "00000000:18:00.0" or sysfs's
    "0000:18:00.0"), or None where sysfs does not say (no entry, or -1)."""
    if not bus_id or bus_id.count(":") != 2:
        return None
    domain, rest = bus_id.split(":", 1)
    name = f"{domain[-4:]}:{rest}".lower()
    try:
        with open(os.path.join(root, "sys", "bus", "pci", "devices", name, "numa_node"), "rb") as f:
            node = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def read_numa_maps(pid: int, root: str = "/", deadline: float | None = None) -> dict[str, float] | None:
    """Bytes of `pid`'s memory per node ("0", "1", ...); None if the process is gone, unreadable,
    or `deadline` (time.monotonic()) passed before the file was read whole."""
    chunks: list[bytes] = []
    try:
        fd = os.open(os.path.join(root, "proc", str(pid), "numa_maps"), os.O_RDONLY | os.O_CLOEXEC)
        try:  # the kernel writes it a page-table walk at a time: check the clock between reads
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
                if deadline is not None and time.monotonic() > deadline:
                    return None
        finally:
            os.close(fd)
    except OSError:
        return None
    # One search over the whole file (in C): a line's N<node>=<pages> come before its page size.
    out: dict[str, float] = {}
    pending: list[tuple[bytes, bytes]] = []
    for node, pages, page_kb in _TOKEN_RE.findall(b"".join(chunks)):
        if node:
            pending.append((node, pages))
            continue
        size = int(page_kb) * 1024
        for n, count in pending:
            key = n.decode()
            out[key] = out.get(key, 0.0) + int(count) * size
        pending.clear()
    for n, count in pending:  # a line without a page size: 4 KiB pages
        out[n.decode()] = out.get(n.decode(), 0.0) + int(count) * 4096
    return out


def remote_ratio(numa_bytes: Mapping[str, float], gpu_nodes: set[int]) -> float | None:
    """Share of the bytes on nodes none of the GPUs sit on; None where either side is unknown."""
    total = sum(numa_bytes.values())
    if not gpu_nodes or total <= 0:
        return None
    far = sum(v for node, v in numa_bytes.items() if node.isdigit() and int(node) not in gpu_nodes)
    return far / total


class NumaPlacement:
    """Reads the watched targets' numa_maps on a daemon thread, at most every `every` seconds,
    each pass capped at `cap` seconds. `watch()` and `bytes_by_node()` never wait for a read.

    `only_node` is the host's one node where sysfs lists exactly one: nothing is read then (no
    thread), and the caller puts a target's resident memory on that node. The page walk would
    say the same for its cost: 16 simulated vLLMs' numa_maps took 33 ms a pass, a 100 GiB
    process's about 2 s."""

    def __init__(
        self, root: str = "/", every: float = READ_EVERY_SECONDS, cap: float = PASS_CAP_SECONDS
    ) -> None:
        self.root = root
        self.every = every
        self.cap = cap
        self._lock = threading.Lock()
        self._pids: dict[str, list[int]] = {}
        self._bytes: dict[str, dict[str, float]] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_pass_seconds: float | None = None  # how long the last pass took (for tests)
        nodes = host_nodes(root)
        self.only_node: str | None = nodes[0] if len(nodes) == 1 else None

    def watch(self, pids_by_target: Mapping[str, list[int]]) -> None:
        if self.only_node is not None:
            return
        with self._lock:
            first = not self._pids and bool(pids_by_target)
            self._pids = {t: list(p) for t, p in pids_by_target.items()}
            for gone in set(self._bytes) - set(self._pids):
                del self._bytes[gone]
            if self._thread is None and pids_by_target:
                self._thread = threading.Thread(target=self._run, name="kvops-numa-maps", daemon=True)
                self._thread.start()
        if first:
            self._wake.set()

    def bytes_by_node(self, target: str) -> dict[str, float]:
        with self._lock:
            return dict(self._bytes.get(target, {}))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._pass()
            self._wake.wait(max(self.every, IDLE_FACTOR * (self.last_pass_seconds or 0.0)))
            self._wake.clear()

    def _pass(self) -> None:
        with self._lock:
            watched = dict(self._pids)
        started = time.monotonic()
        deadline = started + self.cap
        for target, pids in watched.items():
            summed: dict[str, float] = {}
            complete = True
            for pid in pids:
                got = read_numa_maps(pid, self.root, deadline)
                if got is None:
                    complete = time.monotonic() <= deadline  # gone is fine; cut short is not
                    if not complete:
                        break
                    continue
                for node, value in got.items():
                    summed[node] = summed.get(node, 0.0) + value
            if not complete:
                log.warning(
                    "NUMA placement: reading /proc/PID/numa_maps took over %.1f s; %s left unknown",
                    self.cap,
                    target,
                )
                break
            with self._lock:
                if target in self._pids:
                    self._bytes[target] = summed
        self.last_pass_seconds = time.monotonic() - started

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
