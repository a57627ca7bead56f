"""Start a real Prometheus server (Debian's package) on loopback for a test, and query it."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import requests


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Prometheus:
    def __init__(self, scrape_targets: list[str], rule_files: list[Path] | None = None,
                 interval: str = "1s") -> None:  # fmt: skip
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError("prometheus not installed: apt-get install prometheus (.ci/run does)")
        self.dir = Path(tempfile.mkdtemp(prefix="kvops-prom-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        rules = "".join(f"  - {p}\n" for p in (rule_files or []))
        targets = ", ".join(f"'{t}'" for t in scrape_targets)
        config = (
            f"global:\n  scrape_interval: {interval}\n  evaluation_interval: {interval}\n"
            + (f"rule_files:\n{rules}" if rules else "")
            + f"scrape_configs:\n  - job_name: kvops\n    static_configs:\n      - targets: [{targets}]\n"
        )
        (self.dir / "prometheus.yml").write_text(config)
        self.log = open(self.dir / "prometheus.log", "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [binary, f"--config.file={self.dir / 'prometheus.yml'}",
             f"--storage.tsdb.path={self.dir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.logs()[-2000:]}")
            try:
                if requests.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise RuntimeError("prometheus did not become ready in time")

    def logs(self) -> str:
        return (self.dir / "prometheus.log").read_text(errors="replace")

    def query(self, expr: str) -> list[dict[str, Any]]:
        resp = requests.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10)
        doc = resp.json()
        if doc.get("status") != "success":
            raise AssertionError(f"query {expr!r} failed: {doc.get('error')}")
        return doc["data"]["result"]

    def wait_for(self, expr: str, timeout: float = 30.0, min_series: int = 1) -> list[dict[str, Any]]:
        end = time.monotonic() + timeout
        result: list[dict[str, Any]] = []
        while time.monotonic() < end:
            result = self.query(expr)
            if len(result) >= min_series:
                return result
            time.sleep(0.5)
        raise AssertionError(f"{expr!r} returned {len(result)} series after {timeout:g} s")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
