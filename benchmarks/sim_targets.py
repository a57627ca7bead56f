"""N simulated vLLMs, each in a process of its own, for the benchmarks that scrape them.

Each target answers from a copy of its exposition re-rendered once a second, the whole body
in one write, as a vLLM's API server does from its own process. A `?name[]=` filter is
ignored, as every vLLM release kvops knows ignores it (docs/real-vllm.md: the instrumentator's
/metrics route answers before the Mount that would honour it); honour_filter=True answers it
with prometheus_client's restricted registry instead, what a server that honoured it would
send. Sixteen simulators in one
Python process would make the targets, not the scraper being measured, the bottleneck:
while one re-renders (~13 ms, holding that process's GIL) the other fifteen cannot answer,
and their bodies trickle out, costing the scraper wake-ups and latency no real vLLM causes.
"""

from __future__ import annotations

import subprocess
import sys

TARGETS_CODE = """
import sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from kvops.sim.server import Sim
from urllib.parse import parse_qs
sims = [Sim(seed=i, honour_name_filter=sys.argv[2] == "1") for i in range(int(sys.argv[1]))]
bodies = [{"": s.metrics()} for s in sims]  # query -> body, re-rendered each second
def refresh():
    while True:
        time.sleep(1)
        for i, s in enumerate(sims):
            bodies[i] = {q: s.metrics(parse_qs(q).get("name[]")) for q in list(bodies[i])}
threading.Thread(target=refresh, daemon=True).start()
def handler(i):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def do_GET(self):
            query = self.path.partition("?")[2]
            b = bodies[i].get(query)
            if b is None:  # a filter first asked for (vLLM's name[]): rendered now, then kept
                b = bodies[i][query] = sims[i].metrics(parse_qs(query).get("name[]"))
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


class Targets:
    def __init__(self, count: int, honour_filter: bool = False) -> None:
        command = [sys.executable, "-c", TARGETS_CODE, "1", "1" if honour_filter else "0"]
        self.procs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(count)]
        self.urls = [url for p in self.procs for url in p.stdout.readline().split()]  # type: ignore[union-attr]
        if len(self.urls) != count:
            self.stop()
            raise SystemExit("the simulated targets did not start")

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.wait(timeout=10)


def start_targets(count: int, honour_filter: bool = False) -> Targets:
    """`count` simulated vLLMs (.urls), one process each; .stop() when done. They serve whole
    pages whatever `?name[]=` asks, as real vLLM does, unless `honour_filter`."""
    return Targets(count, honour_filter)
