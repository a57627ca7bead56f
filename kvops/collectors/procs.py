"""Which processes serve a vLLM target on this host, how much host memory they hold, which GPUs.

vLLM V1 is several processes (API server -> engine core -> GPU workers), all descendants
of the process listening on the target's port. Their host memory is summed from
/proc/PID/status: RssAnon (pageable), RssShmem (where CUDA pinned buffers and /dev/shm
land, hardware.md §4.2), VmLck, VmPin. psutil finds the listener (it maps sockets to
PIDs); the tree and the memory are read under `root` so tests can use a recorded /proc.

GPU PIDs from NVML/amdsmi are host-namespace PIDs: a kvops inside a container with its
own PID namespace will not match them (no GPU join then, never a wrong one).
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import math
import os
import re
import socket
import threading
import time
from pathlib import Path
from typing import NamedTuple

from kvops.collectors import listeners, numa
from kvops.collectors.procfs import KeptFiles, read_small
from kvops.snapshot import GpuSample, ProcessMemory
from kvops.transport.address import host_port

log = logging.getLogger(__name__)

_KB = 1024
# Status files of tracked processes kept open at most (KeptFiles): vLLM is a handful of
# processes a target; past this many (hundreds of local targets) the rest are opened per read.
STATUS_FILES_KEPT = 256
# /proc/PID/status field -> ProcessMemory attribute
_FIELDS = {"RssAnon": "rss_anon", "RssShmem": "rss_shmem", "VmLck": "locked", "VmPin": "pinned"}


# The fields read_status wants, found in the file's bytes by one search: two thirds of the time
# of decoding and splitting its ~55 lines (41 against 63 µs a process, best of 6; read every
# scrape for every process of every local target, and for every process each `ttl`). Each is
# found after its newline (read_status puts one before the first line): `^` with re.MULTILINE
# made the search try every position of the ~1.4 KB file, 6.4 against 1.6 µs (best of 5 x 2,000).
_STATUS_RE = re.compile(rb"\n(PPid|VmRSS|RssAnon|RssShmem|VmLck|VmPin):[ \t]*(\S+)")


@functools.lru_cache(maxsize=4096)  # built twice a scrape for every tracked process
def status_path(pid: int, root: str = "/") -> str:
    return os.path.join(root, "proc", str(pid), "status")


def read_status(pid: int, root: str = "/", files: KeptFiles | None = None) -> dict[str, float] | None:
    """PPid and the memory fields (bytes) of /proc/PID/status; None if the process is gone.
    Read through `files` where given (descriptors kept between scrapes), else opened here."""
    out: dict[str, float] = {}
    path = status_path(pid, root)
    try:
        data = files.read(path) if files is not None else read_small(path)
        for key, token in _STATUS_RE.findall(b"\n" + data):
            if math.isfinite(number := float(token)):  # int(PPid) follows
                out[key.decode()] = number * (_KB if key != b"PPid" else 1)
    except (OSError, ValueError):
        return None
    return out


def _all_statuses(root: str) -> dict[int, dict[str, float]]:
    statuses: dict[int, dict[str, float]] = {}
    try:
        names = os.listdir(Path(root, "proc"))
    except OSError:
        return statuses
    for name in names:
        if name.isascii() and name.isdigit():
            st = read_status(int(name), root)
            if st is not None:
                statuses[int(name)] = st
    return statuses


def tree_memory(target: str, pids: list[int], root: str = "/") -> ProcessMemory | None:
    """Memory of `pids` and all their descendants, summed; None if none of them exists."""
    statuses = _all_statuses(root)
    children: dict[int, list[int]] = {}
    for pid, st in statuses.items():
        children.setdefault(int(st.get("PPid", 0)), []).append(pid)
    seen: list[int] = []
    todo = [p for p in pids if p in statuses]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.append(pid)
        todo.extend(children.get(pid, []))
    if not seen:
        return None
    pm = ProcessMemory(target=target, pids=sorted(seen))
    for attr_key, attr in _FIELDS.items():
        values = [statuses[p][attr_key] for p in seen if attr_key in statuses[p]]
        setattr(pm, attr, float(sum(values)) if values else None)  # kernel threads have none
    return pm


def is_local_host(host: str) -> bool:
    """True for loopback, the wildcard, this host's name, or one of its interface addresses.

    Names other than localhost and this host's own are not resolved: a DNS lookup per
    scrape could hang, and a remote vLLM's processes are out of reach anyway.
    """
    host = host.strip("[]").lower()
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host == socket.gethostname().lower()  # no getfqdn(): it can block on DNS
    if ip.is_loopback or ip.is_unspecified:
        return True
    import psutil

    return any(a.address.split("%")[0] == str(ip) for addrs in psutil.net_if_addrs().values() for a in addrs)


def listening_pids(port: int) -> list[int]:
    """PIDs with a TCP socket listening on `port` (any address). Empty without permission."""
    return sorted(_listening_by_port().get(port, ()))


def target_processes(target_url: str, root: str = "/") -> ProcessMemory | None:
    """The target's process tree memory when it is served from this host, else None."""
    address = host_port(target_url)
    if address is None:
        return None
    host, port = address
    if not is_local_host(host):
        return None
    pids = listening_pids(port)
    return tree_memory(target_url, pids, root) if pids else None


