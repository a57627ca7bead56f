"""A real stack on loopback: `kvops sim` -> `kvops exporter` (over the NVML and AMD SMI stubs)
-> Prometheus
with the kvops recording and alert rules. Each is a child process on a free port, stopped by
its own pid; Prometheus gets a temporary TSDB and a generated config.

    with PrometheusStack(tmp_dir) as stack:
        stack.query('kvops_target_up')
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import requests

from support.prom import free_port

ROOT = Path(__file__).resolve().parents[2]
SCRAPE_INTERVAL_S = 1
# Grafana's $__rate_interval is at least four scrape intervals; a little more keeps every
# rate() window holding two samples even when a scrape lands late on a busy CI machine.
RATE_INTERVAL = "10s"
VARIABLE_VALUES = {"$job": ".*", "$instance": ".*", "$model": ".*", "$gpu": ".*", "$store": ".*"}
# A KV store's page: what the real Mooncake master wrote after a full store's traffic
# (tests/fixtures/mooncake-master/README.md), served as it is, so the store dashboard's queries
# meet the series the exporter makes of a real master's page. Its counters stand still (rates 0):
# the figures themselves are tests/real_mooncake's.
MASTER_PAGE = ROOT / "tests" / "fixtures" / "mooncake-master" / "full-t2.prom"


def substitute(expr: str) -> str:
    """A panel query as Grafana sends it with every variable on "All"."""
    expr = expr.replace("$__rate_interval", RATE_INTERVAL)
    for var, value in VARIABLE_VALUES.items():
        expr = expr.replace(var, value)
    assert "$" not in expr, f"unsubstituted variable in {expr}"
    return expr


def load_nvml_stub() -> ModuleType:
    """tests/collectors/nvml_stub.py: builds and scripts a stub libnvidia-ml.so.1."""
    name = "kvops_nvml_stub_for_dashboards"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "collectors" / "nvml_stub.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def wait_http(url: str, deadline_s: float, proc: subprocess.Popen[bytes], log: Path) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
        try:
            if requests.get(url, timeout=1).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} not ready after {deadline_s}s:\n{log.read_text()[-2000:]}")


# The simulated tier is far larger than any CI machine's RAM and /dev/shm (10 % of it is
# 6.4 TiB), so the host-memory alerts go pending on real exporter output.
SIM_OFFLOAD_GIB = 65536
SIM_ENGINES = 2
# Two more simulated vLLMs, one engine each, on vLLM's other offload connectors
# (kvops/sim/offload_paths.py): the multi-tier and SimpleCPUOffload panels get data. The rag
# workload on a small GPU cache reuses prefixes the CPU primary lost, so the file-system tier
# sees lookups, promotions and (the simulator's injected) failures within seconds.
CONNECTOR_SIMS = ("tiering", "simple")
CONNECTOR_SIM_OFFLOAD_GIB = 4
CONNECTOR_SIM_ARGS = ("--workload", "rag", "--gpu-blocks", "2048")


class PrometheusStack:
    """sim + exporter + Prometheus. The exporter also scrapes `dead_url`, a closed port, so
    KvopsTargetDown has a real target to go pending on."""

    def __init__(self, work: Path, rule_files: list[Path]) -> None:
        self.work = work
        self.rule_files = rule_files
        self.procs: list[subprocess.Popen[bytes]] = []
        self.dead_url = ""
        self.sim_url = ""
        self.connector_sim_urls: dict[str, str] = {}  # offload path -> URL
        self.store_url = ""  # the captured Mooncake master page
        self.exporter_url = ""
        self.prometheus_url = ""

    def _spawn(
        self, name: str, argv: list[str], env: dict[str, str] | None = None
    ) -> tuple[subprocess.Popen, Path]:
        log = self.work / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=self.work)
        self.procs.append(proc)
        return proc, log

    def _stub_gpus(self, sim_pid: int) -> dict[str, str]:
        """Environment that makes the exporter's NVML collector see two scripted H100s."""
        stub = load_nvml_stub()
        libdir = stub.build(self.work / "nvml")
        devices = stub.gpus(2)
        for i, gpu in enumerate(devices):
            gpu.nvlink_kib = {0: (1000 * (i + 1), 2000 * (i + 1)), 1: (3000, 4000)}
            gpu.replay = 3 * i
            gpu.procs = {sim_pid: 20_000_000_000}  # the sim plays the vLLM worker on both GPUs
        config = stub.write_config(self.work / "nvml.conf", devices)
        return {"LD_LIBRARY_PATH": str(libdir), stub.CONFIG_ENV: str(config)}

    def _stub_amd_gpus(self, sim_pid: int) -> dict[str, str]:
        """Environment that makes the exporter's AMD collector see two scripted MI300Xs.

        The stub's config is written from a child process: it needs `amdsmi` imported against
        the stub, and that import must not stay behind in the test process (the collector
        tests import amdsmi against their own stub build)."""
        rocm = self.work / "rocm"
        config = self.work / "amdsmi.conf"
        script = (
            "import sys; sys.path.insert(0, sys.argv[1]); import amd_stub\n"
            "from pathlib import Path\n"
            "rocm = amd_stub.build(Path(sys.argv[2]))\n"
            "amdsmi = amd_stub.import_amdsmi(rocm)\n"
            "links = [None] * 6\n"
            "gpus = [amd_stub.StubAmdGpu(uuid=f'amd-{i}', bdf=f'0000:c{i + 1}:00.0',\n"
            "        procs={int(sys.argv[4]): 10**10},\n"
            "        xgmi_read_kb=[1000 * (i + 1), 2000, *links], xgmi_write_kb=[3000, 4000, *links])\n"
            "        for i in range(2)]\n"
            "amd_stub.write_config(sys.argv[3], amdsmi, gpus, pci_sleep_ms=10)\n"
        )
        subprocess.run(
            [
                sys.executable,
                "-c",
                script,
                str(ROOT / "tests" / "collectors"),
                str(rocm),
                str(config),
                str(sim_pid),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        return {"ROCM_PATH": str(rocm), "KVOPS_AMDSMI_STUB_CONFIG": str(config)}

    def start(self) -> PrometheusStack:
        kvops = [sys.executable, "-m", "kvops.cli"]
        sim_port, exporter_port, prom_port = free_port(), free_port(), free_port()
        self.dead_url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
        sim, sim_log = self._spawn(
            "sim",
            [
                *kvops,
                "sim",
                "--listen",
                f"127.0.0.1:{sim_port}",
                *("--kv-offloading-size", str(SIM_OFFLOAD_GIB)),
                # Two engines: every per-engine join in the rules meets more than one series.
                *("--data-parallel-size", str(SIM_ENGINES)),
            ],
        )
        self.sim_url = f"http://127.0.0.1:{sim_port}"
        wait_http(self.sim_url + "/metrics", 30, sim, sim_log)
        for path in CONNECTOR_SIMS:
            port = free_port()
            proc, log = self._spawn(
                f"sim-{path}",
                [*kvops, "sim", "--listen", f"127.0.0.1:{port}", "--offload-path", path,
                 "--kv-offloading-size", str(CONNECTOR_SIM_OFFLOAD_GIB), *CONNECTOR_SIM_ARGS],
            )  # fmt: skip
            self.connector_sim_urls[path] = f"http://127.0.0.1:{port}"
            wait_http(self.connector_sim_urls[path] + "/metrics", 30, proc, log)

        pages = self.work / "mooncake-master"
        pages.mkdir()
        shutil.copy(MASTER_PAGE, pages / "metrics")
        store_port = free_port()
        proc, log = self._spawn(
            "mooncake-master-page",
            [
                sys.executable,
                "-m",
                "http.server",
                str(store_port),
                "--bind",
                "127.0.0.1",
                "--directory",
                str(pages),
            ],
        )
        self.store_url = f"http://127.0.0.1:{store_port}/metrics"
        wait_http(self.store_url, 30, proc, log)

        env = {**os.environ, **self._stub_gpus(sim.pid), **self._stub_amd_gpus(sim.pid)}
        exporter, exporter_log = self._spawn(
            "exporter",
            [
                *kvops,
                "exporter",
                *("--target", self.sim_url, "--target", self.dead_url),
                *(arg for url in self.connector_sim_urls.values() for arg in ("--target", url)),
                *("--target", self.store_url),
                *("--listen", f"127.0.0.1:{exporter_port}"),
            ],
            env,
        )
        self.exporter_url = f"http://127.0.0.1:{exporter_port}"
        wait_http(self.exporter_url + "/metrics", 30, exporter, exporter_log)

        config = self.work / "prometheus.yml"
        config.write_text(
            "global:\n"
            f"  scrape_interval: {SCRAPE_INTERVAL_S}s\n"
            f"  evaluation_interval: {SCRAPE_INTERVAL_S}s\n"
            "rule_files:\n" + "".join(f"  - {p}\n" for p in self.rule_files) + "scrape_configs:\n"
            "  - job_name: kvops\n"
            "    static_configs:\n"
            f"      - targets: ['127.0.0.1:{exporter_port}']\n"
        )
        prometheus = shutil.which("prometheus")
        if prometheus is None:
            raise RuntimeError("prometheus not found: apt-get install -y prometheus")
        prom, prom_log = self._spawn(
            "prometheus",
            [
                prometheus,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.work / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
                "--log.level=warn",
            ],
        )
        self.prometheus_url = f"http://127.0.0.1:{prom_port}"
        wait_http(self.prometheus_url + "/-/ready", 60, prom, prom_log)
        return self

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        self.procs.clear()

    def __enter__(self) -> PrometheusStack:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def api(self, path: str, **params: Any) -> Any:
        resp = requests.get(f"{self.prometheus_url}/api/v1/{path}", params=params, timeout=10)
        body = resp.json()
        if body.get("status") != "success":
            raise AssertionError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query; raises with Prometheus's message if it does not parse or evaluate."""
        return self.api("query", query=expr)["result"]

    def alerts(self) -> list[dict[str, Any]]:
        """Alerts pending or firing now."""
        return self.api("alerts")["alerts"]

    def wait_for(self, expr: str, deadline_s: float) -> list[dict[str, Any]]:
        end = time.monotonic() + deadline_s
        while True:
            result = self.query(expr)
            if result or time.monotonic() > end:
                return result
            time.sleep(0.5)
