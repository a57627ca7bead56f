"""Install PyPI's ``mooncake-transfer-engine`` into its own venv, cached outside the repository.

Run as a CI step with its own time limit (pytest's 300 s per-test timeout would cut a first install
off):  ``python tests/support/real_mooncake/install.py``.  Stdlib only, so it runs before anything
else. The wheel (98 MB, cp311 only at this release) carries the master binary, the Python client and
the shared libraries both need; the machine needs ``libibverbs1`` besides (Debian's package).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

if not __package__:  # run as a script (CI): tests/ on the path, as pytest's pythonpath puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from support.cached_venv import READY as READY  # store.py reads the record
from support.cached_venv import CachedVenv, pip

MOONCAKE_VERSION = "0.3.13.post1"
VENV = CachedVenv("real-mooncake", "KVOPS_REAL_MOONCAKE_CACHE", "mooncake-transfer-engine", MOONCAKE_VERSION)
cache_root = VENV.cache_root
venv_dir = VENV.venv_dir
venv_python = VENV.venv_python
is_ready = VENV.is_ready


def install(version: str = MOONCAKE_VERSION) -> Path:
    """Build the venv unless a complete one is cached; return its python."""
    cached = VENV.reuse(version)
    if cached is not None:
        return cached
    if sys.version_info[:2] != (3, 11):
        raise SystemExit(
            f"mooncake-transfer-engine {version} ships a cp311 wheel only; this is {sys.version}"
        )
    venv = venv_dir(version)
    VENV.say(f"first run: installing mooncake-transfer-engine=={version} into {venv} (one 98 MB wheel)")
    start = time.monotonic()
    py = VENV.create(version)
    VENV.run([*pip(py), "install", "-q", f"mooncake-transfer-engine=={version}"])
    where = "import importlib.util as u; print(u.find_spec('mooncake').submodule_search_locations[0])"
    package = Path(
        subprocess.run([py, "-c", where], check=True, capture_output=True, text=True).stdout.strip()
    )
    if not (package / "mooncake_master").is_file():
        raise SystemExit(f"no mooncake_master in {package}")
    seconds = time.monotonic() - start
    VENV.mark_ready(
        version, f"mooncake-transfer-engine=={version}\npackage={package}\ntotal_seconds={seconds:.0f}\n"
    )
    VENV.say(f"done in {time.monotonic() - start:.0f} s: {package}")
    return venv_python(version)


def main(argv: list[str] | None = None) -> int:
    return VENV.main(argv, (__doc__ or "").splitlines()[0], install)


if __name__ == "__main__":
    raise SystemExit(main())
