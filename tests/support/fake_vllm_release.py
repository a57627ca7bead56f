"""A minimal vllm source tree for the doctor's CLI recorder (kvops.doctor.gen_cli_schema): the
package skeleton the recorder imports its way through to the serve command's make_arg_parser,
with the test's own `vllm/entrypoints/openai/cli_args.py`. No real vllm is installed in CI."""

from __future__ import annotations

import textwrap
from pathlib import Path

SKELETON = {
    "vllm/__init__.py": "",
    "vllm/platforms/__init__.py": "def resolve_current_platform_cls_qualname():\n    return 'none'\n",
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/cli/__init__.py": "",
    "vllm/entrypoints/cli/serve.py": "from vllm.entrypoints.openai.cli_args import make_arg_parser\n",
    "vllm/entrypoints/openai/__init__.py": "",
}


def write_release(root: Path, cli_args: str) -> Path:
    """The tree under `root` (made if missing), `cli_args` dedented as its cli_args.py; `root`."""
    files = {**SKELETON, "vllm/entrypoints/openai/cli_args.py": textwrap.dedent(cli_args)}
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
