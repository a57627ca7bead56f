"""N simulated vLLMs in their own process, for the benchmarks that scrape them.

Each target answers from a copy of its exposition re-rendered once a second, the whole body
in one write, as a vLLM's API server does from its own process. Sixteen simulators rendering
on every request in one Python process would make the targets, not the scraper being
measured, the bottleneck: their bodies would trickle out and cost the scraper wake-ups that
no real vLLM causes.
"""

from __future__ import annotations

import subprocess
import sys

TARGETS_CODE = """
import sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from kvops.sim.server import Sim
sims = [Sim(seed=i) for i in range(int(sys.argv[1]))]
bodies = [s.metrics() for s in sims]
def refresh():
    while True:
        time.sleep(1)
        for i, s in enumerate(sims):
            bodies[i] = s.metrics()
threading.Thread(target=refresh, daemon=True).start()
def handler(i):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def do_GET(self):
            b = bodies[i]
            self.send_response(200); self.send_header("Content-Length", str(len(b))); self.end_headers()
            self.wfile.write(b)
        def log_message(self, *a): pass
    return H
urls = []
for i in range(len(sims)):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler(i)); srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    urls.append(f"http://127.0.0.1:{srv.server_address[1]}")
print(" ".join(urls), flush=True)
time.sleep(3600)
"""


def start_targets(count: int) -> tuple[subprocess.Popen[str], list[str]]:
    """The targets' process (terminate it when done) and their base URLs."""
    command = [sys.executable, "-c", TARGETS_CODE, str(count)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    urls = proc.stdout.readline().split()  # type: ignore[union-attr]
    if len(urls) != count:
        proc.kill()
        raise SystemExit("the simulated targets did not start")
    return proc, urls
