"""Byte sizes and bandwidth units, spelled so nobody mixes 10^9 with 2^30: the one GIB, and the
two size grammars kvops reads.

- `size_as_written` (`kvops bench --sizes`): SI and IEC units each meaning what they say,
  KB = 10^3 and KiB = 2^10; a bare K or M refused.
- `docker_size` (`--shm-size` on a docker line, read by `kvops doctor`): Docker's own grammar,
  where k, m, g, t are binary (64m = 64 MiB) and a trailing b is allowed.

Block sizes are binary (KiB, MiB: vLLM's blocks are powers of two); bandwidth defaults to
decimal GB/s (10^9 bytes), the unit of PCIe link figures and of the vLLM offloading article.
A bare "K" or "M" is refused: it is exactly the ambiguity these helpers exist to remove.
"""

from __future__ import annotations

import re

from kvops.errors import UsageError

GIB = 1 << 30

# Suffix -> bytes. Decimal and binary both accepted, each meaning what it says.
SIZE_SUFFIXES: dict[str, int] = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
}

# Bandwidth unit -> bytes per second in one unit per second.
BANDWIDTH_UNITS: dict[str, int] = {"GB": 10**9, "GiB": 2**30}

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def size_as_written(text: str) -> int:
    """'2MiB' -> 2097152, '512KB' -> 512000, '4096' -> 4096. Raises UsageError on anything else."""
    match = _SIZE_RE.match(text)
    if not match:
        raise UsageError(f"cannot read size {text!r}: write e.g. 16KiB, 2MiB or 4096 (bytes)")
    number, suffix = match.groups()
    factor = SIZE_SUFFIXES.get(suffix.upper())
    if factor is None:
        raise UsageError(
            f"size {text!r}: unknown or ambiguous unit {suffix!r}; use KiB/MiB/GiB (2^10, 2^20, 2^30) "
            "or KB/MB/GB (10^3, 10^6, 10^9)"
        )
    value = float(number) * factor
    if value != int(value) or value < 1:
        raise UsageError(f"size {text!r} is not a whole, positive number of bytes")
    return int(value)


# Docker's units (github.com/docker/go-units RAMInBytes): binary whatever the case.
_DOCKER_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def docker_size(text: str) -> int | None:
    """Docker sizes: 64m, 16g, 1024 (bytes); None when not one."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([bkmgt]?)b?\s*", text.lower())
    if not m:
        return None
    return int(float(m.group(1)) * _DOCKER_UNITS[m.group(2)])


def format_size(n_bytes: int) -> str:
    """Binary units, exact when the size is a whole number of them: 2097152 -> '2 MiB'."""
    for suffix, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n_bytes >= factor and n_bytes % factor == 0:
            return f"{n_bytes // factor} {suffix}"
    for suffix, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n_bytes >= factor:
            return f"{n_bytes / factor:.2f} {suffix}"
    return f"{n_bytes} B"


def to_unit(bytes_per_second: float, unit: str) -> float:
    """Bytes per second -> GB/s or GiB/s."""
    return bytes_per_second / BANDWIDTH_UNITS[unit]


def from_unit(value: float, unit: str) -> float:
    """GB/s or GiB/s -> bytes per second."""
    return value * BANDWIDTH_UNITS[unit]


def unit_note(unit: str) -> str:
    """The legend printed under every table, so a figure never travels without its unit."""
    exponent = "10^9" if unit == "GB" else "2^30"
    return f"bandwidth in {unit}/s (1 {unit} = {exponent} bytes); sizes in KiB/MiB (2^10/2^20 bytes)"
