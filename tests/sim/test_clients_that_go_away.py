"""`kvops sim` and scrapers that give up mid-answer (their timeout): no traceback, and a run
whose stderr is a pipe nobody reads still exits on SIGTERM. socketserver printed ~1.5 KB of
traceback per reset; a sim under tests/test_readme.py (stderr a pipe read only at the end) once
did not exit within 20 s of SIGTERM in CI, which a full pipe explains."""

from __future__ import annotations

import signal
import socket
import struct
import subprocess
import sys
import time

from support.prom import free_port


def _reset_mid_answer(port: int) -> None:
    """Ask for /metrics and close at once with a reset (SO_LINGER 0), as a timed-out client does."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: sim\r\n\r\n")


def test_clients_that_go_away_leave_no_traceback_and_sigterm_still_stops_it() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kvops.cli", "sim", "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,  # and not read until the end: a full pipe must not block the sim
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "kvops sim did not listen"
                time.sleep(0.1)
        for _ in range(120):  # ~1.5 KB of traceback each before: 180 KB, over a 64 KB pipe
            _reset_mid_answer(port)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        stderr = proc.stderr.read().decode() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert "Traceback" not in stderr and "Exception occurred" not in stderr, stderr[:2000]
