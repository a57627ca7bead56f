"""`kvops exporter` in a child process, as a user starts it, over the stub GPU libraries: the
environment without this machine's GPU libraries, the process on a free loopback port, its page."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from collectors import amd_stub, nvml_stub
from support.exporter_harness import Samples, parse_exposition

# what would point a child process at a GPU library (or a stub's script) other than the test's
_GPU_LIBRARY_ENV = ("LD_LIBRARY_PATH", "ROCM_PATH", "ROCM_HOME", nvml_stub.CONFIG_ENV, amd_stub.CONFIG_ENV)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env() -> dict[str, str]:
    """This process's environment without any GPU library path or stub config."""
    return {k: v for k, v in os.environ.items() if k not in _GPU_LIBRARY_ENV}


def nvml_env(libdir: Path, config: Path) -> dict[str, str]:
    """clean_env() with the stub libnvidia-ml.so.1 in `libdir` answering as `config` says."""
    return dict(clean_env(), LD_LIBRARY_PATH=str(libdir), **{nvml_stub.CONFIG_ENV: str(config)})


@contextmanager
def running_exporter(env: dict[str, str], *args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`kvops exporter [args]` on a free port; yields its /metrics URL once it answers, and the
    process (its stderr piped); stopped on leaving."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kvops.cli", "exporter", "--listen", f"127.0.0.1:{port}", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.terminate()  # communicate() waits for the exit: a live one never would
                    raise AssertionError(f"exporter did not come up: {proc.communicate()[1]}") from None
                time.sleep(0.1)
        yield url, proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextmanager
def nvml_exporter(libdir: Path, config: Path, *targets: str) -> Iterator[str]:
    """running_exporter() over the stub NVML, scraping `targets`; yields its /metrics URL."""
    flags = [f for t in targets for f in ("--target", t)]
    with running_exporter(nvml_env(libdir, config), *flags) as (url, _):
        yield url


def page_text(url: str) -> str:
    return str(urllib.request.urlopen(url, timeout=10).read().decode())


def page_samples(url: str) -> Samples:
    return parse_exposition(page_text(url))
