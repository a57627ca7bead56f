"""Build the stub libnvidia-ml.so.1 (stubs/nvml_stub.c) and script what it answers.

The real `pynvml` module loads it exactly as it loads NVIDIA's: `CDLL("libnvidia-ml.so.1")`.
Two ways to put the stub there:
- a subprocess: `LD_LIBRARY_PATH=<build dir> KVOPS_NVML_STUB_CONFIG=<file> kvops exporter`;
- in this process: `preload(build dir)` before the first nvmlInit (glibc then hands the
  already-loaded object to pynvml's dlopen by its soname).

From a shell (benchmarks, e2e):
    python tests/collectors/nvml_stub.py build /tmp/nvml          # prints the directory
    python tests/collectors/nvml_stub.py config 8 /tmp/nvml.conf  # 8 H100-like GPUs
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "stubs" / "nvml_stub.c"
LIB_NAME = "libnvidia-ml.so.1"
CONFIG_ENV = "KVOPS_NVML_STUB_CONFIG"

# NVML field ids (nvml.h) the collector asks for
FI_NVLINK_LINK_COUNT = 91
FI_NVLINK_THROUGHPUT_DATA_TX = 138  # KiB, per link (scopeId = link)
FI_NVLINK_THROUGHPUT_DATA_RX = 139
FI_PCIE_COUNT_TX_BYTES = 197
FI_PCIE_COUNT_RX_BYTES = 198
# host link (issue 45)
FI_C2C_LINK_COUNT = 170
FI_C2C_LINK_GET_STATUS = 171
FI_C2C_LINK_GET_MAX_BW = 172  # MB/s per active link
GPM_PCIE_TX_PER_SEC = 20  # MiB/s
GPM_PCIE_RX_PER_SEC = 21
GPM_C2C_DATA_TX_PER_SEC = 102
GPM_C2C_DATA_RX_PER_SEC = 103
VALUE_TYPE_UNSIGNED_INT = 1
VALUE_TYPE_UNSIGNED_LONG_LONG = 3


def build(tmpdir: str | os.PathLike[str]) -> Path:
    """Compile the stub into `tmpdir`; return the directory that holds libnvidia-ml.so.1."""
    out = Path(tmpdir)
    out.mkdir(parents=True, exist_ok=True)
    lib = out / LIB_NAME
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-O1",
            "-Wall",
            "-Werror",
            f"-Wl,-soname,{LIB_NAME}",
            "-o",
            str(lib),
            str(SOURCE),
            "-lpthread",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return out


def preload(libdir: Path) -> ctypes.CDLL:
    """Load the stub into this process so pynvml's CDLL("libnvidia-ml.so.1") finds it."""
    return ctypes.CDLL(str(libdir / LIB_NAME), mode=ctypes.RTLD_GLOBAL)


