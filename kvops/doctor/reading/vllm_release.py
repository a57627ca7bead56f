"""A vLLM release's own Python source, fetched once with pip and kept under the user's cache dir.

`pip download --no-deps vllm==X` fetches the release's wheel from PyPI (about 430-500 MB for
0.11-0.18: it carries CUDA kernels). Only the `vllm/**/*.py` members (about 17 MB) are unpacked;
the wheel is then deleted. The names of the compiled extension modules it carried are kept in the
manifest: they are what the sandbox stands in for, since a CUDA build cannot load on this machine.
A second run finds the unpacked tree and uses no network.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

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
RECORD = "RECORD"  # the wheel's own `vllm-X.dist-info/RECORD`: path,sha256=<urlsafe b64>,size per file


@dataclass(frozen=True)
class Release:
    """One release's unpacked source tree and where it came from."""

    version: str
    root: Path  # holds the `vllm/` package folder
    wheel: str  # the wheel's file name on PyPI
    sha256: str | None  # the wheel's, computed from its bytes in this run; None for a cached tree
    wheel_bytes: int
    extensions: tuple[str, ...]  # dotted names of the compiled modules the wheel carried
    verified_files: int = 0  # .py files whose sha256 matched the wheel's RECORD before any ran
    record_sha256: str = ""  # of the RECORD they were checked against

    def source(self, rel: str) -> Path:
        return self.root / "vllm" / rel


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/kvops/vllm, else ~/.cache/kvops/vllm."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kvops" / "vllm"


def _check_owned(path: Path) -> None:
    """Refuse a directory another user could have written code into: not ours, or writable by
    group/others (code from it runs as this user)."""
    try:
        st = path.lstat()
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"refusing the vLLM source cache {path}: not a directory (a link or a file)")
    if st.st_uid != os.getuid():
        raise UsageError(
            f"refusing the vLLM source cache {path}: owned by uid {st.st_uid}, not you (uid {os.getuid()});"
            " its code would run as you. Remove it, or set XDG_CACHE_HOME to a directory of yours"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UsageError(
            f"refusing the vLLM source cache {path}: writable by group or others (mode"
            f" {stat.S_IMODE(st.st_mode):o}); chmod go-w it, or remove it"
        )


def _record_hashes(text: str) -> dict[str, str]:
    """path -> sha256 hex of every hashed RECORD row (PEP 376/427: sha256=<urlsafe b64, no padding>)."""
    out: dict[str, str] = {}
    for row in csv.reader(io.StringIO(text)):
        if len(row) >= 2 and row[1].startswith("sha256="):
            raw = row[1][len("sha256=") :]
            try:
                out[row[0]] = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).hex()
            except ValueError:
                continue
    return out


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(root: Path) -> tuple[int, str, tuple[str, ...]]:
    """Check an unpacked tree against the wheel's RECORD before any of it is imported: every file
    is one the wheel carried, with the hash the wheel recorded; nothing else is there (a stray
    module or .pyc next to them would be imported too). (files checked, RECORD's sha256, the
    compiled extension modules RECORD lists.) UsageError naming the first difference."""
    where = f"the cached vLLM source {root}"
    fix = f"; delete {root} to download it again"
    try:
        record_text = (root / RECORD).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        raise UsageError(f"{where} has no readable RECORD of the wheel's file hashes{fix}") from None
    hashes = _record_hashes(record_text)
    wanted = {p for p in hashes if p.startswith("vllm/") and p.endswith(".py")}
    seen = 0
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            raise UsageError(f"{where} holds a symbolic link {rel}{fix}")
        if path.is_dir():
            _check_owned(path)
            continue
        if rel in (MANIFEST, RECORD):
            continue
        if rel not in wanted:
            raise UsageError(f"{where} holds {rel}, a file the wheel's RECORD does not list{fix}")
        if _sha256_file(path) != hashes[rel]:
            raise UsageError(f"{where}: {rel} differs from the wheel's RECORD (sha256){fix}")
        seen += 1
    if seen != len(wanted):
        raise UsageError(f"{where} lacks {len(wanted) - seen} of the wheel's .py files{fix}")
    extensions = tuple(
        sorted(
            p.split(".", 1)[0].replace("/", ".")
            for p in hashes
            if p.startswith("vllm/") and p.endswith(".so")
        )
    )
    return seen, hashlib.sha256(record_text.encode("utf-8")).hexdigest(), extensions


