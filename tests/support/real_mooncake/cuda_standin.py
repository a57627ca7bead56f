"""Stand-in CUDA libraries for the Mooncake client on a machine without a GPU: a TEST DEVICE ONLY.

The wheel's ``store.so`` and ``engine.so`` are linked against ``libcuda.so.1`` and
``libcudart.so.12``, so ``import mooncake.store`` fails where no NVIDIA driver is installed, although
a TCP put or get never calls CUDA. These two libraries satisfy the loader and nothing more: every
``cu*``/``cuda*`` function the client references (read from its own dynamic symbol table with
``nm -D --undefined-only``) returns 100, CUDA's "no device" code. A user's machine has the real
libraries; nothing outside the real-Mooncake tests loads these.

``libcudart.so.12`` carries that soname and a version node of that name, because the client's
references are versioned (``cudaMalloc@libcudart.so.12``). Built with the system C compiler at test
time, never committed.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

CLIENT_LIBRARIES = ("store.so", "engine.so")
NO_DEVICE = 100  # cudaErrorNoDevice / CUDA_ERROR_NO_DEVICE
_DRIVER = re.compile(r"cu[A-Z]\w*")
_RUNTIME = re.compile(r"cuda[A-Z]\w*")


def undefined_cuda_symbols(package: Path) -> tuple[list[str], list[str]]:
    """(driver, runtime) function names the client libraries take from CUDA."""
    out = subprocess.run(
        ["nm", "-D", "--undefined-only", *(str(package / lib) for lib in CLIENT_LIBRARIES)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    names = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip().startswith("U ")}
    driver = sorted(n for n in names if _DRIVER.fullmatch(n) and not n.startswith("cuda"))
    runtime = sorted(n for n in names if _RUNTIME.fullmatch(n))
    return driver, runtime


def _build(out_dir: Path, soname: str, names: list[str], version_node: str | None) -> Path:
    source = out_dir / f"{soname}.c"
    body = "".join(f"int {n}(void) {{ return {NO_DEVICE}; }}\n" for n in names)
    source.write_text(
        f"/* kvops test device only: stand-in {soname}, every call answers no device */\n{body}"
    )
    target = out_dir / soname
    cmd = ["gcc", "-shared", "-fPIC", "-o", str(target), str(source), f"-Wl,-soname,{soname}"]
    if version_node:
        script = out_dir / f"{soname}.map"
        script.write_text(f"{version_node} {{ global: *; }};\n")
        cmd.append(f"-Wl,--version-script={script}")
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return target


def build(package: Path, out_dir: Path) -> tuple[Path, int]:
    """Build libcuda.so.1 and libcudart.so.12 into out_dir; return it and the number of symbols."""
    out_dir.mkdir(parents=True, exist_ok=True)
    driver, runtime = undefined_cuda_symbols(package)
    _build(out_dir, "libcuda.so.1", driver, None)
    _build(out_dir, "libcudart.so.12", runtime, "libcudart.so.12")
    return out_dir, len(driver) + len(runtime)
