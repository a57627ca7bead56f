"""What a run of `kvops bench dma` found: the device, the link max it was held against, each case.

Plain data, no torch: the report renders it, tests build it, the JSON is its as_dict().
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvops.bench.plan import Case
from kvops.bench.stats import Summary


@dataclass(frozen=True)
class DeviceInfo:
    """The GPU torch sees at `index` (after CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES)."""

    index: int
    torch_device: str  # what torch allocates on: "cuda:0" (HIP devices are "cuda" too)
    name: str
    backend: str  # "cuda" | "rocm"
    runtime: str  # CUDA or HIP version torch was built with
    torch: str
    uuid: str | None = None  # as torch prints it; NVML adds a "GPU-" prefix
    pci_bus_id: str | None = None  # domain:bus:device, lower case

    @property
    def vendor(self) -> str:
        return "amd" if self.backend == "rocm" else "nvidia"

    def as_dict(self) -> dict[str, object]:
        return {
            "index": self.index,
            "torch_device": self.torch_device,
            "name": self.name,
            "backend": self.backend,
            "runtime": self.runtime,
            "torch": self.torch,
            "uuid": self.uuid,
            "pci_bus_id": self.pci_bus_id,
        }


@dataclass(frozen=True)
class LinkMax:
    """Usable bandwidth per direction of the GPU's host link, and where the figure came from."""

    bytes_per_second: float | None
    source: str  # "nvidia" | "amd" collector, "--link-max-gbps", or why it is unknown
    # The collector's index and UUID of the GPU, when it was matched: the textfile labels its
    # series with them so they join the exporter's kvops_gpu_* series (torch renumbers GPUs).
    gpu_index: str | None = None
    gpu_uuid: str | None = None

    @property
    def known(self) -> bool:
        return self.bytes_per_second is not None and self.bytes_per_second > 0

    def as_dict(self) -> dict[str, object]:
        return {
            "bytes_per_second": self.bytes_per_second,
            "source": self.source,
            "gpu_index": self.gpu_index,
            "gpu_uuid": self.gpu_uuid,
        }


@dataclass(frozen=True)
class CaseResult:
    case: Case
    summary: Summary  # bytes per second over the timed repeats
    seconds: tuple[float, ...]  # each timed repeat
    verified: bool  # destination held the source's bytes after the run

    def link_fraction(self, link: LinkMax) -> float | None:
        """Median bandwidth over what the link allows for this case (both directions for bidir)."""
        if not link.known:
            return None
        assert link.bytes_per_second is not None
        return self.summary.median / (link.bytes_per_second * self.case.link_directions)

    def as_dict(self, link: LinkMax) -> dict[str, object]:
        return {
            **self.case.as_dict(),
            "bytes_per_second": self.summary.as_dict(),
            "link_fraction": self.link_fraction(link),
            "seconds": list(self.seconds),
            "verified": self.verified,
        }


@dataclass(frozen=True)
class CaseFailure:
    case: Case
    error: str  # one line

    def as_dict(self) -> dict[str, object]:
        return {**self.case.as_dict(), "error": self.error}


@dataclass
class BenchRun:
    device: DeviceInfo
    link: LinkMax
    repeats: int
    warmup: int
    results: list[CaseResult] = field(default_factory=list)
    failures: list[CaseFailure] = field(default_factory=list)
    interrupted: bool = False  # stopped by Ctrl-C: results hold the cases finished before it
    finished_at: float | None = None  # unix time

    def as_dict(self) -> dict[str, object]:
        return {
            "device": self.device.as_dict(),
            "link_max": self.link.as_dict(),
            "repeats": self.repeats,
            "warmup": self.warmup,
            "finished_at": self.finished_at,
            "units": {"bytes_per_second": "bytes/s (divide by 1e9 for GB/s)", "seconds": "s"},
            "results": [r.as_dict(self.link) for r in self.results],
            "failures": [f.as_dict() for f in self.failures],
            "interrupted": self.interrupted,
        }
