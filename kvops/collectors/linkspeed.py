"""PCIe link generation × width → usable bytes per second, per direction.

Figures (docs/research/hardware.md §1.5 and §5, from the PCI-SIG-derived tables at
hpc-notes.pages.dev/reference/pcie): per-lane signalling rate Gen1 2.5 GT/s, Gen2 5,
Gen3 8, Gen4 16, Gen5 32, Gen6 64; line encoding 8b/10b for Gen1-2 and 128b/130b for
Gen3-5. So Gen5 x16 = 32e9 × 16 × 128/130 / 8 = 63.0e9 B/s per direction (vendors quote
the bidirectional sum, e.g. H100 "PCIe Gen5: 128 GB/s"). Gen6 runs PAM4 in FLIT mode
with no line encoding (1b/1b); its FLIT/FEC overhead is not subtracted here.
TLP/DLLP protocol overhead is not subtracted either: real pinned copies reach ~75-87%.
"""

from __future__ import annotations

# generation -> per-lane transfer rate, GT/s
_GT_PER_S: dict[int, float] = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


def _encoding_efficiency(gt_per_s: float) -> float:
    if gt_per_s <= 5.0:
        return 8 / 10  # Gen1-2
    if gt_per_s <= 32.0:
        return 128 / 130  # Gen3-5
    return 1.0  # Gen6 FLIT mode, 1b/1b


def bytes_per_second_from_rate(gt_per_s: float | None, width: int | None) -> float | None:
    """Usable one-direction bandwidth of a link at `gt_per_s` per lane over `width` lanes."""
    if not gt_per_s or not width or gt_per_s <= 0 or width <= 0:
        return None
    return gt_per_s * 1e9 * width * _encoding_efficiency(gt_per_s) / 8


def bytes_per_second(generation: int | None, width: int | None) -> float | None:
    """Usable one-direction bandwidth of a PCIe `generation` link `width` lanes wide.

    None when either is unknown (0 or None) or the generation is not one we know.
    """
    if generation is None:
        return None
    return bytes_per_second_from_rate(_GT_PER_S.get(generation), width)


def generation_from_rate(gt_per_s: float | None) -> int | None:
    """The PCIe generation that signals at `gt_per_s` (as AMD reports speed, not generation)."""
    if not gt_per_s:
        return None
    for gen, rate in _GT_PER_S.items():
        if abs(rate - gt_per_s) < 0.05:
            return gen
    return None
