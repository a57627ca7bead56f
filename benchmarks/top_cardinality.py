"""`kvops top` on a label explosion: its peak memory and how fast `q` quits.

The claim (issue 17): on a 13 MB page of 200k label sets, top stays under 300 MiB and quits
within 1 s of `q`. This serves that page on loopback (one wanted family, 200k label sets, as
tests/sources/test_sample_cap.py builds it), runs `kvops top URL` as its own process in a real
terminal (tmux, 120x40, a frame every 2 s), samples the process's RSS for `--seconds`, then
sends `q` and times until the process has exited.

    python benchmarks/top_cardinality.py [--series 200000] [--seconds 20]
"""

from __future__ import annotations

import argparse
import http.server
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil


def explosion(series: int) -> bytes:
    lines = ["# TYPE vllm:num_requests_running gauge"]
    lines += [
        f'vllm:num_requests_running{{model_name="org/m-{i:07d}",engine="{i % 8}"}} 1' for i in range(series)
    ]
    return ("\n".join(lines) + "\n").encode()


def serve(page: bytes) -> tuple[http.server.ThreadingHTTPServer, str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def wait_exit(proc: psutil.Process, since: float, limit: float = 30.0) -> float:
    """Seconds from `since` until the process has exited. An exited process stays a zombie
    until tmux reaps it (seen: up to ~2 s later), so a zombie counts as exited."""
    while time.monotonic() - since < limit:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.01)
    return time.monotonic() - since


def tmux(sock: str, *args: str) -> None:
    subprocess.run(["tmux", "-S", sock, *args], capture_output=True, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=200_000)
    parser.add_argument("--seconds", type=float, default=20.0, help="how long top runs before `q`")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        print("tmux is needed (apt-get install tmux)", file=sys.stderr)
        return 2
    page = explosion(args.series)
    server, url = serve(page)
    work = Path(tempfile.mkdtemp(prefix="kvops-top-card-"))
    sock, pid_file = str(work / "tmux.sock"), work / "pid"
    command = f"echo $$ > {pid_file}; exec {sys.executable} -m kvops.cli top --interval 2 {url}"
    tmux(sock, "new-session", "-d", "-x", "120", "-y", "40", command)
    try:
        deadline = time.monotonic() + 10
        while not pid_file.exists() or not pid_file.read_text().strip():
            if time.monotonic() > deadline:
                raise SystemExit("top did not start")
            time.sleep(0.05)
        proc = psutil.Process(int(pid_file.read_text()))
        peak = 0
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            peak = max(peak, proc.memory_info().rss)
            time.sleep(0.1)
        tmux(sock, "send-keys", "q")
        sent = time.monotonic()
        quit_seconds = wait_exit(proc, sent)
    finally:
        subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)
        server.shutdown()
    result = {
        "series": args.series,
        "page_bytes": len(page),
        "peak_rss_mib": round(peak / 2**20, 1),
        "quit_seconds": round(quit_seconds, 2),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"{args.series} label sets ({len(page) / 1e6:.1f} MB page): "
            f"peak RSS {result['peak_rss_mib']} MiB, quit {result['quit_seconds']} s after q"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