def attach_gpus(pm: ProcessMemory, gpus: list[GpuSample]) -> None:
    """Fill pm.gpus with (index, uuid) of every GPU on which one of pm's processes runs, and
    the share of its host memory on NUMA nodes none of those GPUs sit on."""
    mine = set(pm.pids)
    used = [g for g in gpus if mine.intersection(g.processes)]
    pm.gpus = [(g.index, g.uuid) for g in used]
    nodes = {g.numa_node for g in used if g.numa_node is not None}
    pm.numa_remote_ratio = numa.remote_ratio(pm.numa_bytes, nodes) if used else None


def processes_for(targets: list[str], gpus: list[GpuSample], root: str = "/") -> list[ProcessMemory]:
    """ProcessMemory, GPUs attached, for each target served from this host; others left out."""
    out: list[ProcessMemory] = []
    for target in targets:
        pm = target_processes(target, root)
        if pm is not None:
            attach_gpus(pm, gpus)
            out.append(pm)
    return out


def _listening_by_port() -> dict[int, set[int]]:
    """Port -> PIDs listening on it: from the kernel's sock_diag (kvops.collectors.listeners),
    else from psutil (which reads /proc/net/tcp: ~300x the CPU on a quiet host)."""
    try:
        return listeners.listening_by_port()
    except listeners.Unavailable as exc:
        log.debug("sock_diag unavailable (%s): listening sockets from psutil", exc)
    import psutil

    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        return {}
    out: dict[int, set[int]] = {}
    for c in conns:
        if c.status == psutil.CONN_LISTEN and c.laddr and c.pid:
            out.setdefault(c.laddr.port, set()).add(c.pid)
    return out


class _Tree(NamedTuple):
    found_at: float  # time.monotonic() of the scan that found it
    pids: list[int]
    kept_for: float  # seconds until it is looked for again

    def stale(self, now: float) -> bool:
        return now - self.found_at > self.kept_for


