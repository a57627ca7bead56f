"""NVIDIA GPUs through NVML (`nvidia-ml-py`, module `pynvml`).

Per GPU: identity, memory (v2 struct: `used` excludes driver-reserved memory), PCIe byte
counters (field values 197/198, driver r555+), else the driver's 20 ms throughput sample
taken on a background thread, link generation/width -> link max, PCIe replays, NVLink
data counters per link (NVLink5's byte fields where the KiB ones are not), utilisation,
per-process GPU memory, the GPU's NUMA node, and the host link (nvidia_host_link.py: PCIe, or
NVLink-C2C measured by GPM on Grace, with health counters). Facts and quirks:
docs/research/hardware.md §1.

Errors: one failing NVML call degrades that one value (None); NotSupported and
FunctionNotFound are remembered per GPU and not asked again; GPU_IS_LOST drops that GPU
from this collection and leaves the others; a missing library or driver makes collect()
raise NvmlUnavailable with one line, which the exporter reports as collector_success 0.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from kvops.collectors import linkspeed, numa
from kvops.collectors import nvidia_host_link as host_link
from kvops.collectors.library import VendorLibrary
from kvops.collectors.query import Failure, ValueQuery
from kvops.collectors.sampler import BackgroundSampler, Rates
from kvops.snapshot import GpuSample

log = logging.getLogger(__name__)

# NVML field ids (nvml.h, NVML_API_VERSION 13)
FI_NVLINK_LINK_COUNT = 91
FI_NVLINK_THROUGHPUT_DATA_TX = 138  # cumulative KiB per link, scopeId = link
FI_NVLINK_THROUGHPUT_DATA_RX = 139
FI_NVLINK_COUNT_XMIT_BYTES = 202  # NVLink5 (Blackwell): bytes per link, where 138/139 are not
FI_NVLINK_COUNT_RCV_BYTES = 204
FI_PCIE_COUNT_TX_BYTES = 197  # cumulative bytes, "Value can be wrapped"
FI_PCIE_COUNT_RX_BYTES = 198

# nvmlValueType_t -> (union member, width in bits for wrap, signed)
_VALUE_TYPES: dict[int, tuple[str, int, bool]] = {
    0: ("dVal", 0, True),
    1: ("uiVal", 32, False),
    2: ("ulVal", 64, False),
    3: ("ullVal", 64, False),
    4: ("sllVal", 64, True),
    5: ("siVal", 32, True),
    6: ("usVal", 16, False),
}


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used on this host; str() is one line for the log."""


class WrappingCounter:
    """Turns a raw device counter that may wrap (or reset) into a monotonic total.

    The first reading is taken as is, so totals equal what the driver reports until the
    first wrap. A narrow unsigned counter (< 64 bits) that goes down has wrapped: add the
    modulus. A 64-bit or signed one that goes down was reset (driver reload): count the
    new raw value from 0, as Prometheus's rate() would.
    """

    def __init__(self) -> None:
        self.last_raw: float | None = None
        self.total: float | None = None

    def update(self, raw: float, bits: int = 64, signed: bool = False) -> float:
        if self.last_raw is None or self.total is None:
            self.total = raw
        else:
            delta = raw - self.last_raw
            if delta < 0:
                delta = delta + 2**bits if (not signed and 0 < bits < 64) else raw
            self.total += delta
        self.last_raw = raw
        return self.total


