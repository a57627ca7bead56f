"""Host<->GPU copies timed with torch: the measuring half of `kvops bench dma`.

torch is imported inside functions only, so the command's --help and --dry-run work
where torch is not installed. On ROCm builds torch.cuda is HIP: the same calls run there.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvops.bench.plan import Case, Plan
from kvops.bench.results import CaseFailure, CaseResult, DeviceInfo
from kvops.bench.stats import summarise
from kvops.errors import UsageError, one_line

if TYPE_CHECKING:
    import torch

# One stream's work: (destination, source) pairs copied in order. A transfer is one list per stream.
Copies = Sequence[tuple["torch.Tensor", "torch.Tensor"]]
Timer = Callable[[Sequence[Copies], int, int], list[float]]


def import_torch() -> Any:
    try:
        # torch warns on import when numpy is missing (it is not needed here): a warning on
        # stderr would break the one-line refusal and --json's clean output.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            import torch
    except ImportError as exc:
        from kvops.install_hint import install_command

        raise UsageError(
            f"torch is not importable ({exc}); install it with {install_command('bench')}; "
            "nothing was measured"
        ) from None
    return torch


def open_device(index: int) -> DeviceInfo:
    """The GPU at `index` as torch sees it, or a UsageError saying why there is none."""
    torch = import_torch()
    build = f"torch {torch.__version__}"
    if not torch.cuda.is_available():
        raise UsageError(f"no CUDA/ROCm device visible to torch ({build}); nothing was measured")
    count = torch.cuda.device_count()
    if not 0 <= index < count:
        raise UsageError(
            f"--device {index}: torch sees {count} device(s), numbered 0-{count - 1} "
            "(after CUDA_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES); nothing was measured"
        )
    props = torch.cuda.get_device_properties(index)
    hip = getattr(torch.version, "hip", None)
    return DeviceInfo(
        index=index,
        torch_device=f"cuda:{index}",
        name=str(props.name),
        backend="rocm" if hip else "cuda",
        runtime=str(hip or torch.version.cuda),
        torch=str(torch.__version__),
        uuid=_text_or_none(getattr(props, "uuid", None)),
        pci_bus_id=_pci_bus_id(props),
    )


def _text_or_none(value: object) -> str | None:
    text = str(value).strip() if value is not None else ""
    return text or None


def _pci_bus_id(props: object) -> str | None:
    """domain:bus:device from torch's properties (newer torch only), formatted like NVML's, lower case."""
    bus = getattr(props, "pci_bus_id", None)
    dev = getattr(props, "pci_device_id", None)
    dom = getattr(props, "pci_domain_id", None)
    if bus is None or dev is None or dom is None:
        return None
    return f"{int(dom):08x}:{int(bus):02x}:{int(dev):02x}"


def time_transfer(streams_copies: Sequence[Copies], repeats: int, warmup: int) -> list[float]:
    """Seconds each timed repeat took to run every stream's copies; the timing core.

    The CUDA (HIP on ROCm) calls, and why each is there:
    - pinned host buffers (made in _allocate, pin_memory=True: cudaHostAlloc): page-locked,
      so the copy engine reads them by DMA, as vLLM's CPU tier is allocated.
    - torch.cuda.device(gpu): streams, events and synchronize act on the GPU the buffers
      live on; left alone they would act on device 0 whatever --device said.
    - torch.cuda.Stream(): one stream per direction, so a bidirectional case really
      overlaps H2D and D2H (copies on one stream serialise).
    - torch.cuda.synchronize(): before each repeat, so nothing earlier is still in flight
      and inflates or overlaps the repeat.
    - Event(enable_timing=True).record() on the launching stream before and after, with
      stream.wait_event(start) and wait_stream(stream): the GPU's own clock over exactly
      the copies of all streams; host timers would also time Python and the driver queue.
    - dst.copy_(src, non_blocking=True): cudaMemcpyAsync. From pinned memory it returns at
      once and the DMA runs on the stream; from pageable memory the driver stages through
      its own pinned buffer and blocks the host, which is the cost measured there.
      The events bracket issuing too: a batched case pays torch's per-copy issue cost.
    - end.synchronize(): waits for the end event only, then elapsed_time (milliseconds).
    Warm-up repeats run the same path (first-touch page faults, lazy context and allocator
    setup) and are discarded.
    """
    import torch

    gpu = next(t.device for copies in streams_copies for pair in copies for t in pair if t.is_cuda)
    with torch.cuda.device(gpu):
        launch = torch.cuda.current_stream()
        streams = [torch.cuda.Stream() for _ in streams_copies]
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        seconds: list[float] = []
        for i in range(warmup + repeats):
            torch.cuda.synchronize()
            start.record(launch)
            for stream, copies in zip(streams, streams_copies, strict=True):
                stream.wait_event(start)
                with torch.cuda.stream(stream):
                    for dst, src in copies:
                        dst.copy_(src, non_blocking=True)
                launch.wait_stream(stream)
            end.record(launch)
            end.synchronize()
            if i >= warmup:
                seconds.append(start.elapsed_time(end) / 1e3)
    return seconds


@dataclass
class _Buffers:
    """Source and destination for each direction of one transfer shape, filled so copies can be checked."""

    h2d: tuple[torch.Tensor, torch.Tensor]  # (device dst, host src)
    d2h: tuple[torch.Tensor, torch.Tensor]  # (host dst, device src)


def _fill_blocks(t: torch.Tensor, blocks: int, salt: int) -> None:
    """Each block gets its own non-zero byte value, so a block copied to the wrong place shows."""
    view = t.view(blocks, -1)
    for i in range(blocks):
        view[i].fill_(1 + (i * 37 + salt) % 255)


def _allocate(case: Case, device: str) -> _Buffers:
    import torch

    n = case.bytes_per_direction
    pinned = case.memory == "pinned"

    def host() -> torch.Tensor:
        return torch.empty(n, dtype=torch.uint8, pin_memory=pinned)

    def dev() -> torch.Tensor:
        return torch.empty(n, dtype=torch.uint8, device=device)

    bufs = _Buffers(h2d=(dev(), host()), d2h=(host(), dev()))
    _fill_blocks(bufs.h2d[1], case.blocks, salt=0)
    _fill_blocks(bufs.d2h[1], case.blocks, salt=101)
    return bufs


class _BufferCache:
    """Keeps the last shape's buffers: the plan runs every direction of a shape in a row,
    and allocating (pinning above all) a gigabyte per case would dominate the run."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.key: tuple[str, int, int] | None = None
        self.bufs: _Buffers | None = None

    def get(self, case: Case) -> _Buffers:
        key = (case.memory, case.block_bytes, case.blocks)
        if self.bufs is None or key != self.key:
            self.bufs = None  # free the old set before pinning the new one
            self.bufs = _allocate(case, self.device)
            self.key = key
        # Zeroed destinations (this also faults in pageable pages), so the check after the
        # run sees this case's copies, not an earlier case's.
        self.bufs.h2d[0].zero_()
        self.bufs.d2h[0].zero_()
        return self.bufs

    def drop(self) -> None:
        self.key, self.bufs = None, None


