"""AMD GPUs through AMD SMI (`amdsmi`, which needs ROCm's libamd_smi.so).

Per GPU: identity, VRAM and GTT (host memory mapped for the GPU) in bytes, the gpu-metrics
table's PCIe link, replay count, XGMI read/write per link (KB) and GFX activity, the max
link from amdsmi_get_pcie_info, per-process VRAM, and PCIe throughput from
amdsmi_get_gpu_pci_throughput on a background thread (it sleeps 1 s in the kernel).
Facts and quirks: docs/research/hardware.md §2.

`import amdsmi` without ROCm prints two lines to stdout and raises KeyError: the import
runs with stdout captured and any failure becomes AmdSmiUnavailable, one line. Values
may be the string "N/A" (or lists holding it): those are unknown, never 0.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import threading
from typing import Any

from kvops.collectors import linkspeed, numa
from kvops.collectors.library import VendorLibrary
from kvops.collectors.query import Failure, ValueQuery
from kvops.collectors.sampler import BackgroundSampler, Rates
from kvops.snapshot import GpuSample

log = logging.getLogger(__name__)

_KB = 1024

# Unit of the metrics table's pcie_bandwidth_acc/_inst by table version (format.content):
# amdsmi.h documents both as "GB/sec" from v1.4, the version that added them (MI300-class
# firmware); a version not listed here is exported with unit="unknown" rather than guessed.
PCIE_BANDWIDTH_UNIT: dict[str, str] = {
    "1.4": "GB/s",
    "1.5": "GB/s",
    "1.6": "GB/s",
    "1.7": "GB/s",
    "1.8": "GB/s",
}
# amdsmi_link_type_t -> the link_type label
_LINK_TYPES = {0: "internal", 1: "pcie", 2: "xgmi", 3: "not_applicable", 4: "unknown"}
# amdsmi_get_pcie_info's pcie_metric counters -> kvops_gpu_host_link_errors_total's counter label
_PCIE_HEALTH = {
    "pcie_l0_to_recovery_count": "l0_to_recovery",
    "pcie_nak_sent_count": "naks_sent",
    "pcie_nak_received_count": "naks_received",
}


class AmdSmiUnavailable(RuntimeError):
    """AMD SMI cannot be used on this host; str() is one line for the log."""


def _num(value: Any) -> float | None:
    """amdsmi's value as a float, or None for "N/A", bools, NaN, ±Inf and anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number + 0.0 if math.isfinite(number) else None  # + 0.0: -0 is 0


