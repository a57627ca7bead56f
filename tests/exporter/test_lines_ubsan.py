"""kvops/exporter/_lines.c under UndefinedBehaviorSanitizer (issue 41, low item): an empty first
write (an empty head, or an empty page's tail) called memcpy(NULL, s, 0), undefined behaviour
that UBSan reports as "null pointer passed as argument 1". The C file is built here with
-fsanitize=undefined (errors fatal) and run on those inputs in a child Python that preloads the
sanitizer's runtime; skipped where gcc or libubsan is missing."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[2] / "kvops" / "exporter" / "_lines.c"

# Each call's first write is empty: the buffer is still NULL when memcpy gets 0 bytes.
CALLS = """
import _lines
from prometheus_client.utils import floatToGoString as go
assert _lines.join([], [], "", go) == b""
assert _lines.join([""], [1.0], "", go) == b"1.0\\n"
assert _lines.join(["", "x "], [2.5, 3e9], "# EOF\\n", go) == f"2.5\\nx {go(3e9)}\\n# EOF\\n".encode()
print("ok")
"""


def _ubsan_runtime() -> str | None:
    if shutil.which("gcc") is None:
        return None
    found = subprocess.run(
        ["gcc", "-print-file-name=libubsan.so"], capture_output=True, text=True
    ).stdout.strip()
    return found if Path(found).is_file() else None


@pytest.mark.slow
def test_lines_c_has_no_undefined_behaviour_on_empty_writes(tmp_path):
    runtime = _ubsan_runtime()
    if runtime is None:
        pytest.skip("gcc with libubsan is not installed")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    module = tmp_path / f"_lines{suffix}"
    build = subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O1", "-g", "-fsanitize=undefined", "-fno-sanitize-recover=all",
         f"-I{sysconfig.get_paths()['include']}", str(SOURCE), "-o", str(module)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    run = subprocess.run(
        [sys.executable, "-c", CALLS], cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={"LD_PRELOAD": runtime, "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
             "PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)},
    )  # fmt: skip
    assert run.returncode == 0 and run.stdout == "ok\n", run.stderr[-2000:]
    assert "runtime error" not in run.stderr
