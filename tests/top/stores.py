"""Real metric stores loaded with a simulated fleet's history, for the `--prometheus` fleet view.

- VictoriaMetrics (Debian's `victoria-metrics`): the history is posted to its Prometheus
  text import API (`/api/v1/import/prometheus`, samples with timestamps).
- Prometheus (Debian's `prometheus`): the history is written as OpenMetrics and turned into
  TSDB blocks by `promtool tsdb create-blocks-from openmetrics` (Prometheus's own backfill),
  then Prometheus starts on them with nothing to scrape.
Both listen on 127.0.0.1, on a port picked free just before; nobody scrapes anything, so
whatever `kvops top --prometheus` shows comes from the stored history alone.

The fleet: engine i grows its counters by fixed amounts per scrape (FleetEngine), so the
truth of any window is known: hit rates are hits/queries per step, bytes are per step ×
the steps the window spans.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from support.prom import free_port

MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-32B", "mistralai/Mistral-7B-Instruct-v0.3")


@dataclass(frozen=True)
class FleetEngine:
    instance: str
    model: str
    queries: int  # prefix-cache tokens looked up per scrape
    hits: int
    ext_queries: int
    ext_hits: int
    store_bytes: int
    store_seconds: float
    load_bytes: int
    load_seconds: float
    preemptions: int
    running: int
    waiting: int

    def counters(self, k: int) -> dict[str, float]:
        """Cumulative counters after k scrapes."""
        return {
            "vllm:prefix_cache_queries_total": k * self.queries,
            "vllm:prefix_cache_hits_total": k * self.hits,
            "vllm:external_prefix_cache_queries_total": k * self.ext_queries,
            "vllm:external_prefix_cache_hits_total": k * self.ext_hits,
            "vllm:kv_offload_store_bytes_total": k * self.store_bytes,
            "vllm:kv_offload_store_time_total": k * self.store_seconds,
            "vllm:kv_offload_load_bytes_total": k * self.load_bytes,
            "vllm:kv_offload_load_time_total": k * self.load_seconds,
            "vllm:num_preemptions_total": k * self.preemptions,
        }

    def gauges(self) -> dict[str, float]:
        return {
            "vllm:num_requests_running": self.running,
            "vllm:num_requests_waiting": self.waiting,
            "vllm:kv_cache_usage_perc": 0.5,
        }


def fleet(n: int) -> list[FleetEngine]:
    engines = []
    for i in range(n):
        queries = 1000 + 37 * (i % 50)
        ext = 400 + 11 * (i % 30)
        engines.append(FleetEngine(
            instance=f"node-{i // 8:04d}:{8000 + i % 8}", model=MODELS[i % len(MODELS)],
            queries=queries, hits=(queries * (i % 97)) // 100, ext_queries=ext,
            ext_hits=(ext * ((i * 7) % 89)) // 100, store_bytes=(i % 13 + 1) * 2**26,
            store_seconds=0.01 * (i % 5 + 1), load_bytes=(i % 7) * 2**25, load_seconds=0.005 * (i % 7 + 1),
            preemptions=i % 3, running=i % 17, waiting=i % 5,
        ))  # fmt: skip
    return engines


def _labels(e: FleetEngine) -> str:
    return f'instance="{e.instance}",job="vllm",model_name="{e.model}",engine="0"'


def history_lines(engines: list[FleetEngine], samples: int, step: float, end: float) -> dict[str, list[str]]:
    """Per series name, its exposition lines `name{labels} value ts_seconds`, oldest first.
    The last sample is at `end`."""
    out: dict[str, list[str]] = {}
    for k in range(samples):
        ts = end - (samples - 1 - k) * step
        for e in engines:
            labels = _labels(e)
            for name, value in (*e.counters(k).items(), *e.gauges().items()):
                out.setdefault(name, []).append(f"{name}{{{labels}}} {value:.6f} {ts:.3f}")
    return out


def _wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer in {timeout:g} s")


class Store:
    name = "store"
    url = ""
    proc: subprocess.Popen[bytes] | None = None
    dir: Path

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


class VictoriaMetrics(Store):
    name = "victoria-metrics"

    def __init__(self) -> None:
        binary = shutil.which("victoria-metrics")
        if binary is None:
            raise RuntimeError("victoria-metrics not installed: apt-get install victoria-metrics")
        self.dir = Path(tempfile.mkdtemp(prefix="kvops-vm-"))
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        log = self.dir / "vm.log"
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [binary, f"-httpListenAddr=127.0.0.1:{port}", f"-storageDataPath={self.dir / 'data'}",
                 "-retentionPeriod=100y", "-search.latencyOffset=0s"],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        _wait_http(f"{self.url}/health", self.proc, log)

    def load(self, lines: dict[str, list[str]]) -> None:
        # The import API takes Prometheus text with timestamps in milliseconds.
        body = "\n".join(
            f"{line.rsplit(' ', 1)[0]} {round(float(line.rsplit(' ', 1)[1]) * 1000)}"
            for series in lines.values() for line in series
        ).encode()  # fmt: skip
        req = urllib.request.Request(f"{self.url}/api/v1/import/prometheus", data=body, method="POST")
        with urllib.request.urlopen(req, timeout=120) as resp:
            assert resp.status in (200, 204), resp.status
        with urllib.request.urlopen(f"{self.url}/internal/force_flush", timeout=60):
            pass


class BackfilledPrometheus(Store):
    name = "prometheus"

    def __init__(self, lines: dict[str, list[str]]) -> None:
        binary, promtool = shutil.which("prometheus"), shutil.which("promtool")
        if binary is None or promtool is None:
            raise RuntimeError("prometheus not installed: apt-get install prometheus")
        self.dir = Path(tempfile.mkdtemp(prefix="kvops-prom-"))
        source = self.dir / "history.om"
        with open(source, "w") as out:  # OpenMetrics: each family's samples together, then EOF
            for series in lines.values():
                out.write("\n".join(series) + "\n")
            out.write("# EOF\n")
        backfill = [
            promtool,
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            str(source),
            str(self.dir / "data"),
        ]
        subprocess.run(backfill, check=True, capture_output=True, timeout=600)
        source.unlink()
        (self.dir / "prometheus.yml").write_text("global:\n  scrape_interval: 15s\n")
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        log = self.dir / "prometheus.log"
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [binary, f"--config.file={self.dir / 'prometheus.yml'}",
                 f"--storage.tsdb.path={self.dir / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                 "--storage.tsdb.retention.time=100y"],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        _wait_http(f"{self.url}/-/ready", self.proc, log)


@contextlib.contextmanager
def loaded_stores(lines: dict[str, list[str]]) -> Iterator[list[Store]]:
    """A VictoriaMetrics and a backfilled Prometheus, both holding `lines`; stopped on exit,
    also when the second fails to start."""
    started: list[Store] = []
    try:
        vm = VictoriaMetrics()
        started.append(vm)
        vm.load(lines)
        started.append(BackfilledPrometheus(lines))
        yield started
    finally:
        for store in started:
            store.stop()
