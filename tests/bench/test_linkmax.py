from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from kvops.bench import linkmax
from kvops.bench.results import LinkMax
from kvops.snapshot import GpuSample

from .helpers import DEVICE

GEN5_X16 = 63.0e9


def gpu(index: str, uuid: str, bus: str | None, link: float | None = GEN5_X16) -> GpuSample:
    return GpuSample(
        index=index, uuid=uuid, vendor="nvidia", pci_bus_id=bus, pcie_link_max_bytes_per_second=link
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [("GPU-58F4EF56-7bd3", "58f4ef56-7bd3"), ("58f4ef56-7bd3", "58f4ef56-7bd3"), ("", None), (None, None)],
)
def test_uuid_forms_of_nvml_and_torch_compare_equal(text: str | None, expected: str | None) -> None:
    assert linkmax.normalise_uuid(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("00000000:3B:00.0", (0, 0x3B, 0)),
        ("0000:c1:00.0", (0, 0xC1, 0)),
        ("0001:3b:02", (1, 0x3B, 2)),
        ("3b:00", (0, 0x3B, 0)),
        ("not-a-bus", None),
        (None, None),
    ],
)
def test_pci_addresses_normalise(text: str | None, expected: tuple[int, int, int] | None) -> None:
    assert linkmax.normalise_pci(text) == expected


def test_matches_by_uuid_not_by_index() -> None:
    # CUDA_VISIBLE_DEVICES=3: torch's device 0 is the driver's GPU 3.
    samples = [
        gpu("0", "GPU-00000000-aaaa", "00000000:18:00.0", 31.5e9),
        gpu("3", "GPU-58F4EF56-7BD3-D0C7-CE7B-A7ED3E2F4FE5", "00000000:3B:00.0"),
    ]
    link = linkmax.from_samples(DEVICE, samples, "nvidia")
    assert link == LinkMax(
        GEN5_X16,
        "nvidia collector, GPU 3 by uuid: as the collector reports it",
        gpu_index="3",
        gpu_uuid="GPU-58F4EF56-7BD3-D0C7-CE7B-A7ED3E2F4FE5",
    )


def test_falls_back_to_pci_address_when_uuids_differ_in_form() -> None:
    device = dataclasses.replace(DEVICE, uuid="not-comparable", backend="rocm")
    samples = [gpu("0", "amd-uuid-1", "0000:18:00.0", 31.5e9), gpu("1", "amd-uuid-2", "0000:3b:00.0")]
    link = linkmax.from_samples(device, samples, "amd")
    assert link.bytes_per_second == GEN5_X16 and link.source.startswith("amd collector, GPU 1 by pci")


def test_only_gpu_is_used_when_torch_gives_nothing_to_match() -> None:
    device = dataclasses.replace(DEVICE, uuid=None, pci_bus_id=None)
    assert linkmax.from_samples(device, [gpu("0", "GPU-x", None)], "nvidia").source.startswith(
        "nvidia collector, GPU 0 by only GPU"
    )
    unknown = linkmax.from_samples(device, [gpu("0", "GPU-x", None), gpu("1", "GPU-y", None)], "nvidia")
    assert not unknown.known and "no GPU among 2" in unknown.source


def test_max_generation_and_width_win_over_the_idle_trained_link() -> None:
    # At idle the link trains down (ASPM): Gen1 x16 now, Gen5 x16 possible.
    idle = gpu("0", DEVICE.uuid or "", None, link=4.0e9)
    idle.pcie_link_gen, idle.pcie_link_width, idle.pcie_link_gen_max, idle.pcie_link_width_max = 1, 16, 5, 16
    link = linkmax.from_samples(DEVICE, [idle], "nvidia")
    assert link.bytes_per_second == pytest.approx(32e9 * 16 * 128 / 130 / 8)
    assert link.source.endswith("PCIe Gen5 x16, the most device and slot allow")


def test_a_gpu_without_link_max_leaves_it_unknown() -> None:
    link = linkmax.from_samples(DEVICE, [gpu("0", DEVICE.uuid or "", None, link=None)], "nvidia")
    assert not link.known and "no link max for GPU 0" in link.source


def test_the_users_figure_wins() -> None:
    assert linkmax.resolve(DEVICE, 50e9) == LinkMax(50e9, "--link-max-gbps")
    assert "50.0 GB/s per direction" in linkmax.planned(50e9)
    assert "unknown" in linkmax.planned(None)


def test_a_broken_collector_makes_the_link_max_unknown_not_the_run_fail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class BrokenCollector:
        name = "nvidia"
        closed = False

        def collect(self) -> list[GpuSample]:
            raise OSError("NVML Shared Library Not Found\nsecond line")

        def close(self) -> None:
            BrokenCollector.closed = True

    module = types.ModuleType("kvops.collectors.nvidia")
    module.NvidiaCollector = BrokenCollector  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "kvops.collectors.nvidia", module)
    link = linkmax.from_collector(DEVICE)
    assert link == LinkMax(None, "nvidia collector failed: OSError: NVML Shared Library Not Found")
    assert BrokenCollector.closed


def test_the_collector_on_this_machine_gives_a_reason_when_it_has_no_figure() -> None:
    # No GPU here: whichever state the nvidia collector is in, the answer is "unknown, because ...".
    link = linkmax.from_collector(DEVICE)
    assert not link.known
    assert link.source and "\n" not in link.source


def test_link_max_through_the_real_nvidia_collector_and_pynvml(tmp_path: Path) -> None:
    """NvidiaCollector over real pynvml over the project's stub libnvidia-ml.so.1 (tests/collectors)."""
    from collectors import nvml_stub

    libdir = nvml_stub.build(tmp_path / "nvml")
    devices = nvml_stub.gpus(3)
    devices[2].link_gen, devices[2].link_gen_max = 1, 4  # idle at Gen1, Gen4 x16 possible
    config = nvml_stub.write_config(tmp_path / "nvml.conf", devices)
    # torch's device 0 is the driver's GPU 2 (CUDA_VISIBLE_DEVICES=2); torch prints the uuid bare.
    device = dataclasses.replace(DEVICE, uuid=devices[2].uuid.removeprefix("GPU-"), pci_bus_id=None)
    code = (
        "import json; from kvops.bench import linkmax; from kvops.bench.results import DeviceInfo; "
        f"d = DeviceInfo(**{device.as_dict()!r}); "
        "print(json.dumps([linkmax.from_collector(d).as_dict(), linkmax.resolve(d, 50e9).as_dict()]))"
    )
    env = {**os.environ, "LD_LIBRARY_PATH": str(libdir), nvml_stub.CONFIG_ENV: str(config)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    link, flagged = json.loads(proc.stdout)
    assert link["bytes_per_second"] == pytest.approx(16e9 * 16 * 128 / 130 / 8)  # Gen4 x16, 31.5 GB/s
    assert link["source"] == "nvidia collector, GPU 2 by uuid: PCIe Gen4 x16, the most device and slot allow"
    assert (link["gpu_index"], link["gpu_uuid"]) == ("2", devices[2].uuid)
    # The user's figure replaces the value, not the identity the collector found.
    assert flagged == {**link, "bytes_per_second": 50e9, "source": "--link-max-gbps"}