class NvidiaCollector:
    """Collects one GpuSample per NVIDIA GPU. Construction never raises or loads NVML."""

    name = "nvidia"

    def __init__(self, throughput_interval: float = 5.0) -> None:
        self._throughput_interval = throughput_interval
        self._library = VendorLibrary(_load_nvml, NvmlUnavailable)
        self._nvml: Any = None
        self._lock = threading.Lock()
        self._values = ValueQuery("NVML", self._classify, logger=log)
        self._query = self._values.ask  # fn(*args), or None if NVML would not say; GPU_IS_LOST raises
        self._counters: dict[tuple[str, str], WrappingCounter] = {}
        self._nvlink_count: dict[str, int] = {}
        self._identity: dict[str, tuple[str | None, str | None]] = {}
        # The link a GPU and its slot can train to: fixed while the driver runs, so read until
        # NVML gives both (2 of a GPU's 11 calls a scrape otherwise).
        self._link_max: dict[str, tuple[int, int]] = {}
        self._sampler: BackgroundSampler | None = None
        # host link (nvidia_host_link.py): static facts per GPU, GPM windows where GPM answers
        self._link_facts: dict[str, host_link.LinkFacts] = {}
        self._numa_node: dict[str, int | None] = {}
        self._scrape_ids: dict[str, list[tuple[int, int]]] = {}  # per GPU, the fields a scrape asks
        self.sysfs_root = "/"  # where /sys is (tests point it at a recorded tree)
        self._gpm: dict[str, host_link.GpmWindow] = {}
        # GPU count, handles and UUIDs are fixed while NVML is initialised (nvml.h: a handle is
        # valid until nvmlShutdown; no hot-plug without it): asked once, not 1 + 2 per GPU calls
        # a scrape. A lost GPU still fails the calls made with its handle.
        self._devices: list[tuple[Any, str] | None] | None = None

    # --- per value ---------------------------------------------------------------------
    def _classify(self, e: Exception) -> Failure:
        nvml = self._nvml
        if isinstance(e, nvml.NVMLError_GpuIsLost):
            return Failure.RAISE
        unsupported = (
            nvml.NVMLError_NotSupported,
            nvml.NVMLError_FunctionNotFound,
            nvml.NVMLError_ArgumentVersionMismatch,
            nvml.NVMLLibraryMismatchError,
        )
        # NoPermission, Timeout, Unknown...: this value only, this time
        return Failure.UNSUPPORTED if isinstance(e, unsupported) else Failure.TRANSIENT

    def _counter(self, uuid: str, what: str, raw: float, bits: int, signed: bool) -> float:
        c = self._counters.setdefault((uuid, what), WrappingCounter())
        return c.update(raw, bits, signed)

    # --- collection --------------------------------------------------------------------
    def collect(self) -> list[GpuSample]:
        with self._lock:
            nvml = self._nvml = self._library.get()
            if self._devices is None:
                try:
                    self._devices = [None] * nvml.nvmlDeviceGetCount()
                except nvml.NVMLError as e:
                    raise NvmlUnavailable(f"NVML could not count GPUs: {e}") from None
            devices = self._devices
            samples: list[GpuSample] = []
            fallback: dict[str, Any] = {}
            for index, known in enumerate(devices):
                try:
                    if known is None:  # asked again until NVML hands it out
                        handle = nvml.nvmlDeviceGetHandleByIndex(index)
                        known = devices[index] = (handle, nvml.nvmlDeviceGetUUID(handle))
                    handle, uuid = known
                    sample, needs_sampling = self._sample(str(index), handle, uuid)
                except nvml.NVMLError_GpuIsLost:
                    self._values.warn_once(
                        f"index {index}", "lost", f"NVIDIA GPU {index} is lost (fell off the bus?)"
                    )
                    continue
                except nvml.NVMLError as e:
                    self._values.warn_once(f"index {index}", "handle", f"NVIDIA GPU {index} unreadable: {e}")
                    continue
                if needs_sampling:
                    fallback[sample.uuid] = handle
                    if self._sampler is not None:
                        tx, rx = self._sampler.rates(sample.uuid)
                        sample.pcie_tx_bytes_per_second, sample.pcie_rx_bytes_per_second = tx, rx
                self._fill_host_link(sample)
                samples.append(sample)
            if fallback and self._sampler is None:
                self._sampler = BackgroundSampler(
                    self._pcie_throughput, self._throughput_interval, "kvops-nvml-pcie"
                )
            if self._sampler is not None:
                self._sampler.want(fallback)
            return samples

    def _sample(self, index: str, h: Any, uuid: str) -> tuple[GpuSample, bool]:
        nvml = self._nvml
        if uuid not in self._identity:
            pci = self._query(uuid, "pci", nvml.nvmlDeviceGetPciInfo, h)
            self._identity[uuid] = (self._query(uuid, "name", nvml.nvmlDeviceGetName, h), pci and pci.busId)
        name, bus_id = self._identity[uuid]
        s = GpuSample(index=index, uuid=uuid, vendor="nvidia", name=name, pci_bus_id=bus_id)
        if uuid not in self._numa_node:  # fixed while the driver runs: read once
            node = numa.gpu_numa_node(bus_id, self.sysfs_root)
            numa_node_id = getattr(nvml, "nvmlDeviceGetNumaNodeId", None)  # nvidia-ml-py 12.550+
            if node is None and numa_node_id is not None:  # Grace: the GPU memory is a node (nvml.h)
                node = self._query(uuid, "numa", numa_node_id, h)
            self._numa_node[uuid] = node if node is None or node >= 0 else None
        s.numa_node = self._numa_node[uuid]

        mem = self._query(uuid, "memory_v2", nvml.nvmlDeviceGetMemoryInfo, h, nvml.nvmlMemory_v2)
        if mem is None and self._values.unsupported(uuid, "memory_v2"):
            mem = self._query(uuid, "memory", nvml.nvmlDeviceGetMemoryInfo, h)  # driver before r510
        if mem is not None:
            s.memory_total_bytes, s.memory_used_bytes = float(mem.total), float(mem.used)

        util = self._query(uuid, "utilization", nvml.nvmlDeviceGetUtilizationRates, h)
        if util is not None:
            s.utilization = util.gpu / 100.0

        needs_sampling = self._fields(uuid, h, s)

        s.pcie_link_gen = self._query(uuid, "gen", nvml.nvmlDeviceGetCurrPcieLinkGeneration, h)
        s.pcie_link_width = self._query(uuid, "width", nvml.nvmlDeviceGetCurrPcieLinkWidth, h)
        link_max = self._link_max.get(uuid)
        if link_max is None:
            gen_max = self._query(uuid, "gen_max", nvml.nvmlDeviceGetMaxPcieLinkGeneration, h)
            width_max = self._query(uuid, "width_max", nvml.nvmlDeviceGetMaxPcieLinkWidth, h)
            if gen_max is not None and width_max is not None:
                self._link_max[uuid] = (gen_max, width_max)
        else:
            gen_max, width_max = link_max
        s.pcie_link_gen_max, s.pcie_link_width_max = gen_max, width_max
        # current link: what transfers get now; it drops at idle (ASPM), so fall back to max
        s.pcie_link_max_bytes_per_second = linkspeed.bytes_per_second(
            s.pcie_link_gen, s.pcie_link_width
        ) or linkspeed.bytes_per_second(s.pcie_link_gen_max, s.pcie_link_width_max)

        replays = self._query(uuid, "replay", nvml.nvmlDeviceGetPcieReplayCounter, h)
        if replays is not None:
            s.pcie_replays = float(replays)

        procs = self._query(uuid, "processes", nvml.nvmlDeviceGetComputeRunningProcesses, h)
        for p in procs or []:
            s.processes[int(p.pid)] = None if p.usedGpuMemory is None else float(p.usedGpuMemory)
        return s, needs_sampling

    def _fields(self, uuid: str, h: Any, s: GpuSample) -> bool:
        """Read PCIe and NVLink counters in one nvmlDeviceGetFieldValues call.

        Returns True when the PCIe byte counters are missing and the sampler should cover.
        """
        if uuid not in self._nvlink_count or uuid not in self._link_facts:
            self._read_static(uuid, h)
        facts = self._link_facts.get(uuid)
        health = host_link.health_field_ids(facts) if facts is not None else {}
        ids = self._scrape_ids.get(uuid)
        if ids is None:  # made again only when a field turns out unsupported (_field_values)
            ids = self._scrape_ids[uuid] = self._field_ids(uuid, health)
        got = self._field_values(uuid, h, ids) if ids else {}
        for (fid, scope), (value, bits, signed) in got.items():
            total = self._counter(uuid, f"{fid}.{scope}", value, bits, signed)
            if fid == FI_PCIE_COUNT_TX_BYTES:
                s.pcie_tx_bytes = total
            elif fid == FI_PCIE_COUNT_RX_BYTES:
                s.pcie_rx_bytes = total
            elif fid == FI_NVLINK_THROUGHPUT_DATA_TX:
                s.nvlink_tx_bytes[str(scope)] = total * 1024  # KiB
            elif fid == FI_NVLINK_THROUGHPUT_DATA_RX:
                s.nvlink_rx_bytes[str(scope)] = total * 1024
            elif fid == FI_NVLINK_COUNT_XMIT_BYTES:
                s.nvlink_tx_bytes[str(scope)] = total  # bytes
            elif fid == FI_NVLINK_COUNT_RCV_BYTES:
                s.nvlink_rx_bytes[str(scope)] = total
            elif fid in health:
                s.host_link_errors[health[fid]] = total
        counters_missing = s.pcie_tx_bytes is None or s.pcie_rx_bytes is None
        gpm_wanted = facts is not None and facts.gpm and (facts.kind == "c2c" or counters_missing)
        if gpm_wanted and facts is not None and self._gpm_rates(uuid, h, s, facts) and facts.kind == "pcie":
            return False  # GPM measures PCIe: no 20 ms sampler needed
        return counters_missing

    def _field_ids(self, uuid: str, health: dict[int, str]) -> list[tuple[int, int]]:
        """The (field, scope) pairs a scrape asks for: those not known to be unsupported."""
        ids: list[tuple[int, int]] = [
            (f, 0)
            for f in (FI_PCIE_COUNT_TX_BYTES, FI_PCIE_COUNT_RX_BYTES)
            if not self._values.unsupported(uuid, f"field{f}")
        ]
        nvlink5 = self._values.unsupported(uuid, f"field{FI_NVLINK_THROUGHPUT_DATA_TX}")
        nvlink_ids = (
            (FI_NVLINK_COUNT_XMIT_BYTES, FI_NVLINK_COUNT_RCV_BYTES)
            if nvlink5
            else (FI_NVLINK_THROUGHPUT_DATA_TX, FI_NVLINK_THROUGHPUT_DATA_RX)
        )
        for link in range(self._nvlink_count.get(uuid, 0)):
            ids += [(fid, link) for fid in nvlink_ids if not self._values.unsupported(uuid, f"field{fid}")]
        ids += [(f, 0) for f in health if not self._values.unsupported(uuid, f"field{f}")]
        return ids

    def _read_static(self, uuid: str, h: Any) -> None:
        """NVLink and C2C link counts, C2C maximum, GPM support: one field call, once per GPU."""
        nvml = self._nvml
        got = self._field_values(uuid, h, [(FI_NVLINK_LINK_COUNT, 0), *host_link.static_field_ids()])
        links = got.get((FI_NVLINK_LINK_COUNT, 0))
        if links is not None:
            self._nvlink_count[uuid] = int(links[0])
        elif self._values.unsupported(uuid, f"field{FI_NVLINK_LINK_COUNT}"):
            self._nvlink_count[uuid] = 0  # no NVLink on this GPU; a transient error asks again
        c2c_said = (host_link.FI_C2C_LINK_COUNT, 0) in got
        if not c2c_said and not self._values.unsupported(uuid, f"field{host_link.FI_C2C_LINK_COUNT}"):
            return  # a transient failure: ask again next scrape
        self._scrape_ids.pop(uuid, None)
        facts = host_link.facts_from(got)
        facts.gpm = host_link.gpm_supported(nvml, h)
        self._link_facts[uuid] = facts
        if facts.kind == "c2c":
            if facts.max_bytes_per_second is None:
                self._say(uuid, "c2c_max", "NVLink-C2C host link, maximum unknown (field 172 not answered)")
            if not facts.gpm:
                self._say(
                    uuid,
                    "c2c_gpm",
                    "NVLink-C2C host link, GPM not supported: its traffic is not measured and the offload "
                    "cross-check stays unknown",
                )

    def _say(self, uuid: str, what: str, message: str) -> None:
        self._values.warn_once(uuid, what, f"NVIDIA GPU {uuid}: {message}")

    def _gpm_rates(self, uuid: str, h: Any, s: GpuSample, facts: host_link.LinkFacts) -> bool:
        """This scrape's GPM sample and the rates since the last one (no wait); False where
        GPM failed."""
        nvml = self._nvml
        ids = (
            (host_link.GPM_C2C_DATA_TX, host_link.GPM_C2C_DATA_RX)
            if facts.kind == "c2c"
            else (host_link.GPM_PCIE_TX, host_link.GPM_PCIE_RX)
        )
        window = self._gpm.get(uuid)
        try:
            if window is None:
                window = self._gpm[uuid] = host_link.open_window(nvml)
            host_link.gpm_step(nvml, h, window, ids)
        except nvml.NVMLError_GpuIsLost:
            raise
        except nvml.NVMLError as e:
            self._say(uuid, "gpm", f"GPM failed ({e}): no {facts.kind} rates from GPM this time")
            if window is not None:
                window.last_time = None  # start a new window next scrape
            return False
        tx, rx = ids
        if facts.kind == "c2c":
            self._set(s.host_link_tx_bytes, "c2c", window.totals.get(tx))
            self._set(s.host_link_rx_bytes, "c2c", window.totals.get(rx))
            self._set(s.host_link_tx_bytes_per_second, "c2c", window.rates.get(tx))
            self._set(s.host_link_rx_bytes_per_second, "c2c", window.rates.get(rx))
        else:
            s.pcie_tx_bytes_per_second = window.rates.get(tx)
            s.pcie_rx_bytes_per_second = window.rates.get(rx)
        return True

    @staticmethod
    def _set(into: dict[str, float], kind: str, value: float | None) -> None:
        if value is not None:
            into[kind] = value

    def _fill_host_link(self, s: GpuSample) -> None:
        """The host-link series: C2C's were filled from GPM; a PCIe link mirrors the PCIe ones."""
        facts = self._link_facts.get(s.uuid)
        kind = facts.kind if facts is not None else "pcie"
        s.host_link_kind = kind
        if kind == "c2c":
            self._set(s.host_link_max_bytes_per_second, kind, facts.max_bytes_per_second if facts else None)
            return
        self._set(s.host_link_max_bytes_per_second, kind, s.pcie_link_max_bytes_per_second)
        self._set(s.host_link_tx_bytes, kind, s.pcie_tx_bytes)
        self._set(s.host_link_rx_bytes, kind, s.pcie_rx_bytes)
        self._set(s.host_link_tx_bytes_per_second, kind, s.pcie_tx_bytes_per_second)
        self._set(s.host_link_rx_bytes_per_second, kind, s.pcie_rx_bytes_per_second)
        if s.pcie_replays is not None:
            s.host_link_errors["replay"] = s.pcie_replays

    def _field_values(
        self, uuid: str, h: Any, ids: Sequence[int | tuple[int, int]]
    ) -> dict[tuple[int, int], tuple[float, int, bool]]:
        """{(field, scope): (value, bits, signed)} for the entries NVML filled.

        The call succeeds if any entry was populated; each entry has its own nvmlReturn.
        """
        nvml = self._nvml
        values = self._query(uuid, "field_values", nvml.nvmlDeviceGetFieldValues, h, ids)
        out: dict[tuple[int, int], tuple[float, int, bool]] = {}
        for fv in values or []:
            key = (int(fv.fieldId), int(fv.scopeId))
            if fv.nvmlReturn != nvml.NVML_SUCCESS:
                if fv.nvmlReturn == nvml.NVML_ERROR_GPU_IS_LOST:
                    raise nvml.NVMLError_GpuIsLost()
                if fv.nvmlReturn in (nvml.NVML_ERROR_NOT_SUPPORTED, nvml.NVML_ERROR_FUNCTION_NOT_FOUND):
                    self._values.mark_unsupported(uuid, f"field{key[0]}")
                    self._scrape_ids.pop(uuid, None)
                continue
            member, bits, signed = _VALUE_TYPES.get(int(fv.valueType), ("ullVal", 64, False))
            out[key] = (float(getattr(fv.value, member)), bits, signed)
        return out

    def _pcie_throughput(self, handle: Any) -> Rates:
        """Both directions of the driver's 20 ms sample; on the sampler thread only."""
        nvml = self._nvml
        rates: list[float | None] = []
        for counter in (nvml.NVML_PCIE_UTIL_TX_BYTES, nvml.NVML_PCIE_UTIL_RX_BYTES):
            try:
                # NVML says KB/s; like nvitop we read KB as KiB
                rates.append(float(nvml.nvmlDeviceGetPcieThroughput(handle, counter)) * 1024)
            except nvml.NVMLError:
                rates.append(None)
        return rates[0], rates[1]

    def close(self) -> None:
        with self._lock:
            if self._nvml is not None:
                for window in self._gpm.values():
                    host_link.close_window(self._nvml, window)
            self._gpm.clear()
            if self._sampler is not None:
                self._sampler.close()
                self._sampler = None
            self._library.shut_down(lambda nvml: nvml.nvmlShutdown(), "nvmlShutdown")
            self._devices = None  # handles end with nvmlShutdown


