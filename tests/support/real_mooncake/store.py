"""A real Mooncake store on loopback: PyPI's ``mooncake_master`` and its Python client over TCP.

The master runs as shipped, with its HTTP metadata server built in and its metrics on a port of
its own, every port a free one picked at random on 127.0.0.1. Clients are child processes of
the wheel's venv (support/real_mooncake/client.py) that load stand-in CUDA libraries built at
run time (support/real_mooncake/cuda_standin.py: a TEST DEVICE ONLY; a user has the real ones).
Every listener of theirs is kept on loopback by a bind() shim (support/real_mooncake/loopback_bind.py).
One client per store: a second client would fetch the first one's objects over the TCP lane that
client advertises on the machine's interface address, which is not loopback.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from support.real_mooncake import cuda_standin, install, loopback_bind

CLIENT = Path(__file__).with_name("client.py")
MIB = 1024 * 1024


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def package_dir() -> Path:
    """The installed wheel's `mooncake` folder (install.py wrote it into the ready file)."""
    ready = (install.venv_dir() / install.READY).read_text()
    return Path(next(line.split("=", 1)[1] for line in ready.splitlines() if line.startswith("package=")))


@dataclass
class Plan:
    """Steps for a client, and the client's own account of them once run."""

    steps: list[dict[str, object]] = field(default_factory=list)

    def put(self, key: str, size: int) -> Plan:
        self.steps.append({"op": "put", "key": key, "size": size})
        return self

    def get(self, key: str) -> Plan:
        self.steps.append({"op": "get", "key": key})
        return self


@dataclass(frozen=True)
class Account:
    """What the client saw: per step, a put's return code or the bytes a get returned."""

    steps: list[dict[str, object]]
    results: list[int]

    def _of(self, op: str) -> list[tuple[dict[str, object], int]]:
        return [(s, r) for s, r in zip(self.steps, self.results, strict=True) if s["op"] == op]

    @property
    def puts_ok(self) -> list[dict[str, object]]:
        return [s for s, r in self._of("put") if r == 0]

    @property
    def puts_failed(self) -> int:
        return sum(1 for _, r in self._of("put") if r != 0)

    @property
    def gets(self) -> int:
        return len(self._of("get"))

    @property
    def hits(self) -> int:
        return sum(1 for _, r in self._of("get") if r > 0)

    @property
    def bytes_served(self) -> int:
        return sum(r for _, r in self._of("get"))


class Client:
    """One Mooncake client process holding a mounted segment until closed."""

    def __init__(self, store: RealMooncake, segment_bytes: int) -> None:
        self.segment_bytes = segment_bytes
        self.log = store.workdir / f"client-{len(store.clients)}.log"
        argv = [str(install.venv_python()), str(CLIENT), store.rpc_address, store.metadata_url]
        self.proc = subprocess.Popen(
            [*argv, str(segment_bytes)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log.open("wb"), text=True,
            env=store.client_env, cwd=store.workdir, start_new_session=True,
        )  # fmt: skip
        ready = self._answer()
        assert ready.get("setup") == 0, f"client setup failed: {ready}; log {self.log}"

    def _answer(self) -> dict[str, object]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, (
            f"the client exited ({self.proc.poll()}); log {self.log}:\n{self.log.read_text()[-2000:]}"
        )
        return dict(json.loads(line))

    def run(self, plan: Plan) -> Account:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(plan.steps) + "\n")
        self.proc.stdin.flush()
        results = self._answer()["results"]
        assert isinstance(results, list)
        return Account(list(plan.steps), [int(r) for r in results])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


class RealMooncake:
    """`mooncake_master` on 127.0.0.1 with random free ports; .metrics_url, .client(), .stop()."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        package = package_dir()
        libs = package.parent / "mooncake_transfer_engine.libs"
        standins, self.standin_symbols = cuda_standin.build(package, workdir / "cuda-standin-test-device")
        # Loopback only: every wildcard bind of the master and the clients lands on 127.0.0.1.
        loopback = {"LD_PRELOAD": str(loopback_bind.build(workdir / "loopback-bind-test-device"))}
        self.client_env = {**os.environ, **loopback, "LD_LIBRARY_PATH": f"{standins}:{libs}"}
        self.clients: list[Client] = []
        self.rpc_port, self.metrics_port, self.metadata_port = free_port(), free_port(), free_port()
        self.log = workdir / "master.log"
        self.proc = subprocess.Popen(
            [str(package / "mooncake_master"), "-rpc_address", "127.0.0.1", "-rpc_port", str(self.rpc_port),
             "-metrics_host", "127.0.0.1", "-metrics_port", str(self.metrics_port),
             "-enable_http_metadata_server=true", "-http_metadata_server_host", "127.0.0.1",
             "-http_metadata_server_port", str(self.metadata_port), "-logtostderr"],
            stdout=subprocess.DEVNULL, stderr=self.log.open("wb"), cwd=workdir,
            env={**os.environ, **loopback, "LD_LIBRARY_PATH": str(libs)}, start_new_session=True,
        )  # fmt: skip
        self._wait_ready()

    @property
    def rpc_address(self) -> str:
        return f"127.0.0.1:{self.rpc_port}"

    @property
    def metadata_url(self) -> str:
        return f"http://127.0.0.1:{self.metadata_port}/metadata"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def page(self) -> str:
        with urllib.request.urlopen(self.metrics_url, timeout=10) as resp:
            return str(resp.read().decode())

    def _wait_ready(self, seconds: float = 30.0) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"mooncake_master exited {self.proc.returncode}:\n{self.log.read_text()[-2000:]}"
                )
            try:
                if "master_key_count" in self.page():
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"mooncake_master did not serve /metrics in {seconds} s")

    def foreign_client_env(self, segment_bytes: int, buffer_bytes: int = 32 * MIB) -> dict[str, str]:
        """What another program's Mooncake client needs to join this store (vLLM's
        MooncakeStoreConnector): the wheel's `mooncake` package on its path (linked, not the venv's
        other packages), the stand-in CUDA libraries and the loopback shim, and a config file as
        vLLM reads it (MOONCAKE_CONFIG_PATH; VLLM_HOST_IP so it advertises loopback)."""
        path = self.workdir / "mooncake-pythonpath"
        if not path.exists():
            path.mkdir()
            package = package_dir()
            (path / "mooncake").symlink_to(package)
            (path / "mooncake_transfer_engine.libs").symlink_to(
                package.parent / "mooncake_transfer_engine.libs"
            )
        config = self.workdir / "mooncake-config.json"
        config.write_text(
            json.dumps({
                "local_hostname": "127.0.0.1", "metadata_server": self.metadata_url,
                "global_segment_size": segment_bytes, "local_buffer_size": buffer_bytes,
                "protocol": "tcp", "device_name": "", "master_server_address": self.rpc_address,
            })
        )  # fmt: skip
        return {
            "PYTHONPATH": str(path),
            "LD_LIBRARY_PATH": self.client_env["LD_LIBRARY_PATH"],
            "LD_PRELOAD": self.client_env["LD_PRELOAD"],
            "MOONCAKE_CONFIG_PATH": str(config),
            "VLLM_HOST_IP": "127.0.0.1",
        }

    def client(self, segment_bytes: int = 256 * MIB) -> Client:
        made = Client(self, segment_bytes)
        self.clients.append(made)
        return made

    def stop(self) -> None:
        for made in self.clients:
            made.close()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
