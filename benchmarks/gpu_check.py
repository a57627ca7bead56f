"""What each GPU driver call kvops's host-link reading relies on answers on this host (issue 45).

Run it once on a real GPU host (GH200/GB200, an H100 on PCIe, an MI300X) and keep the output:
the calls below are checked on stub libraries only (docs/collectors.md, "Verified on stubs
only"); this prints, per GPU, the raw answer of each one, or the error it raised, so one run on
silicon verifies that table. It changes nothing on the GPU and needs no privileges beyond NVML's
or amdsmi's read access.

    python benchmarks/gpu_check.py            # JSON on stdout, one object per vendor
    python benchmarks/gpu_check.py --gpm-wait 1   # seconds between the two GPM samples

Text the driver returns is printed as JSON strings (escaped), never raw to the terminal.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

# NVML field ids kvops reads (nvml.h, NVML_API_VERSION 13): id -> name
NVML_FIELDS: dict[int, str] = {
    91: "NVLINK_LINK_COUNT",
    138: "NVLINK_THROUGHPUT_DATA_TX (KiB, scope link 0)",
    139: "NVLINK_THROUGHPUT_DATA_RX",
    169: "PCIE_L0_TO_RECOVERY_COUNTER",
    170: "C2C_LINK_COUNT",
    171: "C2C_LINK_GET_STATUS",
    172: "C2C_LINK_GET_MAX_BW (MB/s)",
    173: "PCIE_COUNT_CORRECTABLE_ERRORS",
    174: "PCIE_COUNT_NAKS_RECEIVED",
    175: "PCIE_COUNT_RECEIVER_ERROR",
    176: "PCIE_COUNT_BAD_TLP",
    177: "PCIE_COUNT_NAKS_SENT",
    178: "PCIE_COUNT_BAD_DLLP",
    179: "PCIE_COUNT_NON_FATAL_ERROR",
    180: "PCIE_COUNT_FATAL_ERROR",
    181: "PCIE_COUNT_UNSUPPORTED_REQ",
    182: "PCIE_COUNT_LCRC_ERROR",
    183: "PCIE_COUNT_LANE_ERROR",
    197: "PCIE_COUNT_TX_BYTES",
    198: "PCIE_COUNT_RX_BYTES",
    202: "NVLINK_COUNT_XMIT_BYTES (NVLink5, scope link 0)",
    204: "NVLINK_COUNT_RCV_BYTES",
    231: "C2C_LINK_ERROR_INTR",
    232: "C2C_LINK_ERROR_REPLAY",
    233: "C2C_LINK_ERROR_REPLAY_B2B",
    234: "C2C_LINK_POWER_STATE",
}
# GPM metric ids (MiB/s between two samples)
GPM_METRICS: dict[int, str] = {
    20: "PCIE_TX_PER_SEC",
    21: "PCIE_RX_PER_SEC",
    100: "C2C_TOTAL_TX_PER_SEC",
    101: "C2C_TOTAL_RX_PER_SEC",
    102: "C2C_DATA_TX_PER_SEC",
    103: "C2C_DATA_RX_PER_SEC",
}


def _answer(call: Callable[[], Any]) -> Any:
    """The call's answer made printable, or {"error": ...}."""
    try:
        return _plain(call())
    except Exception as e:  # every failure is an answer worth printing
        return {"error": f"{type(e).__name__}: {e}"}


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    if hasattr(value, "_fields_"):  # a ctypes struct
        return {name: _plain(getattr(value, name)) for name, *_ in value._fields_}
    return repr(value)


def _field_values(nvml: Any, handle: Any) -> dict[str, Any]:
    ids = [(f, 0) for f in NVML_FIELDS]
    try:
        values = nvml.nvmlDeviceGetFieldValues(handle, ids)
    except nvml.NVMLError as e:
        return {"error": str(e)}
    members = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
    out: dict[str, Any] = {}
    for fv in values:
        name = f"{fv.fieldId} {NVML_FIELDS.get(fv.fieldId, '')}".strip()
        if fv.nvmlReturn != nvml.NVML_SUCCESS:
            out[name] = {"nvmlReturn": int(fv.nvmlReturn), "error": nvml.nvmlErrorString(fv.nvmlReturn)}
        else:
            member = members.get(int(fv.valueType), "ullVal")
            out[name] = {"value": _plain(getattr(fv.value, member)), "valueType": int(fv.valueType)}
    return out


