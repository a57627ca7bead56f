"""A usage error quotes the user's flag back; a flag can hold terminal escapes (issue 41, low
item: `--listen` with an OSC sequence was echoed raw, setting the window title). The one error
line is sanitised by kvops.termsafe wherever its message was built."""

from __future__ import annotations

import subprocess
import sys

import pytest

OSC_TITLE = "\x1b]0;pwned\x07"


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvops.cli", *argv], capture_output=True, text=True,
                          timeout=60)  # fmt: skip


@pytest.mark.parametrize("command", ["exporter", "sim"])
@pytest.mark.parametrize(
    ("listen", "shown"),
    [
        (f"{OSC_TITLE}:1", "cannot listen on \\x1b]0;pwned\\x07:1"),  # the host fails to resolve
        (f"[{OSC_TITLE}]:0", "cannot listen on \\x1b]0;pwned\\x07:0"),
        ("h\u202eost:0", "cannot listen on h\\u202eost:0: not a host name"),  # was a TypeError traceback
    ],
)
def test_listen_is_shown_escaped_in_its_one_error_line(command, listen, shown):
    proc = run(command, "--listen", listen)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert shown in proc.stderr
    assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr and "\u202e" not in proc.stderr


def test_an_argparse_error_quoting_a_value_is_escaped():
    proc = run("exporter", f"x{OSC_TITLE}\u2066")  # "unrecognized arguments: ..." joins them raw
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "\x1b" not in proc.stderr and "\u2066" not in proc.stderr


def test_any_usage_error_line_is_escaped(tmp_path):
    """A message built without termsafe (a file name, here) is still escaped by cli.main."""
    name = tmp_path / f"page{OSC_TITLE}\u061c.prom"
    proc = run("top", "--once", "--replay", str(name), str(name))
    assert proc.returncode == 2 and "no such file" in proc.stderr
    assert "\x1b" not in proc.stderr and "\u061c" not in proc.stderr
    assert "\\x1b]0;pwned\\x07\\u061c" in proc.stderr
