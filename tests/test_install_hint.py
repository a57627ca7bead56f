"""The "install the extra" hint gives a command that works for how this kvops was installed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kvops import install_hint
from support.paths import ROOT


def test_every_extra_named_is_one_pyproject_declares_with_that_package():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, package in install_hint.EXTRA_PACKAGES.items():
        assert any(req.startswith(package) for req in extras[extra]), (extra, extras[extra])


@pytest.mark.parametrize(
    ("direct_url", "expected"),
    [
        (
            {"url": "file:///src/kv%20ops", "dir_info": {"editable": True}},
            "pip install -e '/src/kv ops[nvidia]'",
        ),
        ({"url": "file:///src/kvops", "dir_info": {}}, "pip install '/src/kvops[nvidia]'"),
        ({"url": "file:///tmp/kvops-0.1.0-py3-none-any.whl", "archive_info": {}}, "pip install nvidia-ml-py"),
        (None, "pip install nvidia-ml-py"),
    ],
)
def test_the_command_follows_pips_record_of_the_install(monkeypatch, direct_url, expected):
    # The record pip writes (PEP 610) is the edge here; the real one is read in tests/test_packaging.py.
    monkeypatch.setattr(install_hint, "_direct_url", lambda: direct_url)
    assert install_hint.install_command("nvidia") == expected


def test_under_pipx_the_extra_is_injected(monkeypatch):
    monkeypatch.setattr(sys, "prefix", str(Path.home() / ".local/share/pipx/venvs/kvops"))
    assert install_hint.install_command("amd") == "pipx inject kvops amdsmi"