def _gpm(nvml: Any, handle: Any, wait: float) -> dict[str, Any]:
    support = _answer(lambda: nvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice)
    out: dict[str, Any] = {"nvmlGpmQueryDeviceSupport.isSupportedDevice": support}
    if support is not True and support != 1:
        return out
    try:
        first, second = nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()
        try:
            nvml.nvmlGpmSampleGet(handle, first)
            time.sleep(wait)
            nvml.nvmlGpmSampleGet(handle, second)
            get = nvml.c_nvmlGpmMetricsGet_t()
            get.version = nvml.NVML_GPM_METRICS_GET_VERSION
            get.sample1, get.sample2, get.numMetrics = first, second, len(GPM_METRICS)
            for i, metric in enumerate(GPM_METRICS):
                get.metrics[i].metricId = metric
            nvml.nvmlGpmMetricsGet(get)
            for i, (metric, name) in enumerate(GPM_METRICS.items()):
                m = get.metrics[i]
                out[f"{metric} {name}"] = (
                    {"MiB/s": m.value}
                    if m.nvmlReturn == nvml.NVML_SUCCESS
                    else {"nvmlReturn": int(m.nvmlReturn)}
                )
        finally:
            nvml.nvmlGpmSampleFree(first)
            nvml.nvmlGpmSampleFree(second)
    except nvml.NVMLError as e:
        out["error"] = str(e)
    return out


def check_nvidia(gpm_wait: float) -> dict[str, Any]:
    try:
        import pynvml as nvml

        nvml.nvmlInit()
    except Exception as e:
        return {"error": f"NVML unavailable: {type(e).__name__}: {e}"}
    from kvops.collectors import numa

    gpus = []
    try:
        driver = _answer(nvml.nvmlSystemGetDriverVersion)
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            pci = _answer(lambda h=h: nvml.nvmlDeviceGetPciInfo(h).busId)
            gpus.append(
                {
                    "index": i,
                    "name": _answer(lambda h=h: nvml.nvmlDeviceGetName(h)),
                    "pci_bus_id": pci,
                    "pcie_gen_width_current": _answer(
                        lambda h=h: (
                            nvml.nvmlDeviceGetCurrPcieLinkGeneration(h),
                            nvml.nvmlDeviceGetCurrPcieLinkWidth(h),
                        )
                    ),
                    "pcie_gen_width_max": _answer(
                        lambda h=h: (
                            nvml.nvmlDeviceGetMaxPcieLinkGeneration(h),
                            nvml.nvmlDeviceGetMaxPcieLinkWidth(h),
                        )
                    ),
                    "field_values": _field_values(nvml, h),
                    "gpm": _gpm(nvml, h, gpm_wait),
                    "nvmlDeviceGetNumaNodeId": _answer(lambda h=h: nvml.nvmlDeviceGetNumaNodeId(h)),
                    "nvmlDeviceGetC2cModeInfoV": _answer(lambda h=h: nvml.nvmlDeviceGetC2cModeInfoV(h)),
                    "sysfs_numa_node": numa.gpu_numa_node(pci if isinstance(pci, str) else None),
                }
            )
    finally:
        nvml.nvmlShutdown()
    return {"driver": driver, "gpus": gpus}


def check_amd() -> dict[str, Any]:
    from kvops.collectors.amd import AmdSmiUnavailable, _load_amdsmi

    try:
        a = _load_amdsmi()
    except AmdSmiUnavailable as e:
        return {"error": str(e)}
    gpus = []
    try:
        for i, h in enumerate(a.amdsmi_get_processor_handles()):
            metrics = _answer(lambda h=h: a.amdsmi_get_gpu_metrics_info(h))
            keep = ("common_header", "pcie_", "xgmi_")
            gpus.append(
                {
                    "index": i,
                    "bdf": _answer(lambda h=h: a.amdsmi_get_gpu_device_bdf(h)),
                    "metrics_table": {k: v for k, v in metrics.items() if k.startswith(keep)}
                    if isinstance(metrics, dict) and "error" not in metrics
                    else metrics,
                    "amdsmi_get_pcie_info": _answer(lambda h=h: a.amdsmi_get_pcie_info(h)),
                    "amdsmi_get_link_metrics": _answer(lambda h=h: a.amdsmi_get_link_metrics(h)),
                    "amdsmi_get_gpu_topo_numa_affinity": _answer(
                        lambda h=h: a.amdsmi_get_gpu_topo_numa_affinity(h)
                    ),
                }
            )
    finally:
        a.amdsmi_shut_down()
    return {"gpus": gpus}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpm-wait", type=float, default=1.0, help="seconds between GPM samples")
    args = parser.parse_args(argv)
    if not args.gpm_wait > 0:
        print("gpu_check.py: --gpm-wait must be a positive number of seconds", file=sys.stderr)
        return 2
    report = {"nvidia": check_nvidia(args.gpm_wait), "amd": check_amd()}
    sys.stdout.write(json.dumps(report, indent=2, default=repr) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
