"""Fixtures for the collector tests: the NVML and AMD SMI stubs, built once per session."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from collectors import amd_stub, nvml_stub


@pytest.fixture(scope="session")
def nvml_libdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stub libnvidia-ml.so.1, compiled once and pre-loaded so pynvml's dlopen finds it."""
    libdir = nvml_stub.build(tmp_path_factory.mktemp("nvml"))
    nvml_stub.preload(libdir)
    return libdir


@pytest.fixture
def nvml_script(nvml_libdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """Call with a list of StubGpu (and init_ret=) to set what the stub answers next."""
    config = tmp_path / "nvml.conf"
    monkeypatch.setenv(nvml_stub.CONFIG_ENV, str(config))

    def script(devices: list[nvml_stub.StubGpu], init_ret: int = 0) -> Path:
        return nvml_stub.write_config(config, devices, init_ret=init_ret)

    return script


@pytest.fixture(scope="package")
def amdsmi_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The real amdsmi package, imported against the stub libamd_smi.so.

    Forgotten again afterwards, so later tests in this process import amdsmi afresh and
    see a host without ROCm, as they would without these tests.
    """
    yield amd_stub.import_amdsmi(amd_stub.build(tmp_path_factory.mktemp("rocm")))
    for name in [m for m in sys.modules if m == "amdsmi" or m.startswith("amdsmi.")]:
        del sys.modules[name]


@pytest.fixture
def amd_script(
    amdsmi_module: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Path]:
    """Call with a list of StubAmdGpu (and init_ret=, pci_sleep_ms=) to set what the stub answers."""
    config = tmp_path / "amdsmi.conf"
    monkeypatch.setenv(amd_stub.CONFIG_ENV, str(config))

    def script(devices: list[amd_stub.StubAmdGpu], **kw: int) -> Path:
        return amd_stub.write_config(config, amdsmi_module, devices, **kw)

    return script


@pytest.fixture
def collector(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The test module's COLLECTOR class (NvidiaCollector, AmdCollector) with a 50 ms PCIe
    sampler, closed after the test."""
    c = request.module.COLLECTOR(throughput_interval=0.05)
    yield c
    c.close()
