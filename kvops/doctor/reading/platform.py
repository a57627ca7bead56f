"""What the machine doctor runs on looks like: GPU vendor, memory, /dev/shm, memlock, kernel, ROCm env.

Every probe returns None when it cannot tell, and the report says "could not check" — a missing
library or file is never an error. Paths are parameters so tests hand in a fixture tree, as
node_exporter's --path.procfs does.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_PCI_VENDORS = {"0x10de": "nvidia", "0x1002": "amd"}
_ENV_PREFIXES = ("VLLM_ROCM_", "AITER_", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "VLLM_USE_")


@dataclass
class Platform:
    vendor: str | None = None  # nvidia | amd | none (no GPU seen) | None (could not check)
    gpu_count: int | None = None
    driver: str | None = None
    gpu_memory_bytes: int | None = None  # per GPU, from nvml/amdsmi when installed
    host_ram_bytes: int | None = None
    memory_limit_bytes: int | None = None  # cgroup v2 memory.max, when set
    shm_total_bytes: int | None = None
    shm_free_bytes: int | None = None
    memlock_bytes: int | None = None  # -1 = unlimited
    kernel: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    def kernel_version(self) -> tuple[int, int] | None:
        if not self.kernel:
            return None
        parts = self.kernel.split(".")
        try:
            return int(parts[0]), int("".join(c for c in parts[1] if "0" <= c <= "9") or 0)
        except (IndexError, ValueError):
            return None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _meminfo_total(proc: Path) -> int | None:
    text = _read(proc / "meminfo")
    for line in (text or "").splitlines():
        if line.startswith("MemTotal:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isascii() and fields[1].isdigit():
                return int(fields[1]) * 1024
    return None


def _gpu_vendor(sys_root: Path) -> tuple[str | None, int | None]:
    drm = sys_root / "class" / "drm"
    if not drm.is_dir():
        return None, None
    seen: dict[str, int] = {}
    for card in sorted(drm.glob("card[0-9]*")):
        if "-" in card.name:  # connectors such as card0-HDMI-A-1
            continue
        vendor = _PCI_VENDORS.get((_read(card / "device" / "vendor") or "").lower())
        if vendor:
            seen[vendor] = seen.get(vendor, 0) + 1
    if not seen:
        nvidia = sorted(Path("/dev").glob("nvidia[0-9]*")) if sys_root == Path("/sys") else []
        return ("nvidia", len(nvidia)) if nvidia else ("none", 0)
    vendor = max(seen, key=lambda v: seen[v])
    return vendor, seen[vendor]


def _driver(proc: Path, sys_root: Path, vendor: str | None) -> str | None:
    if vendor == "nvidia":
        text = _read(proc / "driver" / "nvidia" / "version")
        if text:
            for word in text.split():
                if word[:1].isascii() and word[:1].isdigit() and "." in word:
                    return word
    if vendor == "amd":
        return _read(sys_root / "module" / "amdgpu" / "version")
    return None


def _gpu_memory(vendor: str | None) -> int | None:
    """Per-GPU memory from the vendor library, when it is installed and a device answers."""
    try:
        if vendor == "nvidia":
            import pynvml

            pynvml.nvmlInit()
            try:
                return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).total)
            finally:
                pynvml.nvmlShutdown()
        if vendor == "amd":
            import amdsmi

            amdsmi.amdsmi_init()
            try:
                handle = amdsmi.amdsmi_get_processor_handles()[0]
                return int(amdsmi.amdsmi_get_gpu_memory_total(handle, amdsmi.AmdSmiMemoryType.VRAM))
            finally:
                amdsmi.amdsmi_shut_down()
    except Exception:  # any library or driver failure means "could not check", never a crash
        return None
    return None


def _cgroup_limit(sys_root: Path) -> int | None:
    text = _read(sys_root / "fs" / "cgroup" / "memory.max")
    return int(text) if text and text.isascii() and text.isdigit() else None


def probe(
    proc: Path = Path("/proc"),
    sys_root: Path = Path("/sys"),
    shm: Path = Path("/dev/shm"),
    environ: Mapping[str, str] | None = None,
    query_gpu_library: bool = True,
) -> Platform:
    """Look at this machine. Nothing here raises: unknown stays None."""
    env = os.environ if environ is None else environ
    plat = Platform()
    plat.vendor, plat.gpu_count = _gpu_vendor(sys_root)
    plat.driver = _driver(proc, sys_root, plat.vendor)
    if query_gpu_library:
        plat.gpu_memory_bytes = _gpu_memory(plat.vendor)
    plat.host_ram_bytes = _meminfo_total(proc)
    plat.memory_limit_bytes = _cgroup_limit(sys_root)
    try:
        st = os.statvfs(shm)
        plat.shm_total_bytes = st.f_blocks * st.f_frsize
        plat.shm_free_bytes = st.f_bavail * st.f_frsize
    except OSError:
        pass
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        plat.memlock_bytes = -1 if soft == resource.RLIM_INFINITY else int(soft)
    except (OSError, ValueError):
        pass
    plat.kernel = _read(proc / "sys" / "kernel" / "osrelease")
    plat.env = {k: v for k, v in sorted(env.items()) if k.startswith(_ENV_PREFIXES)}
    return plat


def describe(plat: Platform) -> list[str]:
    """One line per probe, 'could not check' where it could not."""

    def gib(n: int | None) -> str:
        return "could not check" if n is None else f"{n / 2**30:.1f} GiB"

    memlock = plat.memlock_bytes
    lines = [
        f"GPU vendor: {plat.vendor or 'could not check'}"
        + (f" ({plat.gpu_count} devices)" if plat.gpu_count else ""),
        f"GPU driver: {plat.driver or 'could not check'}",
        f"GPU memory: {gib(plat.gpu_memory_bytes)}",
        f"host RAM: {gib(plat.host_ram_bytes)}"
        + (f" (cgroup limit {gib(plat.memory_limit_bytes)})" if plat.memory_limit_bytes else ""),
        f"/dev/shm: {gib(plat.shm_free_bytes)} free of {gib(plat.shm_total_bytes)}",
        "ulimit -l: "
        + (
            "could not check" if memlock is None else "unlimited" if memlock < 0 else f"{memlock // 1024} KiB"
        ),
        f"kernel: {plat.kernel or 'could not check'}",
        "ROCm/AITER env: " + (", ".join(f"{k}={v}" for k, v in plat.env.items()) or "none set"),
    ]
    return lines
