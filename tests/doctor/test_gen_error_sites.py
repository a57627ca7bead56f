"""The shipped error-site table is what the releases' own wheels give (vllm_release: downloads
wheels from PyPI into ~/.cache/kvops/<package>/, once; CI: .ci/run's vllm_release step).

Three releases of each package are recorded afresh with the generator and compared, row by row,
with the shipped table's rows restricted to those releases: a hand edit of the table, a recorder
change not re-run, or a release whose wheel changed all show."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvops.doctor import gen_error_sites
from kvops.doctor.reading import error_sites

pytestmark = pytest.mark.vllm_release

CHOSEN = {
    "vllm": ("0.10.0", "0.22.0", "0.32.0"),
    "sglang": ("0.4.10.post2", "0.5.3", "0.5.23"),
    "lmcache": ("0.3.15", "0.4.7", "0.5.6"),
}


def _expand(ranges: list[str], order: list[str]) -> list[str]:
    out: list[str] = []
    for r in ranges:
        first, _, last = r.partition("..")
        out += order[order.index(first) : order.index(last or first) + 1]
    return out


def _restricted(rows: list[list], releases: dict[str, list[str]]) -> set[tuple]:
    """Each row with only the chosen releases, as ranges over the package's whole list (what a
    recording of only those releases writes)."""
    out = set()
    for r in rows:
        order = releases[r[2]]
        kept = [order.index(v) for v in _expand(r[6], order) if v in CHOSEN[r[2]]]
        if kept:
            out.add((*r[:6], tuple(gen_error_sites.ranges(kept, order))))
    return out


def test_three_releases_of_each_package_give_the_shipped_rows(tmp_path: Path) -> None:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kvops"
    wanted = [f"{p}=={v}" for p, versions in CHOSEN.items() for v in versions]
    out = tmp_path / "table.gz"
    with out.open("wb") as fh:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "kvops.doctor.gen_error_sites",
                "--download",
                str(cache),
                "--releases",
                *wanted,
            ],
            stdout=fh,
            stderr=subprocess.PIPE,
            text=False,
            timeout=3600,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    header, recorded = gen_error_sites.read(out)
    shipped_header, shipped = gen_error_sites.read(error_sites.TABLE)
    assert header["releases"] == shipped_header["releases"]
    fresh = {(*r[:6], tuple(r[6])) for r in recorded}
    expected = _restricted(shipped, shipped_header["releases"])
    assert fresh == expected, (sorted(fresh - expected)[:5], sorted(expected - fresh)[:5])
    # and the two messages the issue names are where it says
    paths = {
        r[3] for r in recorded if r[0].startswith(("Unsupported spec type: ", "Secondary tier configuration"))
    }
    assert {"vllm/v1/kv_offload/factory.py", "vllm/v1/kv_offload/tiering/factory.py"} <= paths
