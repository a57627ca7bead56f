"""Install hints for the GPU extras only where a GPU of that vendor is present: a GPU-less
host running `kvops top` was told to install nvidia-ml-py and amdsmi."""

from __future__ import annotations

import builtins
import subprocess
import sys

import pytest

from kvops.collectors import amd, gpu_presence, nvidia


def _drm(root, card: str, vendor: str) -> None:
    device = root / "sys/class/drm" / card / "device"
    device.mkdir(parents=True)
    (device / "vendor").write_text(vendor + "\n")


def test_presence_is_read_from_device_nodes_and_drm_vendor_ids(tmp_path):
    assert not gpu_presence.nvidia_present(str(tmp_path)) and not gpu_presence.amd_present(str(tmp_path))
    _drm(tmp_path, "card0", "0x8086")  # an Intel iGPU: neither
    assert not gpu_presence.nvidia_present(str(tmp_path)) and not gpu_presence.amd_present(str(tmp_path))
    _drm(tmp_path, "card1", "0x10de")
    assert gpu_presence.nvidia_present(str(tmp_path)) and not gpu_presence.amd_present(str(tmp_path))
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/kfd").write_text("")
    assert gpu_presence.amd_present(str(tmp_path))
    other = tmp_path / "other"
    (other / "dev").mkdir(parents=True)
    (other / "dev/nvidia0").write_text("")
    assert gpu_presence.nvidia_present(str(other))


@pytest.fixture
def no_vendor_packages(monkeypatch):
    """pynvml and amdsmi not importable, as on a host without the extras."""
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name in ("pynvml", "amdsmi"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    monkeypatch.delitem(sys.modules, "amdsmi", raising=False)
    monkeypatch.setattr(builtins, "__import__", fake_import)


@pytest.mark.parametrize("present", [False, True])
def test_the_install_hint_only_where_the_vendor_has_a_device(no_vendor_packages, monkeypatch, present):
    monkeypatch.setattr(gpu_presence, "nvidia_present", lambda root="/": present)
    monkeypatch.setattr(gpu_presence, "amd_present", lambda root="/": present)
    with pytest.raises(nvidia.NvmlUnavailable) as nv:
        nvidia._load_nvml()
    with pytest.raises(amd.AmdSmiUnavailable) as am:
        amd._import_amdsmi()
    for message, package in ((str(nv.value), "nvidia-ml-py"), (str(am.value), "amdsmi")):
        assert (f"{package} is not installed" in message) is present, message
        assert ("install" in message) is present and ("no " in message) is not present


def test_this_gpu_less_host_gets_no_install_hint_from_top():
    """From where a user starts: `kvops top --once` on this machine (no GPU here)."""
    if gpu_presence.nvidia_present() or gpu_presence.amd_present():
        pytest.skip("this host has a GPU")
    out = subprocess.run(
        [sys.executable, "-m", "kvops.cli", "top", "--once", "http://127.0.0.1:1"],
        capture_output=True, text=True, timeout=60,
    ).stdout  # fmt: skip
    assert "pip install" not in out and "is not installed" not in out
