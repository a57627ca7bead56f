"""A venv of its own for a real engine's wheels, cached outside the repository and keyed by version.

Shared by support/real_vllm/install.py and support/real_mooncake/install.py: the cache layout
(``~/.cache/kvops/<name>/<version>/venv``, or ``$<cache_env>/<version>/venv``), the marker that says an
install finished, clearing a partial install, and the ``install``/``where`` command line. What each
installer fetches and checks stays in its own script. Stdlib only: the installers run before
anything else is installed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

READY = "kvops-ready"  # written last: a venv without it is a partial install and is rebuilt


@dataclass(frozen=True)
class CachedVenv:
    name: str  # the cache folder under ~/.cache/kvops and the prefix of every message
    cache_env: str  # an environment variable that moves the cache root elsewhere
    distribution: str  # the PyPI distribution the venv is for, as the messages name it
    default_version: str

    def cache_root(self) -> Path:
        env = os.environ.get(self.cache_env)  # read per call: tests and CI may set it late
        return Path(env) if env else Path.home() / ".cache" / "kvops" / self.name

    def venv_dir(self, version: str | None = None) -> Path:
        return self.cache_root() / (version or self.default_version) / "venv"

    def venv_python(self, version: str | None = None) -> Path:
        return self.venv_dir(version) / "bin" / "python"

    def is_ready(self, version: str | None = None) -> bool:
        return (self.venv_dir(version) / READY).is_file()

    def say(self, msg: str) -> None:
        print(f"[{self.name}] {msg}", flush=True)

    def run(self, cmd: list[str]) -> None:
        self.say("$ " + " ".join(cmd))
        subprocess.run(cmd, check=True)

    def reuse(self, version: str) -> Path | None:
        """The cached venv's python if a complete one is there; else None, a partial one removed."""
        venv = self.venv_dir(version)
        if self.is_ready(version):
            self.say(f"{self.distribution} {version} already installed in {venv}")
            return self.venv_python(version)
        if venv.exists():
            self.say(f"removing a partial install in {venv}")
            shutil.rmtree(venv)
        venv.parent.mkdir(parents=True, exist_ok=True)
        return None

    def create(self, version: str) -> str:
        """Make the empty venv with this interpreter; return its python."""
        venv = self.venv_dir(version)
        self.run([sys.executable, "-m", "venv", str(venv)])
        return str(venv / "bin" / "python")

    def mark_ready(self, version: str, record: str) -> None:
        """Written last, so only a finished install is ever reused; the record says what it took."""
        (self.venv_dir(version) / READY).write_text(record)

    def main(self, argv: list[str] | None, description: str, install: Callable[[str], Path]) -> int:
        """``install`` (the default) builds or reuses; ``where`` prints the python or exits 1."""
        parser = argparse.ArgumentParser(description=description)
        parser.add_argument("command", choices=["install", "where"], nargs="?", default="install")
        parser.add_argument("--version", default=self.default_version)
        args = parser.parse_args(argv)
        if args.command == "where":
            print(self.venv_python(args.version) if self.is_ready(args.version) else "not installed")
            return 0 if self.is_ready(args.version) else 1
        install(args.version)
        return 0


def pip(python: str) -> list[str]:
    """pip inside the venv, without the version nag."""
    return [python, "-m", "pip", "--disable-pip-version-check"]
