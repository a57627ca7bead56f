"""kvops built the standard way (issue 30): `python -m build` makes an sdist and a wheel from a
copy of the files a release needs; each installs into a fresh venv (no system site-packages;
dependencies from the package index) and runs `kvops demo --once`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvops import __version__
from support.paths import ROOT

pytestmark = pytest.mark.slow

# What `python -m build` needs from a checkout; anything else missing from the sdist shows here.
RELEASE_FILES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "kvops", "playbooks")


def run(*argv: str | Path, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, cwd=cwd)
    assert proc.returncode == 0, f"{argv}: {proc.stdout[-2000:]}{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in RELEASE_FILES:
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        ignore = (
            {"ignore": shutil.ignore_patterns("__pycache__", "_playbooks")} if copy is shutil.copytree else {}
        )
        copy(ROOT / name, src / name, **ignore)
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--outdir", out, src)  # the sdist, then the wheel built from it
    return out


def fresh_venv(path: Path) -> Path:
    run(sys.executable, "-m", "venv", path)
    return path / "bin"


def test_build_makes_one_wheel_and_one_sdist_named_by_the_one_version(dist):
    names = sorted(p.name for p in dist.iterdir())
    # The wheel carries the C parts (setup.py): tagged for this interpreter.
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert len(names) == 2 and names[1] == f"kvops-{__version__}.tar.gz", names
    assert names[0].startswith(f"kvops-{__version__}-{tag}-{tag}-") and names[0].endswith(".whl"), names


@pytest.mark.parametrize("kind", ["whl", "tar.gz"])
def test_each_installs_into_a_fresh_venv_and_runs_the_demo(dist, tmp_path, kind):
    [artifact] = dist.glob(f"*.{kind}")
    bin_dir = fresh_venv(tmp_path / "venv")
    run(bin_dir / "pip", "install", "--disable-pip-version-check", "-q", artifact)
    kvops = bin_dir / "kvops"
    assert run(kvops, "--version", cwd=tmp_path).stdout.strip() == f"kvops {__version__}"
    demo = run(kvops, "demo", "--once", cwd=tmp_path, timeout=120)
    assert "Llama-3.1-8B-Instruct" in demo.stdout and "Simulated GPU 0" in demo.stdout
    # The installed copy is the one that ran (not this checkout), and it carries the playbooks
    # and the C parts (line finder, bucket grouping, line joiner).
    where = run(bin_dir / "python", "-c", "import kvops; print(kvops.__file__)", cwd=tmp_path).stdout
    assert where.startswith(str(tmp_path / "venv"))
    built = (
        "from kvops.exposition import parser, histograms; from kvops.exporter import line_text; "
        "print(parser.Finder is not None, histograms._c_group is not None, line_text._c_join is not None)"
    )
    assert run(bin_dir / "python", "-c", built, cwd=tmp_path).stdout.strip() == "True True True"
    checks = run(kvops, "doctor", "--list-checks", cwd=tmp_path).stdout
    assert "mla-indexer-keyerror" in checks and "KvopsTargetDown" in checks
    # doctor's package data (kvops/doctor/reading/): each release's flag table, the shipped model configs
    line = "vllm serve deepseek-ai/DeepSeek-V3.2 --kv-offloading-size 64"
    judged = subprocess.run(
        [str(kvops), "doctor", "--cmd", line, "--vllm-version", "0.14.0", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert '"mla-indexer-keyerror"' in judged.stdout, judged.stderr[-2000:]
    # Installed from a file, not a clone: the hint names the extra's own package.
    hint = "from kvops.install_hint import install_command; print(install_command('nvidia'))"
    assert (
        run(bin_dir / "python", "-c", hint, cwd=tmp_path)
        .stdout.strip()
        .endswith(" -m pip install nvidia-ml-py")
    )


def test_the_sdist_installs_without_a_c_compiler_and_reads_pages_without_the_finder(dist, tmp_path):
    """A machine with no compiler (or no Python headers) still installs kvops from the sdist:
    the C parts are optional, and Python does the same work."""
    [sdist] = dist.glob("*.tar.gz")
    bin_dir = fresh_venv(tmp_path / "venv")
    env = dict(os.environ, CC="false", PIP_NO_CACHE_DIR="1")  # every compile fails
    proc = subprocess.run(
        [str(bin_dir / "pip"), "install", "--disable-pip-version-check", "-q", "--no-binary", "kvops", sdist],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    check = (
        "from kvops.exposition import parser; from kvops.engines.registry import WANTED; "
        "r = parser.parse('vllm:num_requests_running{model_name=\"m\"} 3\\n', WANTED); "
        "print(parser.Finder, r.get('vllm:num_requests_running')); "
        "from kvops.exporter import line_text; print(line_text._c_join, line_text.join(['a '], [1e6])); "
        "from kvops.exposition import histograms; print(histograms._c_group)"
    )
    out = run(bin_dir / "python", "-c", check, cwd=tmp_path).stdout.strip()
    assert out == "None [({'model_name': 'm'}, 3.0)]\nNone b'a 1e+06\\n'\nNone", out
    demo = run(bin_dir / "kvops", "demo", "--once", cwd=tmp_path, timeout=120)
    assert "Llama-3.1-8B-Instruct" in demo.stdout
