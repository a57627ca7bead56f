"""The exposition's gzip form (kvops/exporter/compress.py): one gzip member that the standard
library's reader gives back byte for byte, from ISA-L's deflate where isal is installed and
from zlib where it is not."""

from __future__ import annotations

import gzip
import platform
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvops.exporter import compress

# The machines pyproject.toml installs isal on: there, the fast deflate must be the one used.
_ISAL_MACHINES = {"x86_64", "AMD64", "aarch64", "arm64"}


@pytest.fixture(params=["installed", "zlib"])
def deflate(request, monkeypatch):
    if request.param == "zlib":
        monkeypatch.setattr(compress, "_deflate", zlib)
    return request.param


def test_isal_writes_it_where_pyproject_installs_isal():
    if platform.machine() in _ISAL_MACHINES:
        assert compress.backend() == "isal", "isal is a dependency on this machine: pip install -e ."
    else:
        assert compress.backend() == "zlib"


def test_an_exposition_round_trips(deflate):
    body = b"".join(
        f'kvops_engine_hits_total{{target="http://10.0.0.{i}:8000",model_name="m"}} {i * 1e6}\n'.encode()
        for i in range(5000)
    )
    zipped = compress.gzip_bytes(body)
    assert zipped[:2] == b"\x1f\x8b"  # a gzip member, not a bare zlib stream
    assert gzip.decompress(zipped) == body
    assert len(zipped) < len(body) / 10


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=70000) | st.text(max_size=3000).map(str.encode))
def test_any_bytes_round_trip(data):
    assert gzip.decompress(compress.gzip_bytes(data)) == data
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compress, "_deflate", zlib)
        assert gzip.decompress(compress.gzip_bytes(data)) == data


def test_the_empty_exposition(deflate):
    assert gzip.decompress(compress.gzip_bytes(b"")) == b""