class ProcessTracker:
    """Process-tree memory of the local targets on every scrape, cheaply.

    Finding which PIDs serve a target takes a scan of every socket and every /proc entry
    (tens of ms on a busy host, per target with processes_for()). The trees change only
    when vLLM starts or stops, so they are cached for `ttl` seconds and found for all stale
    targets in one scan; each scrape then reads only those processes' /proc/PID/status.
    A tree found unchanged is kept twice as long as before, up to `max_ttl` (the scan cost
    28 ms on an 80-process machine with 16 targets: 0.6 ms a scrape at 30 s, 2026-11-27); a
    changed one starts again at `ttl`, and one whose processes are all gone is found again at
    the next scrape.

    A scrape waits for the scan only for a target it has no tree for; a known tree gone stale
    is looked for again on a thread of its own (`background`), the scrape meanwhile reading the
    processes it knows. A scrape that waited for the scan was the exporter's slowest (13-20 ms of
    scan with 85 processes here, more on a busy host): those were the p99 of
    benchmarks/exporter_scrape.py, a scan every 30-100 s over its 300 scrapes.
    """

    def __init__(
        self, root: str = "/", ttl: float = 30.0, max_ttl: float = 300.0, background: bool = True
    ) -> None:
        self.root = root
        self.ttl = ttl
        self.max_ttl = max(ttl, max_ttl)
        self.background = background
        self._trees: dict[str, _Tree] = {}
        self._trees_lock = threading.Lock()  # the scan thread sets trees; scrapes read and drop them
        self._scan: threading.Thread | None = None
        self._local: dict[str, tuple[str, int] | None] = {}
        # numa_maps is read on a thread of its own, never on the scrape path (collectors/numa.py)
        self.numa: numa.NumaPlacement | None = None
        # the tracked processes' status files, kept open: a dead process's read fails (ESRCH)
        # instead of reading the next process given its PID, until the next scan
        self._status_files = KeptFiles(STATUS_FILES_KEPT)

    def attach_gpus(self, processes: list[ProcessMemory], gpus: list[GpuSample]) -> None:
        for pm in processes:
            attach_gpus(pm, gpus)

    def _local_target(self, target: str) -> tuple[str, int] | None:
        if target not in self._local:
            hp = host_port(target)
            self._local[target] = hp if hp is not None and is_local_host(hp[0]) else None
        return self._local[target]

    def _refresh(self, stale: list[str], now: float) -> None:
        listeners = _listening_by_port()
        statuses = _all_statuses(self.root)
        children: dict[int, list[int]] = {}
        for pid, st in statuses.items():
            children.setdefault(int(st.get("PPid", 0)), []).append(pid)
        found: dict[str, list[int]] = {}
        for target in stale:
            hp = self._local[target]
            todo = [p for p in listeners.get(hp[1], ()) if p in statuses] if hp else []
            seen: set[int] = set()
            while todo:
                pid = todo.pop()
                if pid not in seen:
                    seen.add(pid)
                    todo.extend(children.get(pid, []))
            found[target] = sorted(seen)
        with self._trees_lock:
            for target, pids in found.items():
                before = self._trees.get(target)
                kept = (  # (a tree marked for a look at once has kept_for 0: from ttl again)
                    min(max(before.kept_for, self.ttl) * 2, self.max_ttl)
                    if before is not None and before.pids == pids
                    else self.ttl
                )
                self._trees[target] = _Tree(now, pids, kept)
            # a PID whose read failed is read again only where this scan found it in a tree
            self._status_files.revive({status_path(p, self.root) for pids in found.values() for p in pids})

    def _refresh_later(self, stale: list[str], now: float) -> None:
        """The scan for trees the scrapes already know, on a thread (one at a time)."""
        if self._scan is not None and self._scan.is_alive():
            return

        def scan() -> None:
            try:
                self._refresh(stale, now)
            except Exception:  # a failed scan keeps the trees known; the next stale scrape retries
                log.debug("process scan failed", exc_info=True)

        self._scan = threading.Thread(target=scan, name="kvops-process-scan", daemon=True)
        self._scan.start()

    def collect(self, targets: list[str], gpus: list[GpuSample]) -> list[ProcessMemory]:
        now = time.monotonic()
        local = [t for t in targets if self._local_target(t) is not None]
        with self._trees_lock:
            unknown = [t for t in local if t not in self._trees]
            stale = [t for t in local if t in self._trees and self._trees[t].stale(now)]
        if unknown or (stale and not self.background):  # nothing to read without a tree: wait for it
            self._refresh(unknown + stale, now)
        elif stale:
            self._refresh_later(stale, now)
        with self._trees_lock:
            for gone in set(self._trees) - set(targets):
                del self._trees[gone]
            trees = {t: self._trees[t].pids for t in local if t in self._trees}
        out: list[ProcessMemory] = []
        if self.numa is None and local:
            self.numa = numa.NumaPlacement(self.root)
        if self.numa is not None:
            self.numa.watch(trees)
        files = self._status_files
        files.keep_only({status_path(p, self.root) for pids in trees.values() for p in pids})
        for target in local:
            pids = trees.get(target, [])
            statuses = {p: st for p in pids if (st := read_status(p, self.root, files)) is not None}
            if not statuses:
                if pids:  # the tree went away (vLLM restarted): look again next scrape
                    with self._trees_lock:
                        self._trees.pop(target, None)
                continue
            if len(statuses) < len(pids):  # one of them exited: the tree is looked for again
                with self._trees_lock:
                    tree = self._trees.get(target)
                    if tree is not None:
                        self._trees[target] = tree._replace(kept_for=0.0)
            pm = ProcessMemory(target=target, pids=sorted(statuses))
            for key, attr in _FIELDS.items():
                values = [st[key] for st in statuses.values() if key in st]
                setattr(pm, attr, float(sum(values)) if values else None)
            if self.numa is not None and self.numa.only_node is not None:  # one node: all of it there
                resident = [st["VmRSS"] for st in statuses.values() if "VmRSS" in st]
                pm.numa_bytes = {self.numa.only_node: float(sum(resident))} if resident else {}
            elif self.numa is not None:
                pm.numa_bytes = self.numa.bytes_by_node(target)
            attach_gpus(pm, gpus)
            out.append(pm)
        return out

    def close(self) -> None:
        self._status_files.close()
        if self.numa is not None:
            self.numa.close()
        if self._scan is not None:
            self._scan.join(timeout=5)
