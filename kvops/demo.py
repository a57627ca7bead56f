"""`kvops demo`: the simulated vLLM and `kvops top` on it, no GPU needed.

The demo shows a healthy server that offloads: its workload (rag at 0.4× the preset's
session rate, a 4 GiB GPU KV cache) reaches a steady state within a minute (the waiting
queue stays under a handful of requests for at least 15 simulated minutes, external hit
rate 0.6-0.8). The GPU and host panels are fed by the simulator too (labelled simulated):
this machine's RAM compared with a simulated 64 GiB tier would be a false alarm.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import Any

from kvops.snapshot import GpuSample, HostSample, Snapshot
from kvops.units import GIB

EXAMPLES = """\
examples:
  kvops demo
  kvops demo --workload chat --vllm-version 0.11.2
  kvops demo --once --json
"""


DEMO_GPU_BLOCKS = 2048
DEMO_WORKLOAD = "rag"
# The rag preset at full rate queues without end on a 2048-block cache (30 waiting at 15 s,
# 250 at 180 s); at 0.4 it stays at most 4 waiting over 900 simulated seconds.
DEMO_RATE = 0.4
# Simulated seconds the engine runs before the first frame (the simulator's catch-up limit),
# so the demo opens in its steady state instead of on an empty server.
WARMUP_SECONDS = 60.0

# The simulated machine: a 24 GiB GPU holding Llama-3.1-8B's weights (~15 GiB) and the 4 GiB
# KV cache, on a PCIe Gen5 x16 link (the simulator's transfer model); a 512 GiB host whose
# /dev/shm (half the RAM, tmpfs's default) holds the offload tier.
SIM_GPU_NAME = "PCIe Gen5 x16, 24 GiB"
SIM_GPU_TOTAL = 24.0 * GIB
SIM_GPU_USED = 21.6 * GIB  # vLLM reserves gpu_memory_utilization (0.9) at start
SIM_HOST_RAM = 512.0 * GIB
SIM_HOST_OTHER = 24.0 * GIB  # the OS, the API server, the model's weights in page cache


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--interval", default="1", metavar="S", help="seconds between frames (default 1)")
    parser.add_argument(
        "--vllm-version",
        default="0.33.0",
        metavar="X.Y.Z",
        help="vLLM release whose /metrics format to simulate (default 0.33.0)",
    )
    parser.add_argument(
        "--workload",
        default=DEMO_WORKLOAD,
        choices=["chat", "rag", "bursty", "agent"],
        help=f"workload preset (default {DEMO_WORKLOAD}, as kvops sim)",
    )
    parser.add_argument("--once", action="store_true", help="print one frame as text and exit")
    parser.add_argument("--json", action="store_true", help="with --once: the frame as JSON")


class DemoSource:
    """The simulator's /metrics scraped live, plus a GPU and a host made from the simulator's
    own counters: PCIe TX is the bytes stored to the CPU tier, RX the bytes loaded back."""

    live = True
    simulated_hardware = True  # the app labels the GPU and host panels "simulated"

    def __init__(self, url: str, engines: list[Any], timeout: float, description: str) -> None:
        from kvops.top.live_source import LiveSource

        self.live_source = LiveSource([url], timeout=timeout, hardware=False)
        self.engines = engines
        self.description = description

    def next(self) -> Snapshot:
        snap = self.live_source.next()
        snap.gpus = [self._gpu()]
        snap.host = self._host()
        return snap

    def _gpu(self) -> GpuSample:
        stored = sum(e.counters.store_bytes for e in self.engines)
        loaded = sum(e.counters.load_bytes for e in self.engines)
        return GpuSample(
            index="0",
            uuid="GPU-simulated-0",
            vendor="simulated",
            name=SIM_GPU_NAME,
            memory_used_bytes=SIM_GPU_USED,
            memory_total_bytes=SIM_GPU_TOTAL,
            pcie_tx_bytes=float(stored),  # device to host: stores to the offload tier
            pcie_rx_bytes=float(loaded),  # host to device: loads back
            pcie_link_max_bytes_per_second=self.engines[0].config.link_bytes_per_second,
        )

    def _host(self) -> HostSample:
        tier = float(sum(e.config.cpu_bytes for e in self.engines))
        shm_total = SIM_HOST_RAM / 2
        return HostSample(
            memory_total_bytes=SIM_HOST_RAM,
            memory_available_bytes=SIM_HOST_RAM - tier - SIM_HOST_OTHER,
            shmem_bytes=tier,
            shm_total_bytes=shm_total,
            shm_free_bytes=shm_total - tier,
        )

    def close(self) -> None:
        self.live_source.close()


@contextlib.contextmanager
def simulated(vllm_version: str, workload: str, interval: float) -> Iterator[DemoSource]:
    """The demo's simulated vLLM, started and caught up to its steady state, as a source for
    `kvops top` (also docs/gen_screenshot.py's); stopped on leaving."""
    from kvops.sim.server import start
    from kvops.top import command as top

    # A small GPU cache (2048 blocks = 4 GiB of Llama-3.1-8B KV) so blocks spill to the CPU
    # tier and come back within seconds: the demo shows offload hits and loads right away.
    sim = start(vllm_version=vllm_version, workload=workload, rate=DEMO_RATE, num_gpu_blocks=DEMO_GPU_BLOCKS)
    sim.sim.started -= WARMUP_SECONDS  # the first scrape catches the engine up to that
    try:
        yield DemoSource(
            sim.url,
            sim.sim.engines,
            timeout=min(top.MAX_SCRAPE_TIMEOUT, max(1.0, interval)),
            description=f"kvops demo: simulated vLLM {vllm_version} at {sim.url}",
        )
    finally:
        sim.stop()


def run(args: argparse.Namespace) -> int:
    from kvops.errors import UsageError
    from kvops.top import command as top

    interval = top.parse_interval(args.interval)
    if args.json and not args.once:
        raise UsageError("--json goes with --once")
    top.quiet_logs()
    if not args.once:
        top.require_terminal()
    with simulated(args.vllm_version, args.workload, interval) as source:
        if args.once:
            try:
                return top.print_once(source, interval, args.json)
            finally:
                source.close()
        return top.run_app(source, interval)