def cached(version: str, cache: Path | None = None) -> Release | None:
    """The release if it is already unpacked in the cache (checked file by file against the
    wheel's RECORD), else None; never touches the network. UsageError for a tree that is there but
    not the wheel's, or a cache another user can write to."""
    cache = cache or cache_dir()
    root = cache / version
    for directory in (cache, root):
        _check_owned(directory)
    try:
        meta = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (root / RECORD).exists() and not meta.get("record"):
        return None  # unpacked by an older kvops that kept no RECORD: fetched again
    files, record_sha, extensions = verify(root)
    return Release(
        version=version,
        root=root,
        wheel=str(meta.get("wheel", "")),
        sha256=None,  # the wheel is gone: its hash cannot be checked again, so none is claimed
        wheel_bytes=int(meta.get("wheel_bytes", 0) or 0),
        extensions=extensions,
        verified_files=files,
        record_sha256=record_sha,
    )


def fetch(version: str, log: TextIO = sys.stderr, cache: Path | None = None) -> Release:
    """The release's source, from the cache or downloaded now with pip (progress goes to `log`)."""
    version = release_number(version)
    cache = cache or cache_dir()
    have = cached(version, cache)
    if have is not None:
        print(
            f"vllm {version}: using the cached source in {have.root} ({have.verified_files} files match"
            " the wheel's RECORD)",
            file=log,
        )
        return have
    cache.mkdir(parents=True, exist_ok=True, mode=0o700)
    _check_owned(cache)
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
    """Unpack the wheel's vllm/**/*.py members and its RECORD into `staging`; return every member name."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        for name in names:
            if name.endswith(".dist-info/RECORD") and name.count("/") == 1:
                (staging / RECORD).write_bytes(zf.read(name))
                continue
            if not (name.startswith("vllm/") and name.endswith(".py")):
                continue
            target = (staging / name).resolve()
            if not target.is_relative_to(staging.resolve()):  # a hostile member name: skip it
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(name))
    for folder in staging.rglob("*"):
        if folder.is_dir():
            folder.chmod(0o700)  # whatever the umask: a tree only its owner can write (see _check_owned)
    return names


def _unpack(version: str, wheel: Path, cache: Path) -> Release:
    sha256 = _sha256_file(wheel)
    staging = Path(tempfile.mkdtemp(prefix=f"{version}-", dir=cache))
    try:
        _extract_python(wheel, staging)
        files, record_sha, extensions = verify(staging)  # the wheel's RECORD holds for what it unpacked
    except (OSError, zipfile.BadZipFile) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise UsageError(f"could not unpack {wheel.name}: {exc}") from None
    except UsageError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise UsageError(f"{wheel.name} does not match its own RECORD: {exc}") from None
    meta: dict[str, Any] = {
        "version": version,
        "wheel": wheel.name,
        "sha256_at_download": sha256,  # kept for people; never reported as checked
        "wheel_bytes": wheel.stat().st_size,
        "python_files": files,
        "record": RECORD,
        "extensions": list(extensions),
        "fetched_with": f"pip download --no-deps --only-binary=:all: vllm=={version}",
    }
    (staging / MANIFEST).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    final = cache / version
    if final.exists() and cached(version, cache) is None:  # an older kvops's tree without RECORD
        stale = Path(tempfile.mkdtemp(prefix=f"{version}-stale-", dir=cache))
        final.rename(stale / "tree")
        shutil.rmtree(stale, ignore_errors=True)
    if final.exists():  # another run unpacked it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    else:
        staging.rename(final)
    return Release(version, final, wheel.name, sha256, meta["wheel_bytes"], extensions, files, record_sha)
