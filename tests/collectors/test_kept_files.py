"""Status files read through kept descriptors: kept, bounded, and never reopened for a PID
whose process exited until the process trees are looked at again."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvops.collectors import procs
from kvops.collectors.procfs import KeptFiles
from kvops.collectors.procs import ProcessTracker, status_path


def _replace(path: Path, text: str) -> None:
    """A new file (another inode) at `path`, as a new process's /proc entry would be."""
    new = path.with_suffix(".new")
    new.write_text(text)
    os.replace(new, path)


def test_a_kept_descriptor_reads_its_own_file_until_let_go(tmp_path: Path) -> None:
    path = tmp_path / "status"
    path.write_text("first\n")
    files = KeptFiles()
    assert files.read(str(path)) == b"first\n"
    _replace(path, "second\n")
    assert files.read(str(path)) == b"first\n"  # the descriptor kept: the file it was opened on
    files.keep_only(set())
    assert files.read(str(path)) == b"second\n"
    files.close()


def test_past_the_cap_files_are_opened_for_each_read(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("a1\n")
    b.write_text("b1\n")
    files = KeptFiles(cap=1)
    files.read(str(a))
    files.read(str(b))
    _replace(a, "a2\n")
    _replace(b, "b2\n")
    assert (files.read(str(a)), files.read(str(b))) == (b"a1\n", b"b2\n")  # only a's was kept
    files.close()


def test_a_long_file_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "long"
    path.write_bytes(b"x" * 40000)
    files = KeptFiles()
    assert files.read(str(path)) == b"x" * 40000
    assert files.read(str(path)) == b"x" * 40000
    files.close()


def test_an_exited_process_is_not_read_by_its_pid_again_until_revived() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    path = status_path(child.pid)
    files = KeptFiles()
    try:
        assert b"VmRSS" in files.read(path)
    finally:
        child.kill()
        child.wait()
    with pytest.raises(ProcessLookupError):  # the kept descriptor's process is gone (ESRCH)
        files.read(path)
    with pytest.raises(ProcessLookupError, match="failed before"):  # not opened by the PID again
        files.read(path)
    files.revive({"/proc/elsewhere/status"})
    with pytest.raises(ProcessLookupError, match="failed before"):  # not named: still failed
        files.read(path)
    files.revive({path})
    with pytest.raises(FileNotFoundError):  # opened again by its path: nothing there now
        files.read(path)
    files.close()


_REAPING_SERVER = """
import socket, subprocess, sys, threading
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
threading.Thread(target=child.wait, daemon=True).start()  # reaped as soon as it exits
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
print(srv.getsockname()[1], child.pid, flush=True)
sys.stdin.read()
"""


def test_a_process_that_exits_drops_out_and_its_tree_is_looked_for_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = subprocess.Popen(
        [sys.executable, "-c", _REAPING_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    port, child = (int(x) for x in server.stdout.readline().split())
    scans: list[int] = []

    def counted_scan() -> dict[int, set[int]]:
        scans.append(1)
        return {port: {server.pid}}

    monkeypatch.setattr(procs, "_listening_by_port", counted_scan)
    tracker = ProcessTracker(ttl=30, background=False)
    target = f"http://127.0.0.1:{port}"
    try:
        (pm,) = tracker.collect([target], [])
        assert pm.pids == sorted([server.pid, child]) and len(scans) == 1
        (pm,) = tracker.collect([target], [])
        assert len(scans) == 1  # a known tree, not looked for again within ttl
        os.kill(child, 9)
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{child}"):
            assert time.monotonic() < deadline, "the child was not reaped"
            time.sleep(0.02)
        (pm,) = tracker.collect([target], [])
        assert pm.pids == [server.pid]  # its read failed: not counted, whatever has its PID now
        (pm,) = tracker.collect([target], [])
        assert len(scans) == 2  # the tree was looked for again at once, not after ttl
        assert pm.pids == [server.pid]
    finally:
        tracker.close()
        server.kill()
        server.wait(timeout=10)


def _kept_status_descriptors(pids: set[int]) -> int:
    """This process's descriptors open on the status file of one of `pids`."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        count += any(link == f"/proc/{pid}/status" for pid in pids)
    return count


def test_closing_the_runner_lets_the_status_files_go() -> None:
    from kvops.scrape.runner import ScrapeRunner
    from kvops.scrape.target import TargetScraper

    server = subprocess.Popen(
        [sys.executable, "-c", _REAPING_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    port, child = (int(x) for x in server.stdout.readline().split())
    url = f"http://127.0.0.1:{port}"
    runner = ScrapeRunner([TargetScraper(url)], [], timeout=2, process_tracker=ProcessTracker())
    try:
        snap = runner.snapshot()
        assert snap.processes and snap.processes[0].pids == sorted([server.pid, child])
        assert _kept_status_descriptors({server.pid, child}) == 2
        runner.close()
        assert _kept_status_descriptors({server.pid, child}) == 0
    finally:
        runner.close()
        server.kill()
        server.wait(timeout=10)
