"""The link an NVIDIA GPU's host copies ride, through NVML (`nvidia-ml-py`), issue 45.

On a PCIe GPU that is PCIe: its byte counters, link maximum and replays are read by
kvops/collectors/nvidia.py as before, and mirrored here under `kind="pcie"`, with the PCIe
health fields (169 L0 -> recovery, 173-182 AER-style counts). On Grace Hopper / Grace
Blackwell the copies ride NVLink-C2C: NVML field 170 counts its links, 172 gives each active
link's bandwidth (MB/s), 231-233 its errors, and GPM (`nvmlGpmMetricsGet`) its data rates
(metrics 102/103, MiB/s). GPM gives a rate between two samples the caller took, so each scrape
takes one sample and asks for the rate since the previous scrape's: no sleep on the scrape
path. Integrated over that interval the rate becomes a byte counter, which the offload
cross-check (kvops/rates.py) compares with the bytes an engine says it loaded.

Static facts (link kind, C2C link count and maximum, GPM support) are read once per GPU; the
health fields ride the collector's one nvmlDeviceGetFieldValues call per GPU per scrape.
What a GPU cannot answer is said once in the log, naming the GPU and what stays unknown.
Only the stub library (tests/collectors/stubs/nvml_stub.c) has answered these calls so far:
docs/collectors.md lists what is verified on silicon.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

FI_C2C_LINK_COUNT = 170
FI_C2C_LINK_GET_MAX_BW = 172  # MB/s per active link ("C2C Link Speed in MBps for active links")

# field id -> the `counter` label of kvops_gpu_host_link_errors_total
PCIE_HEALTH_FIELDS: dict[int, str] = {
    169: "l0_to_recovery",
    173: "correctable_errors",
    174: "naks_received",
    175: "receiver_errors",
    176: "bad_tlp",
    177: "naks_sent",
    178: "bad_dllp",
    179: "non_fatal_errors",
    180: "fatal_errors",
    181: "unsupported_requests",
    182: "lcrc_errors",
}
C2C_HEALTH_FIELDS: dict[int, str] = {231: "c2c_error_interrupts", 232: "c2c_replay", 233: "c2c_replay_b2b"}

# GPM metric ids (nvml.h): MiB/s over the interval between two samples
GPM_PCIE_TX, GPM_PCIE_RX = 20, 21
GPM_C2C_DATA_TX, GPM_C2C_DATA_RX = 102, 103
MIB = float(1 << 20)
MB = 1e6  # NVML's "MBps" for field 172: read as 10^6 bytes (not checked on silicon)


@dataclass
class LinkFacts:
    """What does not change while the driver runs, read on a GPU's first scrape."""

    kind: str  # pcie | c2c
    c2c_links: int = 0
    max_bytes_per_second: float | None = None  # C2C only; PCIe's comes from gen x width
    gpm: bool = False


@dataclass
class GpmWindow:
    """Two GPM samples a GPU alternates between, and what their rates have added up to."""

    samples: list[Any]
    metrics: Any  # a reused c_nvmlGpmMetricsGet_t
    last_time: float | None = None
    totals: dict[int, float] = field(default_factory=dict)  # metric id -> bytes
    rates: dict[int, float] = field(default_factory=dict)  # metric id -> bytes/s, last interval


def static_field_ids() -> list[tuple[int, int]]:
    return [(FI_C2C_LINK_COUNT, 0), (FI_C2C_LINK_GET_MAX_BW, 0)]


def facts_from(got: dict[tuple[int, int], tuple[float, int, bool]]) -> LinkFacts:
    """The link kind and maximum from fields 170/172 (a GPU without C2C answers NOT_SUPPORTED)."""
    links = got.get((FI_C2C_LINK_COUNT, 0))
    count = int(links[0]) if links is not None else 0
    if count <= 0:
        return LinkFacts("pcie")
    per_link = got.get((FI_C2C_LINK_GET_MAX_BW, 0))
    most = count * per_link[0] * MB if per_link is not None and per_link[0] > 0 else None
    return LinkFacts("c2c", c2c_links=count, max_bytes_per_second=most)


def health_field_ids(facts: LinkFacts) -> dict[int, str]:
    return C2C_HEALTH_FIELDS if facts.kind == "c2c" else PCIE_HEALTH_FIELDS


def gpm_supported(nvml: Any, handle: Any) -> bool:
    """nvmlGpmQueryDeviceSupport's answer; False where the call fails (driver before r520) or
    the binding has no GPM (nvidia-ml-py before 11.525)."""
    if not hasattr(nvml, "nvmlGpmQueryDeviceSupport") or not hasattr(nvml, "c_nvmlGpmMetricsGet_t"):
        return False
    try:
        return bool(nvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice)
    except nvml.NVMLError_GpuIsLost:
        raise
    except nvml.NVMLError:
        return False


def open_window(nvml: Any) -> GpmWindow:
    metrics = nvml.c_nvmlGpmMetricsGet_t()
    metrics.version = nvml.NVML_GPM_METRICS_GET_VERSION
    return GpmWindow([nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()], metrics)


def close_window(nvml: Any, window: GpmWindow) -> None:
    for sample in window.samples:
        with contextlib.suppress(nvml.NVMLError):  # shutting down: nothing left to degrade
            nvml.nvmlGpmSampleFree(sample)


def gpm_step(nvml: Any, handle: Any, window: GpmWindow, metric_ids: tuple[int, ...]) -> None:
    """Take this scrape's sample and add the rates since the previous one to the totals.

    Two NVML calls, no wait: the previous scrape's sample is the window's start. A failed
    sample leaves the totals as they are and the next scrape starts a new window.
    """
    now_sample, before = window.samples[1], window.samples[0]
    nvml.nvmlGpmSampleGet(handle, now_sample)
    now = time.monotonic()
    window.samples.reverse()  # this sample starts the next window
    if window.last_time is None:
        window.last_time = now
        for metric in metric_ids:  # counters start at 0 when kvops starts watching
            window.totals.setdefault(metric, 0.0)
        return
    seconds, window.last_time = now - window.last_time, now
    m = window.metrics
    m.sample1, m.sample2, m.numMetrics = before, now_sample, len(metric_ids)
    for i, metric in enumerate(metric_ids):
        m.metrics[i].metricId = metric
    nvml.nvmlGpmMetricsGet(m)
    window.rates = {}
    for i, metric in enumerate(metric_ids):
        entry = m.metrics[i]
        if entry.nvmlReturn != nvml.NVML_SUCCESS or not entry.value >= 0:  # NaN too
            window.totals.pop(metric, None)  # unknown from here on
            continue
        rate = float(entry.value) * MIB
        window.rates[metric] = rate
        if metric in window.totals:
            window.totals[metric] += rate * seconds
