"""Whether this host has an NVIDIA or AMD GPU, read from the kernel without a vendor library,
so a collector whose Python package is missing advises installing it only where it would
find a GPU (a GPU-less laptop running `kvops top` on the simulator is told nothing to install).

Evidence, either of: the driver's device nodes (/dev/nvidia0..., /dev/kfd for ROCm), or a
DRM device whose PCI vendor id is the vendor's (0x10de NVIDIA, 0x1002 AMD) under
/sys/class/drm (present without the vendor's driver loaded).
"""

from __future__ import annotations

import glob
import os

NVIDIA_VENDOR = "0x10de"
AMD_VENDOR = "0x1002"


def _drm_vendors(root: str) -> set[str]:
    vendors = set()
    for path in glob.glob(os.path.join(root, "sys/class/drm/*/device/vendor")):
        try:
            with open(path) as f:
                vendors.add(f.read(16).strip().lower())
        except OSError:
            continue
    return vendors


def nvidia_present(root: str = "/") -> bool:
    nodes = glob.glob(os.path.join(root, "dev/nvidia[0-9]*"))
    return bool(nodes) or NVIDIA_VENDOR in _drm_vendors(root)


def amd_present(root: str = "/") -> bool:
    return os.path.exists(os.path.join(root, "dev/kfd")) or AMD_VENDOR in _drm_vendors(root)
