"""Install PyPI's ``mooncake-transfer-engine`` into its own venv, cached outside the repository.

Run as a CI step with its own time limit (pytest's 300 s per-test timeout would cut a first install
off):  ``python tests/support/real_mooncake/install.py``.  Stdlib only, so it runs before anything
else. The wheel (98 MB, cp311 only at this release) carries the master binary, the Python client and
the shared libraries both need; the machine needs ``libibverbs1`` besides (Debian's package).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

MOONCAKE_VERSION = "0.3.13.post1"
READY = "kvops-ready"  # written last: a venv without it is a partial install and is rebuilt


def cache_root() -> Path:
    env = os.environ.get("KVOPS_REAL_MOONCAKE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "kvops" / "real-mooncake"


def venv_dir(version: str = MOONCAKE_VERSION) -> Path:
    return cache_root() / version / "venv"


def venv_python(version: str = MOONCAKE_VERSION) -> Path:
    return venv_dir(version) / "bin" / "python"


def is_ready(version: str = MOONCAKE_VERSION) -> bool:
    return (venv_dir(version) / READY).is_file()


def _say(msg: str) -> None:
    print(f"[real-mooncake] {msg}", flush=True)


def _run(cmd: list[str]) -> None:
    _say("$ " + " ".join(cmd))
    subprocess.run(cmd, check=True)


def install(version: str = MOONCAKE_VERSION) -> Path:
    """Build the venv unless a complete one is cached; return its python."""
    venv = venv_dir(version)
    if is_ready(version):
        _say(f"mooncake-transfer-engine {version} already installed in {venv}")
        return venv_python(version)
    if venv.exists():
        _say(f"removing a partial install in {venv}")
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    if sys.version_info[:2] != (3, 11):
        raise SystemExit(
            f"mooncake-transfer-engine {version} ships a cp311 wheel only; this is {sys.version}"
        )
    _say(f"first run: installing mooncake-transfer-engine=={version} into {venv} (one 98 MB wheel)")
    start = time.monotonic()
    _run([sys.executable, "-m", "venv", str(venv)])
    py = str(venv / "bin" / "python")
    _run([py, "-m", "pip", "--disable-pip-version-check", "install", "-q",
          f"mooncake-transfer-engine=={version}"])  # fmt: skip
    where = "import importlib.util as u; print(u.find_spec('mooncake').submodule_search_locations[0])"
    package = Path(
        subprocess.run([py, "-c", where], check=True, capture_output=True, text=True).stdout.strip()
    )
    if not (package / "mooncake_master").is_file():
        raise SystemExit(f"no mooncake_master in {package}")
    seconds = time.monotonic() - start
    (venv / READY).write_text(
        f"mooncake-transfer-engine=={version}\npackage={package}\ntotal_seconds={seconds:.0f}\n"
    )
    _say(f"done in {time.monotonic() - start:.0f} s: {package}")
    return venv_python(version)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("command", choices=["install", "where"], nargs="?", default="install")
    parser.add_argument("--version", default=MOONCAKE_VERSION)
    args = parser.parse_args(argv)
    if args.command == "where":
        print(venv_python(args.version) if is_ready(args.version) else "not installed")
        return 0 if is_ready(args.version) else 1
    install(args.version)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
