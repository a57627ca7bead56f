"""Record a real vLLM 0.32.0's pages and logs into tests/fixtures/vllm-real/0.32.0 (README there).

    PYTHONPATH=tests python -m support.real_vllm.capture tests/fixtures/vllm-real/0.32.0

Per mode (plain, offload, small-tier): the page when ready (idle), one taken while traffic runs
(mid), and one after the traffic, the server idle (after); plus the server's log. And the log of
vLLM's own native offloading refused on the CPU platform (native-refused.log).
"""

from __future__ import annotations

import re
import sys
import threading
import time
import urllib.request
from pathlib import Path

from support.real_vllm import traffic
from support.real_vllm.server import MODEL_NAME, RealVllm

HOME = str(Path.home())
RUNNING = re.compile(r"^vllm:num_requests_running\{[^}]*\} [1-9]", re.M)


def page(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return resp.read()


def scrub(text: str) -> str:
    """The recording machine's home directory, which says nothing about vLLM."""
    return text.replace(HOME, "~")


def capture_mode(mode: str, out: Path, work: Path) -> None:
    with RealVllm(mode, work) as server:
        server.wait_ready()
        time.sleep(2)
        (out / f"{mode}-idle.prom").write_bytes(page(server.metrics_url))
        done = threading.Event()
        result: list[traffic.TrafficResult] = []

        def run() -> None:
            result.append(traffic.drive(server.url, MODEL_NAME, rounds=3))
            done.set()

        thread = threading.Thread(target=run)
        thread.start()
        mid = b""
        while not done.is_set():  # the first page showing requests in flight
            text = page(server.metrics_url)
            if RUNNING.search(text.decode()):
                mid = text
                break
            time.sleep(0.05)
        thread.join()
        assert mid, "no page showed a request in flight"
        assert not result[0].failed, result[0].errors
        (out / f"{mode}-mid.prom").write_bytes(mid)
        time.sleep(3)  # idle: the engine's last stats reach the API server's registry
        (out / f"{mode}-after.prom").write_bytes(page(server.metrics_url))
        filtered = page(
            server.metrics_url + "?name[]=vllm:num_requests_running&name[]=vllm:prefix_cache_hits_total"
        )
        (out / f"{mode}-after-filtered.prom").write_bytes(filtered)
        print(f"{mode}: {result[0]}", flush=True)
    (out / f"{mode}.log").write_text(scrub(server.log_text()))


def capture_refused(out: Path, work: Path) -> None:
    server = RealVllm("plain", work, ["--kv-offloading-backend", "native", "--kv-offloading-size", "1"])
    code = server.wait_exit()
    print(f"native offloading: exit {code}", flush=True)
    (out / "native-refused.log").write_text(scrub(server.log_text()))


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    work = out / ".work"
    work.mkdir(exist_ok=True)
    modes = argv[1:] or ["plain", "offload", "small-tier", "native-refused"]
    for mode in modes:
        if mode == "native-refused":
            capture_refused(out, work)
        else:
            capture_mode(mode, out, work)
    for leftover in work.iterdir():
        leftover.unlink()
    work.rmdir()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