def _import_amdsmi() -> Any:
    """The amdsmi module, with whatever it prints on import kept off our stdout."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured):
            import amdsmi
    except ImportError:
        from kvops.collectors.gpu_presence import amd_present

        if not amd_present():  # nothing to install for: no AMD device on this host
            raise AmdSmiUnavailable("no AMD GPU on this host (no /dev/kfd, no 0x1002 DRM device)") from None
        from kvops.install_hint import install_command

        raise AmdSmiUnavailable(f"amdsmi is not installed ({install_command('amd')})") from None
    except Exception:  # KeyError('libamd_smi.so') and the like: the library did not load
        printed = " ".join(captured.getvalue().split())
        log.debug("import amdsmi: %s", printed)
        raise AmdSmiUnavailable("AMD SMI library (libamd_smi.so) not found (no ROCm on this host)") from None
    return amdsmi


def _fill_host_link(s: GpuSample) -> None:
    """An AMD GPU's host link is PCIe: its maximum and the sampler's rates under kind="pcie"
    (upper bounds: packets x maximum payload), and the replay counter beside the health ones."""
    s.host_link_kind = "pcie"
    for into, value in (
        (s.host_link_max_bytes_per_second, s.pcie_link_max_bytes_per_second),
        (s.host_link_tx_bytes_per_second, s.pcie_tx_bytes_per_second),
        (s.host_link_rx_bytes_per_second, s.pcie_rx_bytes_per_second),
    ):
        if value is not None:
            into["pcie"] = value
    if s.pcie_replays is not None:
        s.host_link_errors["replay"] = s.pcie_replays


def _load_amdsmi() -> Any:
    amdsmi = _import_amdsmi()
    try:
        amdsmi.amdsmi_init(amdsmi.AmdSmiInitFlags.INIT_AMD_GPUS)
    except amdsmi.AmdSmiException as e:
        raise AmdSmiUnavailable(f"AMD SMI init failed: {_error_line(amdsmi, e)}") from None
    return amdsmi


def _error_line(amdsmi: Any, e: Exception) -> str:
    if isinstance(e, amdsmi.AmdSmiLibraryException):
        return str(e.get_error_info(detailed=False))
    return " ".join(str(e).split()) or type(e).__name__


class AmdCollector:
    """Collects one GpuSample per AMD GPU. Construction never raises or imports amdsmi."""

    name = "amd"

    def __init__(self, throughput_interval: float = 5.0) -> None:
        self._throughput_interval = throughput_interval
        self._library = VendorLibrary(_load_amdsmi, AmdSmiUnavailable)
        self._amdsmi: Any = None
        self._lock = threading.Lock()
        self._values = ValueQuery("amdsmi", self._classify, lambda e: _error_line(self._amdsmi, e), log)
        self._query = self._values.ask  # fn(*args), or None where amdsmi would not say
        self._identity: dict[str, tuple[str | None, str | None]] = {}
        self._numa_node: dict[str, int | None] = {}
        self.sysfs_root = "/"
        self._sampler: BackgroundSampler | None = None

    def _classify(self, e: Exception) -> Failure:
        amdsmi = self._amdsmi
        if (
            isinstance(e, amdsmi.AmdSmiLibraryException)
            and e.get_error_code() == amdsmi.amdsmi_wrapper.AMDSMI_STATUS_NOT_SUPPORTED
        ):
            return Failure.UNSUPPORTED
        return Failure.TRANSIENT  # a library or binding-level error: this value only

    def collect(self) -> list[GpuSample]:
        with self._lock:
            amdsmi = self._amdsmi = self._library.get()
            try:
                handles = amdsmi.amdsmi_get_processor_handles()
            except amdsmi.AmdSmiException as e:
                raise AmdSmiUnavailable(f"AMD SMI could not list GPUs: {_error_line(amdsmi, e)}") from None
            samples = [self._sample(str(i), h) for i, h in enumerate(handles)]
            if self._sampler is None and samples:
                self._sampler = BackgroundSampler(
                    self._pci_throughput, self._throughput_interval, "kvops-amd-pcie"
                )
            if self._sampler is not None:
                self._sampler.want({s.uuid: h for s, h in zip(samples, handles, strict=True)})
                for s in samples:
                    s.pcie_tx_bytes_per_second, s.pcie_rx_bytes_per_second = self._sampler.rates(s.uuid)
            for s in samples:
                _fill_host_link(s)
            return samples

    def _sample(self, index: str, h: Any) -> GpuSample:
        a = self._amdsmi
        key = f"index {index}"
        uuid = self._query(key, "uuid", a.amdsmi_get_gpu_device_uuid, h) or ""
        if uuid:
            key = uuid
        if key not in self._identity:
            asic = self._query(key, "asic", a.amdsmi_get_gpu_asic_info, h) or {}
            name = asic.get("market_name")
            self._identity[key] = (
                name if isinstance(name, str) and name != "N/A" else None,
                self._query(key, "bdf", a.amdsmi_get_gpu_device_bdf, h),
            )
        name, bdf = self._identity[key]
        s = GpuSample(index=index, uuid=uuid, vendor="amd", name=name, pci_bus_id=bdf)

        vram, gtt = a.AmdSmiMemoryType.VRAM, a.AmdSmiMemoryType.GTT
        s.memory_total_bytes = _num(self._query(key, "vram_total", a.amdsmi_get_gpu_memory_total, h, vram))
        s.memory_used_bytes = _num(self._query(key, "vram_used", a.amdsmi_get_gpu_memory_usage, h, vram))
        for what, fn in (
            ("gtt_total", a.amdsmi_get_gpu_memory_total),
            ("gtt_used", a.amdsmi_get_gpu_memory_usage),
        ):
            value = _num(self._query(key, what, fn, h, gtt))
            if value is not None:
                s.extra[f"{what}_bytes"] = value

        m = self._query(key, "metrics", a.amdsmi_get_gpu_metrics_info, h) or {}
        gfx = _num(m.get("average_gfx_activity"))
        s.utilization = None if gfx is None else gfx / 100.0
        s.pcie_replays = _num(m.get("pcie_replay_count_acc"))
        width, speed = _num(m.get("pcie_link_width")), _num(m.get("pcie_link_speed"))  # speed in 0.1 GT/s
        gt_per_s = None if speed is None else speed / 10
        s.pcie_link_width = None if width is None else int(width)
        s.pcie_link_gen = linkspeed.generation_from_rate(gt_per_s)
        self._pcie_bandwidth(s, m)
        for per_link, values in (
            (s.xgmi_read_bytes, m.get("xgmi_read_data_acc")),
            (s.xgmi_write_bytes, m.get("xgmi_write_data_acc")),
        ):
            for link, kb in enumerate(values if isinstance(values, list) else []):
                if _num(kb) is not None:
                    per_link[str(link)] = float(kb) * _KB  # accumulated KB per link

        pcie = self._query(key, "pcie_info", a.amdsmi_get_pcie_info, h) or {}
        static = pcie.get("pcie_static") or {}
        max_width, max_speed = _num(static.get("max_pcie_width")), _num(static.get("max_pcie_speed"))
        # max_pcie_speed has no unit in the header; amd-smi shows e.g. 32000 as 32 GT/s (MT/s)
        max_gt = None if max_speed is None else (max_speed / 1000 if max_speed > 1000 else max_speed)
        s.pcie_link_width_max = None if max_width is None else int(max_width)
        s.pcie_link_gen_max = linkspeed.generation_from_rate(max_gt)
        metric = pcie.get("pcie_metric") or {}
        for field_name, counter in _PCIE_HEALTH.items():
            count = _num(metric.get(field_name))
            if count is not None:
                s.host_link_errors[counter] = count
        if key not in self._numa_node:  # fixed while the driver runs: read once
            node = _num(self._query(key, "numa", a.amdsmi_get_gpu_topo_numa_affinity, h))
            if node is None or node < 0:
                node = numa.gpu_numa_node(bdf, self.sysfs_root)
            self._numa_node[key] = None if node is None or node < 0 else int(node)
        s.numa_node = self._numa_node[key]
        s.pcie_link_max_bytes_per_second = linkspeed.bytes_per_second_from_rate(
            gt_per_s, s.pcie_link_width
        ) or linkspeed.bytes_per_second_from_rate(max_gt, s.pcie_link_width_max)

        links = self._query(key, "link_metrics", a.amdsmi_get_link_metrics, h) or {}
        count = _num(links.get("num_links"))
        for i, link in enumerate((links.get("links") or [])[: int(count or 0)]):  # 8 entries, num_links used
            read, write = _num(link.get("read")), _num(link.get("write"))
            s.peer_links.append((
                str(i), str(link.get("bdf", "")), _LINK_TYPES.get(link.get("link_type"), "unknown"),
                None if read is None else read * _KB, None if write is None else write * _KB,
            ))  # fmt: skip

        for p in self._query(key, "processes", a.amdsmi_get_gpu_process_list, h) or []:
            usage = p.get("memory_usage") or {}
            s.processes[int(p["pid"])] = _num(usage.get("vram_mem"))
        return s

    @staticmethod
    def _pcie_bandwidth(s: GpuSample, m: dict[str, Any]) -> None:
        """The metrics table's combined PCIe bandwidth, raw with its unit; absent where "N/A"."""
        for figure in ("acc", "inst"):
            value = _num(m.get(f"pcie_bandwidth_{figure}"))
            if value is not None:
                s.amd_pcie_bandwidth[figure] = value
        if s.amd_pcie_bandwidth:
            major, minor = (
                _num(m.get("common_header.format_revision")),
                _num(m.get("common_header.content_revision")),
            )
            version = None if major is None or minor is None else f"{int(major)}.{int(minor)}"
            s.amd_metrics_table = version
            s.amd_pcie_bandwidth_unit = PCIE_BANDWIDTH_UNIT.get(version or "", "unknown")

    def _pci_throughput(self, handle: Any) -> Rates:
        """(sent, received) bytes/s from amdgpu's pcie_bw; blocks 1 s, sampler thread only.

        The counts are packets: bytes = count x max_pkt_sz, as amd-smi's CLI computes.
        """
        t = self._amdsmi.amdsmi_get_gpu_pci_throughput(handle)
        sent, received, size = _num(t.get("sent")), _num(t.get("received")), _num(t.get("max_pkt_sz"))
        if size is None:
            return None, None
        return (None if sent is None else sent * size, None if received is None else received * size)

    def close(self) -> None:
        with self._lock:
            if self._sampler is not None:
                self._sampler.close()
                self._sampler = None
            self._library.shut_down(lambda amdsmi: amdsmi.amdsmi_shut_down(), "amdsmi_shut_down")
