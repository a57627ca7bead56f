"""The link max a run is held against: --link-max-gbps, else the GPU's hardware collector.

The collectors (kvops/collectors/nvidia.py, amd.py) report every GPU on the machine by
the driver's numbering; torch numbers only the visible ones. So the GPU is matched by
UUID, then PCI address, never by index. A collector that is missing or fails makes the
figure unknown; it never stops the measurement.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import re
from collections.abc import Sequence

from kvops.bench.results import DeviceInfo, LinkMax
from kvops.collectors import linkspeed
from kvops.errors import one_line
from kvops.snapshot import GpuSample

FLAG_SOURCE = "--link-max-gbps"
# backend -> (collector module, class, name)
COLLECTORS: dict[str, tuple[str, str, str]] = {
    "cuda": ("kvops.collectors.nvidia", "NvidiaCollector", "nvidia"),
    "rocm": ("kvops.collectors.amd", "AmdCollector", "amd"),
}

_PCI_RE = re.compile(r"^(?:([0-9a-f]+):)?([0-9a-f]+):([0-9a-f]+)(?:\.[0-9a-f]+)?$")


def normalise_uuid(uuid: str | None) -> str | None:
    """'GPU-58F4...' (NVML) and '58f4...' (torch) compare equal."""
    if not uuid:
        return None
    text = uuid.strip().lower()
    return text.removeprefix("gpu-") or None


def normalise_pci(bus_id: str | None) -> tuple[int, int, int] | None:
    """'00000000:3B:00.0' (NVML), '0000:3b:00.0' (amdsmi), '3b:00' -> (domain, bus, device)."""
    if not bus_id:
        return None
    match = _PCI_RE.match(bus_id.strip().lower())
    if not match:
        return None
    domain, bus, device = match.groups()
    return (int(domain or "0", 16), int(bus, 16), int(device, 16))


def match_gpu(device: DeviceInfo, samples: Sequence[GpuSample]) -> tuple[GpuSample | None, str]:
    """The collector's sample for torch's device, and how it was matched (or why not)."""
    uuid = normalise_uuid(device.uuid)
    if uuid:
        for s in samples:
            if normalise_uuid(s.uuid) == uuid:
                return s, "uuid"
    pci = normalise_pci(device.pci_bus_id)
    if pci:
        for s in samples:
            if normalise_pci(s.pci_bus_id) == pci:
                return s, "pci"
    if len(samples) == 1 and not (uuid or pci):
        # torch gave nothing to match on; the machine's only GPU is the one torch sees.
        return samples[0], "only GPU"
    return None, f"no GPU among {len(samples)} reported matches torch's uuid/PCI address"


def capacity(sample: GpuSample) -> tuple[float | None, str]:
    """What the link should give per direction, and how that was worked out.

    On a C2C GPU (Grace) it is the C2C link's maximum: PCIe carries none of the copies. On PCIe,
    the maximum generation and width the device and slot allow come first: the current
    ones drop while the GPU idles (ASPM), which is when this is read. The collector's own
    figure (current link, else max) is the fallback for collectors that report only it.
    """
    if sample.host_link_kind == "c2c":  # Grace: host copies ride NVLink-C2C, not PCIe (issue 45)
        c2c = sample.host_link_max_bytes_per_second.get("c2c")
        if c2c and c2c > 0:
            return float(c2c), "NVLink-C2C, link count x the driver's per-link bandwidth (NVML field 172)"
        return None, ""
    gen, width = sample.pcie_link_gen_max, sample.pcie_link_width_max
    best = linkspeed.bytes_per_second(gen, width)
    if best:
        return best, f"PCIe Gen{gen} x{width}, the most device and slot allow"
    value = sample.pcie_link_max_bytes_per_second
    if value and value > 0:
        return float(value), "as the collector reports it"
    return None, ""


def from_samples(device: DeviceInfo, samples: Sequence[GpuSample], collector: str) -> LinkMax:
    sample, how = match_gpu(device, samples)
    if sample is None:
        return LinkMax(None, f"{collector} collector: {how}")
    value, detail = capacity(sample)
    if value is None:
        source = f"{collector} collector has no link max for GPU {sample.index}"
    else:
        source = f"{collector} collector, GPU {sample.index} by {how}: {detail}"
    return LinkMax(value, source, gpu_index=sample.index, gpu_uuid=sample.uuid)


def from_collector(device: DeviceInfo) -> LinkMax:
    """Ask the vendor's collector; any failure becomes an unknown link max with the reason."""
    module_name, class_name, name = COLLECTORS.get(device.backend, COLLECTORS["cuda"])
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            return LinkMax(None, f"{name} collector cannot load: {exc}")
        return LinkMax(None, f"no {name} collector in this build; give --link-max-gbps")
    collector = None
    try:
        collector = getattr(module, class_name)()
        samples = collector.collect()
    except Exception as exc:  # a broken driver library must not stop the measurement
        return LinkMax(None, f"{name} collector failed: {one_line(exc, typed=True)}")
    finally:
        close = getattr(collector, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):  # closing a failed library: nothing to add
                close()
    if not isinstance(samples, list) or not all(isinstance(s, GpuSample) for s in samples):
        return LinkMax(None, f"{name} collector returned no GPU samples")
    return from_samples(device, samples, name)


def resolve(device: DeviceInfo, flag_bytes_per_second: float | None) -> LinkMax:
    """The user's figure wins; else the collector's. The collector is asked either way, for
    the GPU's identity (index, UUID) in the driver's numbering."""
    found = from_collector(device)
    if flag_bytes_per_second is not None:
        return dataclasses.replace(found, bytes_per_second=flag_bytes_per_second, source=FLAG_SOURCE)
    return found


def planned(flag_bytes_per_second: float | None) -> str:
    """What --dry-run says about the link max, without touching any driver."""
    if flag_bytes_per_second is not None:
        return f"{flag_bytes_per_second / 1e9:.1f} GB/s per direction (from {FLAG_SOURCE})"
    return "from the GPU's nvidia/amd collector at run time; 'link max unknown' where it has none"
