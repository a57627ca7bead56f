"""What `kvops bench dma` will measure: the cases, built and described without torch.

A case is one transfer shape: a direction, a kind of host memory, a block size and a
number of blocks per transfer. blocks=1 is one contiguous copy; blocks>1 is the shape
vLLM's native offloading uses, one cudaMemcpyAsync per block of one size, issued
back to back and timed as one transfer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from kvops.units import format_size

Direction = Literal["h2d", "d2h", "bidir"]
Memory = Literal["pinned", "pageable"]

DIRECTIONS: tuple[Direction, ...] = ("h2d", "d2h", "bidir")
MEMORIES: tuple[Memory, ...] = ("pinned", "pageable")
DIRECTION_TITLES: dict[str, str] = {
    "h2d": "host→device (load)",
    "d2h": "device→host (store)",
    "bidir": "both at once, two streams",
}

# 16 KiB (pre-0.12 per-layer fragments) to 64 MiB; 512 KiB-2 MiB are vLLM's blocks since 0.12.
DEFAULT_SIZES: tuple[int, ...] = tuple(n * 2**10 for n in (16, 64, 256, 512, 1024, 2048, 4096, 16384, 65536))
DEFAULT_BLOCKS = 64
DEFAULT_REPEATS = 20
DEFAULT_WARMUP = 3
# A batched transfer never exceeds this, so the biggest sizes get fewer blocks instead of
# asking for gigabytes of pinned memory.
MAX_TRANSFER_BYTES = 2**30


@dataclass(frozen=True)
class Case:
    direction: Direction
    memory: Memory
    block_bytes: int
    blocks: int = 1

    @property
    def bytes_per_direction(self) -> int:
        return self.block_bytes * self.blocks

    @property
    def bytes_moved(self) -> int:
        """Bytes one transfer moves, summed over directions (bidir moves a copy each way)."""
        return self.bytes_per_direction * self.link_directions

    @property
    def link_directions(self) -> int:
        """How many directions of the link the case uses: its capacity is this × the per-direction max."""
        return 2 if self.direction == "bidir" else 1

    @property
    def shape(self) -> str:
        return "1 block" if self.blocks == 1 else f"{self.blocks} blocks"

    def as_dict(self) -> dict[str, object]:
        return {
            "direction": self.direction,
            "memory": self.memory,
            "block_bytes": self.block_bytes,
            "blocks": self.blocks,
            "bytes_per_transfer": self.bytes_moved,
        }


@dataclass
class Plan:
    cases: list[Case]
    device: int = 0
    repeats: int = DEFAULT_REPEATS
    warmup: int = DEFAULT_WARMUP
    notes: list[str] = field(default_factory=list)

    @property
    def copies(self) -> int:
        """Transfers issued in all, warm-up included."""
        return len(self.cases) * (self.repeats + self.warmup)

    @property
    def bytes_total(self) -> int:
        return sum(c.bytes_moved for c in self.cases) * (self.repeats + self.warmup)

    @property
    def peak_host_bytes(self) -> int:
        """Largest host buffer set alive at once: two buffers (one per direction) of the biggest transfer."""
        return 2 * max((c.bytes_per_direction for c in self.cases), default=0)

    def as_dict(self) -> dict[str, object]:
        return {
            "device": self.device,
            "repeats": self.repeats,
            "warmup": self.warmup,
            "bytes_total": self.bytes_total,
            "peak_host_bytes": self.peak_host_bytes,
            "notes": list(self.notes),
            "cases": [c.as_dict() for c in self.cases],
        }


def batch_blocks(block_bytes: int, blocks: int) -> int:
    """Blocks per batched transfer for this size: as asked, capped at MAX_TRANSFER_BYTES in all."""
    return max(1, min(blocks, MAX_TRANSFER_BYTES // block_bytes))


def build_plan(
    sizes: Sequence[int] = DEFAULT_SIZES,
    directions: Iterable[Direction] = DIRECTIONS,
    memories: Iterable[Memory] = MEMORIES,
    blocks: int = DEFAULT_BLOCKS,
    repeats: int = DEFAULT_REPEATS,
    warmup: int = DEFAULT_WARMUP,
    device: int = 0,
) -> Plan:
    """Every combination, duplicates dropped: per memory kind, single-block shapes then batched,
    sizes ascending, every direction of a shape in a row (so the run reuses its buffers).

    blocks <= 1 measures only single copies. Values are checked by the command; here
    they are only asserted.
    """
    assert repeats >= 1 and warmup >= 0 and all(s > 0 for s in sizes)
    ordered_sizes = sorted(set(sizes))
    notes: list[str] = []
    shapes: list[tuple[int, int]] = [(s, 1) for s in ordered_sizes]
    if blocks > 1:
        for s in ordered_sizes:
            n = batch_blocks(s, blocks)
            if n == 1:
                notes.append(f"{format_size(s)}: no batched case (one block is already the 1 GiB cap)")
                continue
            if n < blocks:
                notes.append(f"{format_size(s)}: {n} blocks per batched transfer (1 GiB cap), not {blocks}")
            shapes.append((s, n))
    cases = [
        Case(direction=d, memory=m, block_bytes=s, blocks=n)
        for m in dict.fromkeys(memories)
        for s, n in shapes
        for d in dict.fromkeys(directions)
    ]
    return Plan(cases=cases, device=device, repeats=repeats, warmup=warmup, notes=notes)


def describe(plan: Plan, link_note: str) -> str:
    """The --dry-run text: what would run, how much it moves, and what it needs."""
    by_group: dict[tuple[str, str, bool], list[Case]] = {}
    for c in plan.cases:
        by_group.setdefault((c.memory, c.direction, c.blocks > 1), []).append(c)
    n = len(plan.cases)
    lines = [
        f"kvops bench dma plan: device {plan.device}, {n} case{'' if n == 1 else 's'}, "
        f"{plan.warmup} warm-up + {plan.repeats} timed repeats each",
    ]
    for (memory, direction, batched), cases in by_group.items():
        sizes = ", ".join(format_size(c.block_bytes) + (f"×{c.blocks}" if batched else "") for c in cases)
        shape = "batched, one copy per block" if batched else "one copy"
        lines.append(f"  {memory:8} {DIRECTION_TITLES[direction]:28} {shape:28} {sizes}")
    lines.extend(f"  note: {n}" for n in plan.notes)
    lines.append(
        f"moves {_decimal(plan.bytes_total)} in {plan.copies} transfers; "
        f"host buffers up to {format_size(plan.peak_host_bytes)} (pinned where the case says so)"
    )
    lines.append(f"link max: {link_note}")
    lines.append("timing: device events around each transfer, after warm-up (needs a CUDA or ROCm GPU)")
    return "\n".join(lines)


def _decimal(n_bytes: int) -> str:
    """Totals in decimal units, as bandwidth is: 508.7 GB, 48.2 MB."""
    return f"{n_bytes / 1e9:.1f} GB" if n_bytes >= 1e9 else f"{n_bytes / 1e6:.1f} MB"