@dataclass
class StubGpu:
    """What one stub GPU answers. None means the driver does not support that value."""

    uuid: str
    name: str = "NVIDIA H100 80GB HBM3"
    busid: str = "00000000:18:00.0"
    memory_total: int | None = 85_520_809_984
    memory_used: int | None = 40_000_000_000
    memory_reserved: int = 553_648_128
    pcie_tx_bytes: int | None = 1_000_000  # field 197
    pcie_rx_bytes: int | None = 2_000_000  # field 198
    pcie_counter_type: int = VALUE_TYPE_UNSIGNED_LONG_LONG
    pcie_tx_kbps: int | None = None  # nvmlDeviceGetPcieThroughput
    pcie_rx_kbps: int | None = None
    link_gen: int | None = 5
    link_width: int | None = 16
    link_gen_max: int | None = 5
    link_width_max: int | None = 16
    replay: int | None = 0
    util_gpu: int | None = 50
    util_memory: int | None = 20
    nvlink_kib: dict[int, tuple[int, int]] = field(default_factory=dict)  # link -> (tx KiB, rx KiB)
    procs: dict[int, int | None] = field(default_factory=dict)  # pid -> bytes (None: not available)
    lost: bool = False
    fail: dict[str, int] = field(default_factory=dict)  # NVML function -> return code
    field_ret: dict[int, int] = field(default_factory=dict)  # field id -> its own nvmlReturn
    extra: dict[str, str] = field(default_factory=dict)  # raw "key value" lines, key without "<i>."
    # host link (issue 45)
    c2c_links: int | None = None  # field 170 (None: NOT_SUPPORTED, a PCIe-only GPU)
    c2c_max_mbps: int | None = None  # field 172
    gpm_supported: bool = False  # nvmlGpmQueryDeviceSupport
    gpm_mib_per_s: dict[int, float] = field(default_factory=dict)  # GPM metric id -> MiB/s
    fields: dict[int, int] = field(default_factory=dict)  # any other field id (scope 0) -> value
    numa_node: int | None = None  # nvmlDeviceGetNumaNodeId

    def lines(self, i: int) -> list[str]:
        out: dict[str, object] = {"name": self.name, "uuid": self.uuid, "busid": self.busid}
        if self.memory_total is not None and self.memory_used is not None:
            out |= {
                "mem.total": self.memory_total,
                "mem.used": self.memory_used,
                "mem.reserved": self.memory_reserved,
            }
        for fid, v in (
            (FI_PCIE_COUNT_TX_BYTES, self.pcie_tx_bytes),
            (FI_PCIE_COUNT_RX_BYTES, self.pcie_rx_bytes),
        ):
            if v is not None:
                out[f"field.{fid}"] = v
                out[f"field.{fid}.type"] = self.pcie_counter_type
        if self.nvlink_kib:
            out[f"field.{FI_NVLINK_LINK_COUNT}"] = max(self.nvlink_kib) + 1
            out[f"field.{FI_NVLINK_LINK_COUNT}.type"] = VALUE_TYPE_UNSIGNED_INT
            for link, (tx, rx) in self.nvlink_kib.items():
                out[f"field.{FI_NVLINK_THROUGHPUT_DATA_TX}.{link}"] = tx
                out[f"field.{FI_NVLINK_THROUGHPUT_DATA_RX}.{link}"] = rx
        for fid, value in (
            (FI_C2C_LINK_COUNT, self.c2c_links),
            (FI_C2C_LINK_GET_STATUS, 1 if self.c2c_links else None),
            (FI_C2C_LINK_GET_MAX_BW, self.c2c_max_mbps),
            *self.fields.items(),
        ):
            if value is not None:
                out[f"field.{fid}"] = value
                out[f"field.{fid}.type"] = (
                    VALUE_TYPE_UNSIGNED_INT if fid < 173 else VALUE_TYPE_UNSIGNED_LONG_LONG
                )
        if self.gpm_supported:
            out["gpm.supported"] = 1
        out |= {f"gpm.{metric}": rate for metric, rate in self.gpm_mib_per_s.items()}
        if self.numa_node is not None:
            out["numa"] = self.numa_node
        for fid, code in self.field_ret.items():
            out[f"field.{fid}.ret"] = code
        simple = {
            "pcie.tx_kbps": self.pcie_tx_kbps,
            "pcie.rx_kbps": self.pcie_rx_kbps,
            "link.gen": self.link_gen,
            "link.width": self.link_width,
            "link.gen_max": self.link_gen_max,
            "link.width_max": self.link_width_max,
            "replay": self.replay,
            "util.gpu": self.util_gpu,
            "util.memory": self.util_memory,
        }
        out |= {k: v for k, v in simple.items() if v is not None}
        if self.procs:
            out["procs"] = " ".join(f"{pid}:{'na' if m is None else m}" for pid, m in self.procs.items())
        if self.lost:
            out["lost"] = 1
        out |= {f"ret.{fn}": code for fn, code in self.fail.items()}
        out |= self.extra
        return [f"{i}.{k} {v}" for k, v in out.items()]


def gpus(n: int) -> list[StubGpu]:
    """`n` H100-like GPUs with distinct UUIDs, bus ids and counters."""
    return [
        StubGpu(
            uuid=f"GPU-00000000-0000-0000-0000-{i:012d}",
            busid=f"00000000:{0x18 + 0x10 * i:02X}:00.0",
            pcie_tx_bytes=1_000_000 * (i + 1),
            pcie_rx_bytes=2_000_000 * (i + 1),
        )
        for i in range(n)
    ]


def gh200(uuid: str = "GPU-6b7a1c2d-0000-0000-0000-0000000000c2", gpm: bool = True) -> StubGpu:
    """A GH200-like GPU: one NVLink-C2C link to the Grace CPU (450 GB/s a direction, hardware.md
    §5), GPM that measures it, PCIe byte counters that stay near zero (host copies ride C2C)."""
    return StubGpu(
        uuid=uuid,
        name="NVIDIA GH200 480GB",
        busid="00000009:01:00.0",
        memory_total=102_005_473_280,
        pcie_tx_bytes=4096,
        pcie_rx_bytes=8192,
        c2c_links=1,
        c2c_max_mbps=450_000,
        gpm_supported=gpm,
        gpm_mib_per_s={GPM_C2C_DATA_TX_PER_SEC: 1024.0, GPM_C2C_DATA_RX_PER_SEC: 8192.0} if gpm else {},
    )


def write_config(path: str | os.PathLike[str], devices: list[StubGpu], init_ret: int = 0) -> Path:
    """Write the stub's config atomically (a new inode, so a running stub re-reads it)."""
    p = Path(path)
    lines = [f"count {len(devices)}"]
    if init_ret:
        lines.append(f"init.ret {init_ret}")
    for i, g in enumerate(devices):
        lines += g.lines(i)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, p)
    return p


def _main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "build":
        print(build(argv[1]))
        return 0
    if len(argv) == 3 and argv[0] == "config":
        print(write_config(argv[2], gpus(int(argv[1]))))
        return 0
    print("usage: nvml_stub.py build DIR | config N FILE", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