def _load_nvml() -> Any:
    try:
        import pynvml
    except ImportError:
        from kvops.collectors.gpu_presence import nvidia_present

        if not nvidia_present():  # nothing to install for: no NVIDIA device on this host
            no_gpu = "no NVIDIA GPU on this host (no /dev/nvidia*, no 0x10de DRM device)"
            raise NvmlUnavailable(no_gpu) from None
        from kvops.install_hint import install_command

        raise NvmlUnavailable(f"nvidia-ml-py is not installed ({install_command('nvidia')})") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        raise NvmlUnavailable(_init_message(pynvml, e)) from None
    return pynvml


def _init_message(nvml: Any, e: Exception) -> str:
    """One line saying why NVML is unusable here."""
    known = {
        nvml.NVML_ERROR_LIBRARY_NOT_FOUND: "NVML library not found (no NVIDIA driver on this host)",
        nvml.NVML_ERROR_DRIVER_NOT_LOADED: "NVIDIA driver not loaded",
        nvml.NVML_ERROR_GPU_NOT_FOUND: "NVML found no supported NVIDIA GPU",
        nvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH: "NVML/driver mismatch (driver upgraded, no reboot?)",
        nvml.NVML_ERROR_NO_PERMISSION: "no permission to use NVML",
    }
    return known.get(getattr(e, "value", None), f"NVML init failed: {e}")
