"""`kvops top --replay` reads each saved page with a cap (issue 41): a file that never ends
(/dev/zero, a FIFO) is one line and exit 2, not gigabytes read."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading

from kvops.frames.replay import MAX_REPLAY_BYTES
from kvops.transport.http import DEFAULT_MAX_BODY_BYTES

from .helpers import T1, T2


def _limit_memory() -> None:
    # Without the cap the child would read until memory runs out (6.5 GB after 3 s in the
    # report): 1 GiB of address space turns that into a MemoryError on a shared machine.
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def _top(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvops.cli", "top", *argv], capture_output=True, text=True,
                          timeout=60, preexec_fn=_limit_memory)  # fmt: skip


def test_replay_of_dev_zero_stops_at_the_cap_with_one_line():
    proc = _top("--once", "--replay", "/dev/zero", "/dev/zero")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "/dev/zero: larger than 16777216 bytes (16 MiB), not read" in proc.stderr


def test_replay_from_a_fifo_that_never_ends_is_refused(tmp_path):
    fifo = tmp_path / "page.prom"
    os.mkfifo(fifo)
    stop = threading.Event()

    def feed() -> None:
        line = b"vllm:num_requests_running 1\n" * 4096
        try:
            with open(fifo, "wb") as out:
                while not stop.is_set():
                    out.write(line)
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        proc = _top("--once", "--replay", str(fifo), str(T2))
    finally:
        stop.set()
    writer.join(timeout=10)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "larger than 16777216 bytes" in proc.stderr


def test_a_page_at_the_cap_is_read_and_one_byte_more_is_not(tmp_path):
    page = T1.read_bytes()
    at_cap = tmp_path / "at-cap.prom"
    at_cap.write_bytes(page + b"#" * (MAX_REPLAY_BYTES - len(page) - 1) + b"\n")
    assert at_cap.stat().st_size == MAX_REPLAY_BYTES
    assert _top("--once", "--json", "--replay", str(at_cap), str(T2)).returncode == 0
    over = tmp_path / "over.prom"
    over.write_bytes(at_cap.read_bytes() + b"\n")
    proc = _top("--once", "--json", "--replay", str(over), str(T2))
    assert proc.returncode == 2 and "over.prom: larger than" in proc.stderr


def test_the_replay_cap_is_the_exporters_default_body_cap():
    assert MAX_REPLAY_BYTES == DEFAULT_MAX_BODY_BYTES == 16 * 1024 * 1024
