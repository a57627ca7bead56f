"""Numbers from the exporter's flags and --config held to what the code under them can take
(issue 41, low items): `--max-body-bytes` of 2**63 or more made every target "down: internal
error" (libcurl's size limit is a signed 64-bit number), now refused where it enters."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from kvops.errors import UsageError
from kvops.exporter.command import configure
from kvops.exporter.config import MAX_BODY_BYTES, load_config
from support.exporter_harness import value
from support.upstream import body

PAGE = b'vllm:num_requests_running{model_name="m",engine="0"} 3\n'


def args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    configure(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize("value", [2**63, 2**64 + 5, 10**400, MAX_BODY_BYTES + 1, 1023, 0, -1])
def test_max_body_bytes_out_of_range_is_refused_from_the_flag(value):
    with pytest.raises(UsageError, match=r"expected bytes from 1024 to 1073741824 \(1 GiB\)$") as info:
        load_config(args("--max-body-bytes", str(value)))
    assert len(str(info.value)) < 120  # a 400-digit number is cut, not echoed whole


def test_max_body_bytes_out_of_range_is_refused_from_the_config(tmp_path: Path):
    cfg = tmp_path / "exporter.yml"
    cfg.write_text(f"max_body_bytes: {2**63}\n")
    proc = subprocess.run([sys.executable, "-m", "kvops.cli", "exporter", "--listen", "127.0.0.1:0",
                           "--config", str(cfg)], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"--max-body-bytes {2**63}: expected bytes from 1024" in proc.stderr


def test_the_largest_accepted_cap_scrapes_a_target(upstream, make_exporter):
    """1 GiB reaches libcurl's MAXFILESIZE_LARGE and the target is up (2**63 made it down)."""
    assert load_config(args("--max-body-bytes", str(MAX_BODY_BYTES))).max_body_bytes == MAX_BODY_BYTES
    exp = make_exporter([upstream.route("ok", body(PAGE))], max_body=MAX_BODY_BYTES)
    assert value(exp.samples(), "kvops_target_up") == 1.0
