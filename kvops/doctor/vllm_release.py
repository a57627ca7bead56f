"""A vLLM release's own Python source, fetched once with pip and kept under the user's cache dir.

`pip download --no-deps vllm==X` fetches the release's wheel from PyPI (about 430-500 MB for
0.11-0.18: it carries CUDA kernels). Only the `vllm/**/*.py` members (about 17 MB) are unpacked;
the wheel is then deleted. The names of the compiled extension modules it carried are kept in the
manifest: they are what the sandbox stands in for, since a CUDA build cannot load on this machine.
A second run finds the unpacked tree and uses no network.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from kvops.errors import UsageError

# A PEP 440 release as vLLM numbers them: 0.14.0, 0.11 (a minor line), 0.11.0rc2, 0.4.0.post1,
# 0.14.0.dev3, a local build's +cu128; an optional leading v (a GitHub tag). ASCII digits only (\d
# would take Arabic-Indic ones), the whole text (a trailing newline is not a release), bounded.
RELEASE = re.compile(
    r"v?(?P<release>\d{1,6}(?:\.\d{1,6}){1,3}(?:(?:a|b|rc)\d{1,6})?(?:\.post\d{1,6})?(?:\.dev\d{1,6})?"
    r"(?:\+[a-z0-9]{1,16}(?:\.[a-z0-9]{1,16}){0,3})?)",
    re.ASCII,
)
MAX_RELEASE = 64


def release_number(text: str, flag: str = "--vllm-version") -> str:
    """`text` as a release number (a leading v dropped); UsageError (one line) for anything else."""
    m = RELEASE.fullmatch(text) if len(text) <= MAX_RELEASE else None
    if m is None:
        from kvops.termsafe import visible

        shown = visible(text if len(text) <= 40 else text[:40] + "...")
        size = f" ({len(text):,} characters)" if len(text) > 40 else ""
        raise UsageError(
            f"{flag} '{shown}'{size}: expected a vLLM release like 0.14.0, 0.11.0rc2 or 0.4.0.post1"
        )
    return m.group("release")


MANIFEST = "kvops-release.json"


@dataclass(frozen=True)
class Release:
    """One release's unpacked source tree and where it came from."""

    version: str
    root: Path  # holds the `vllm/` package folder
    wheel: str  # the wheel's file name on PyPI
    sha256: str
    wheel_bytes: int
    extensions: tuple[str, ...]  # dotted names of the compiled modules the wheel carried

    def source(self, rel: str) -> Path:
        return self.root / "vllm" / rel


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/kvops/vllm, else ~/.cache/kvops/vllm."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kvops" / "vllm"


def cached(version: str, cache: Path | None = None) -> Release | None:
    """The release if it is already unpacked in the cache, else None (never touches the network)."""
    root = (cache or cache_dir()) / version
    try:
        meta = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return Release(
        version=version,
        root=root,
        wheel=meta["wheel"],
        sha256=meta["sha256"],
        wheel_bytes=meta["wheel_bytes"],
        extensions=tuple(meta["extensions"]),
    )


def fetch(version: str, log: TextIO = sys.stderr, cache: Path | None = None) -> Release:
    """The release's source, from the cache or downloaded now with pip (progress goes to `log`)."""
    version = release_number(version)
    cache = cache or cache_dir()
    have = cached(version, cache)
    if have is not None:
        print(f"vllm {version}: using the cached source in {have.root}", file=log)
        return have
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kvops-wheel-", dir=cache) as tmp:
        print(f"vllm {version}: downloading the release wheel from PyPI with pip into {cache} ...", file=log)
        log.flush()
        wheel = _pip_download(version, Path(tmp), log)
        print(f"vllm {version}: unpacking its Python source into {cache / version}", file=log)
        return _unpack(version, wheel, cache)


def _pip_download(version: str, dest: Path, log: TextIO) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    cmd += ["--disable-pip-version-check", "--progress-bar", "on", "-d", str(dest), f"vllm=={version}"]
    # pip's own progress bar and messages go to our stderr, so --json keeps stdout clean
    proc = subprocess.run(cmd, stdout=log, stderr=log, check=False)
    wheels = sorted(dest.glob("vllm-*.whl"))
    if proc.returncode != 0 or not wheels:
        raise UsageError(f"could not download vllm=={version} with pip (exit {proc.returncode}); see above")
    return wheels[0]


def _extract_python(wheel: Path, staging: Path) -> list[str]:
    """Unpack the wheel's vllm/**/*.py members into `staging`; return every member name."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        for name in names:
            if not (name.startswith("vllm/") and name.endswith(".py")):
                continue
            target = (staging / name).resolve()
            if not target.is_relative_to(staging.resolve()):  # a hostile member name: skip it
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(name))
    return names


def _unpack(version: str, wheel: Path, cache: Path) -> Release:
    digest = hashlib.sha256()
    with wheel.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    staging = Path(tempfile.mkdtemp(prefix=f"{version}-", dir=cache))
    try:
        names = _extract_python(wheel, staging)
    except (OSError, zipfile.BadZipFile) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise UsageError(f"could not unpack {wheel.name}: {exc}") from None
    wanted = [n for n in names if n.startswith("vllm/") and n.endswith(".py")]
    extensions = sorted(
        n.split(".", 1)[0].replace("/", ".") for n in names if n.startswith("vllm/") and n.endswith(".so")
    )
    meta = {
        "version": version,
        "wheel": wheel.name,
        "sha256": digest.hexdigest(),
        "wheel_bytes": wheel.stat().st_size,
        "python_files": len(wanted),
        "extensions": extensions,
        "fetched_with": f"pip download --no-deps --only-binary=:all: vllm=={version}",
    }
    (staging / MANIFEST).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    final = cache / version
    if final.exists():  # another run unpacked it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    else:
        staging.rename(final)
    release = cached(version, cache)
    assert release is not None
    return release
