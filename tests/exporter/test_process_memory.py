"""A target served from this host gets its process tree's memory, read from /proc each scrape."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time

import psutil
import requests

from kvops.collectors.procs import ProcessTracker
from kvops.scrape.runner import ScrapeRunner
from kvops.scrape.target import TargetScraper
from support.paths import VLLM_FIXTURES
from support.prom import free_port


def _status_kb(pid: int, field: str) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return float(line.split()[1]) * 1024
    raise AssertionError(field)


def test_local_target_process_tree_memory(tmp_path):
    (tmp_path / "metrics").write_bytes((VLLM_FIXTURES / "0.33.0" / "offload-t2.prom").read_bytes())
    port = free_port()
    # a parent that serves /metrics and a child holding 64 MiB: the tree is summed
    # The child says when its buffer is written (bytearray() zero-fills it: resident) and only
    # then does the parent listen, so the tree's memory no longer grows once /metrics answers.
    # (A 0.5 s sleep for it was too short under load: the child had not begun its allocation.)
    hold = "b = bytearray(64 << 20); print('ready', flush=True); import time; time.sleep(120)"
    code = (
        "import subprocess, sys, http.server, functools\n"
        f"child = subprocess.Popen([sys.executable, '-c', {hold!r}], stdout=subprocess.PIPE, text=True)\n"
        "assert child.stdout.readline() == 'ready\\n'\n"
        f"h = functools.partial(http.server.SimpleHTTPRequestHandler, directory={str(tmp_path)!r})\n"
        f"http.server.ThreadingHTTPServer(('127.0.0.1', {port}), h).serve_forever()\n"
    )
    server = subprocess.Popen([sys.executable, "-c", code])
    children: list[psutil.Process] = []
    url = f"http://127.0.0.1:{port}"
    runner = ScrapeRunner([TargetScraper(url)], [], timeout=3, process_tracker=ProcessTracker(ttl=0.5))
    try:
        end = time.monotonic() + 20
        while time.monotonic() < end:
            try:
                if requests.get(url + "/metrics", timeout=1).ok:
                    break
            except requests.RequestException:
                time.sleep(0.1)
        children = psutil.Process(server.pid).children()
        snap = runner.snapshot()
        (pm,) = snap.processes
        assert pm.target == url
        assert server.pid in pm.pids and len(pm.pids) == 2
        child = next(p for p in pm.pids if p != server.pid)
        expected = _status_kb(server.pid, "RssAnon") + _status_kb(child, "RssAnon")
        assert abs(pm.rss_anon - expected) / expected < 0.2
        assert pm.rss_anon > 64 << 20
        server.terminate()
        server.wait(timeout=10)
        time.sleep(0.6)
        # Gone with the process: the stale tree is looked for again off the scrape (the child,
        # orphaned, may be read once more meanwhile), then the target has no processes.
        end = time.monotonic() + 10
        while runner.snapshot().processes != []:
            assert time.monotonic() < end, "the dead server's tree was never dropped"
            time.sleep(0.2)
    finally:
        if server.poll() is None:
            server.kill()
        # By pid: a pkill -f by command line also killed the child of the same test running
        # in another checkout on this machine.
        for c in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                c.kill()
        runner.close()