def _streams_copies(case: Case, bufs: _Buffers) -> list[list[tuple[torch.Tensor, torch.Tensor]]]:
    def per_block(pair: tuple[torch.Tensor, torch.Tensor]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        dst, src = (t.view(case.blocks, -1) for t in pair)
        return [(dst[i], src[i]) for i in range(case.blocks)]

    if case.direction == "h2d":
        return [per_block(bufs.h2d)]
    if case.direction == "d2h":
        return [per_block(bufs.d2h)]
    return [per_block(bufs.h2d), per_block(bufs.d2h)]


def _landed(copies: Sequence[Copies]) -> bool:
    """Every destination block holds its source's bytes (sampled: first, last and every 4093rd byte)."""
    for stream_copies in copies:
        for dst, src in stream_copies:
            for a, b in ((dst[:1], src[:1]), (dst[-1:], src[-1:]), (dst[::4093], src[::4093])):
                if not bool((a.cpu() == b.cpu()).all()):
                    return False
    return True


def measure(
    plan: Plan,
    device: str,
    timer: Timer | None = None,
    progress: Callable[[int, CaseResult | CaseFailure], None] | None = None,
) -> tuple[list[CaseResult], list[CaseFailure]]:
    """Run every case in plan order on `device` ("cuda:0"); progress(i, outcome) after each.

    `timer` defaults to time_transfer (device events); tests run the rest on the CPU with
    a host clock in its place.

    A case that raises (pinned allocation refused, out of device memory) is recorded as a
    failure and the rest still run.
    """
    timer = timer or time_transfer
    cache = _BufferCache(device)
    results: list[CaseResult] = []
    failures: list[CaseFailure] = []
    for i, case in enumerate(plan.cases):
        outcome: CaseResult | CaseFailure
        try:
            copies = _streams_copies(case, cache.get(case))
            seconds = timer(copies, plan.repeats, plan.warmup)
            outcome = CaseResult(
                case=case,
                summary=summarise(case.bytes_moved, seconds),
                seconds=tuple(seconds),
                verified=_landed(copies),
            )
            results.append(outcome)
        except Exception as exc:  # one case's failure must not lose the others' results
            cache.drop()
            outcome = CaseFailure(case, one_line(exc, typed=True))
            failures.append(outcome)
        if progress is not None:
            progress(i, outcome)
    return results, failures
