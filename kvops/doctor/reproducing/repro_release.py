"""`--repro` with a vLLM release's own code on CPU: which failures can, and how one is run.

The parent side: pick the releases (the one asked for, else a release the failure is known in;
then the first fixed release), fetch their source (kvops.doctor.reading.vllm_release), run the case in a
child process (kvops.doctor.reproducing.repro_cases: the release's modules must not mix with this process's
imports, nor with an installed vllm) and return what ran.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from kvops.doctor.reading.modelcfg import ModelInfo
from kvops.doctor.reading.vllm_release import Release, fetch
from kvops.doctor.reproducing.repro_cases import RESULT_MARK

CHILD_TIMEOUT_S = 600.0  # importing a release's config/attention/model modules takes ~10-20 s on CPU


@dataclass(frozen=True)
class ReleaseCase:
    case: str  # a key of kvops.doctor.reproducing.repro_cases.CASES
    affected: str  # a release the failure is known in (run when --vllm-version is not given)
    fixed: str | None  # the first release whose same code runs cleanly; None: the fix is flags
    model: str  # the config.json shipped in kvops/doctor/reading/repro_models/ (when --model is not given)
    # what the release's own error says; None: the playbook's log signatures. Needed where older
    # releases word the same error more briefly than the signature the logs are matched with.
    expect: str | None = None


CASES: dict[str, ReleaseCase] = {
    # register_kv_caches filters by Attention in 0.12.0-0.17.x; AttentionLayerBase from 0.18.0 (PR #37090)
    "mla-indexer-keyerror": ReleaseCase("offload_layer_lookup", "0.14.0", "0.18.0", "deepseek-v3.2.json"),
    "vllm-offload-mla-keyerror": ReleaseCase("offload_layer_lookup", "0.14.0", "0.18.0", "deepseek-v3.json"),
    # the fix is a flag: the same release's code run with the fixed command's values
    "vllm-dsa-block-size-64": ReleaseCase(
        "dsa_block_size", "0.18.0", None, "deepseek-v3.2.json", expect=r"No common block size for \d+"
    ),
    "vllm-hma-disabled-unify-fail": ReleaseCase("hybrid_unify", "0.18.0", None, "qwen3-next-80b-a3b.json"),
}

DEFAULT_BLOCK_SIZE = 16  # vLLM's KV block size on CUDA when --block-size is not given


def case_params(pb_id: str, fixed: bool, cmd: Any, fix_add: tuple[str, ...] = ()) -> dict[str, Any]:
    """The command's values a case reads: the user's (or vLLM's default), or the fixed command's."""
    if pb_id == "vllm-dsa-block-size-64":
        given = _flag(cmd, "--block-size")
        if fixed:
            given = next((a.split("=", 1)[1] for a in fix_add if a.startswith("--block-size=")), "64")
        return {
            "block_size": int(given) if given and given.isascii() and given.isdigit() else DEFAULT_BLOCK_SIZE
        }
    if pb_id == "vllm-hma-disabled-unify-fail":
        return {"disable_hybrid_kv_cache_manager": not fixed}
    return {}


def _flag(cmd: Any, flag: str) -> str | None:
    try:
        return cmd.get(flag) if cmd is not None else None
    except (AttributeError, ValueError):
        return None


def model_request(model: ModelInfo) -> dict[str, Any]:
    return {"num_layers": model.num_layers, "mla": model.is_mla, "dsa": model.is_dsa, "source": model.path}


# What a release's code imports, on the paths the cases run, beyond kvops's own dependencies: found
# by running every case in a venv holding kvops alone (docs/doctor.md). pyproject's `repro` extra
# installs exactly these (tests/doctor/test_repro_release.py holds the two lists together).
REPRO_MODULES = ("torch", "numpy", "packaging", "pydantic", "regex", "requests")


def missing_runtime() -> str | None:
    """What this machine lacks to run a release's Python code, with the command that adds it
    (None when nothing)."""
    missing = [name for name in REPRO_MODULES if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    from kvops.install_hint import install_command

    return f"{', '.join(missing)} not installed (a CPU build of torch is enough): {install_command('repro')}"


def execute(
    case: ReleaseCase, release: Release, model: ModelInfo, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Run the case over `release` in a child process; the `executed` block of --json."""
    request = {
        "case": case.case,
        "root": str(release.root),
        "extensions": list(release.extensions),
        "model": model_request(model),
        "config": _text_config(model.path),
        **(params or {}),
    }
    # no bytecode written into the verified tree: a __pycache__ there would be a file the wheel's
    # RECORD does not list (and a .pyc runs instead of its checked .py), so the next run refuses it
    env = dict(os.environ, VLLM_CONFIGURE_LOGGING="0", CUDA_VISIBLE_DEVICES="", PYTHONDONTWRITEBYTECODE="1")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "kvops.doctor.reproducing.repro_cases"],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            errors="replace",
            cwd=release.root,  # so `import vllm` can only mean the release's tree
            env=env,
            timeout=CHILD_TIMEOUT_S,
            check=False,
        )
        out, err = proc.stdout, proc.stderr
    except subprocess.TimeoutExpired:
        out, err = "", f"timed out after {CHILD_TIMEOUT_S:.0f} s"
    result: dict[str, Any] = {"outcome": "could-not-run", "detail": err.strip()[-2000:] or "no result"}
    for line in out.splitlines():
        if line.startswith(RESULT_MARK):
            try:
                result = json.loads(line[len(RESULT_MARK) :])
            except ValueError as exc:
                result = {"outcome": "could-not-run", "detail": f"unreadable result from the child: {exc}"}
    result = {"vllm_version": release.version, **result}
    result.setdefault("file", None)
    result.setdefault("function", None)
    result.setdefault("traceback", None)
    result["wheel"] = {
        "file": release.wheel,
        "bytes": release.wheel_bytes,
        # the wheel's own hash only when this run downloaded it; a cached tree was checked file by
        # file against the wheel's RECORD instead
        "sha256": release.sha256,
        "record_sha256": release.record_sha256,
        "files_verified_against_record": release.verified_files,
    }
    return result


def _text_config(path: str) -> dict[str, Any]:
    """The model's config.json as vLLM's hf_text_config sees it (the language model's part)."""
    file = Path(path)
    if file.is_dir():
        file = file / "config.json"
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    text = raw.get("text_config") if isinstance(raw, dict) else None
    return text if isinstance(text, dict) else raw if isinstance(raw, dict) else {}


def fetch_and_execute(
    case: ReleaseCase, version: str, model: ModelInfo, log: TextIO, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    release = fetch(version, log=log)
    print(f"vllm {version}: running {case.case} with its own code on CPU ...", file=log)
    log.flush()
    return execute(case, release, model, params)
