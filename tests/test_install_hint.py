"""The "install the extra" hint gives a command that works for how this kvops was installed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kvops import install_hint
from support.paths import ROOT


def test_every_extra_named_is_one_pyproject_declares_with_that_package():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, packages in install_hint.EXTRA_PACKAGES.items():
        declared = {req.split(">")[0].split("=")[0].split("<")[0] for req in extras[extra]}
        assert set(packages.split()) == declared, (extra, extras[extra])


class _Dist:
    """pip's record of one installed kvops (PEP 610): the edge here; the real one is read in
    tests/test_packaging.py."""

    def __init__(self, direct_url: dict | None) -> None:
        self.metadata = {"Name": "kvops"}
        self.text = json.dumps(direct_url) if direct_url is not None else None

    def read_text(self, name: str) -> str | None:
        return self.text

    def locate_file(self, rel: str) -> Path:
        return Path(install_hint.__file__)


@pytest.mark.parametrize(
    ("direct_url", "expected"),
    [
        ({"url": "file:///src/kv%20ops", "dir_info": {"editable": True}}, "'/src/kv ops[nvidia]' (from your"),
        ({"url": "file:///tmp/kvops-0.1.0-py3-none-any.whl", "archive_info": {}}, "nvidia-ml-py"),
        (None, "nvidia-ml-py"),
    ],
)
def test_the_command_follows_pips_record_of_the_install(monkeypatch, direct_url, expected):
    monkeypatch.setattr(install_hint, "_source_tree", lambda: None)
    monkeypatch.setattr(install_hint.metadata, "distributions", lambda: [_Dist(direct_url)])
    command = install_hint.install_command("nvidia")
    assert command.startswith(f"{sys.executable} -m pip install ")
    wanted = "'.[nvidia]' (from your kvops clone)" if expected.endswith("(from your") else expected
    assert command.endswith(wanted), command


def test_a_clone_that_is_still_there_is_named_with_its_path(monkeypatch, tmp_path):
    monkeypatch.setattr(install_hint, "_source_tree", lambda: None)
    for info, prefix in (({"editable": True}, "-e "), ({}, "")):
        record = {"url": tmp_path.as_uri(), "dir_info": info}
        monkeypatch.setattr(install_hint.metadata, "distributions", lambda r=record: [_Dist(r)])
        assert install_hint.install_command("nvidia").endswith(f"install {prefix}'{tmp_path}[nvidia]'")


def test_under_pipx_the_extra_is_injected(monkeypatch, tmp_path):
    (tmp_path / "pipx_metadata.json").write_text("{}")  # what pipx leaves in each venv it makes
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    assert install_hint.install_command("amd") == "pipx inject kvops amdsmi"
