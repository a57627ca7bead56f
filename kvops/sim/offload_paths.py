"""The simulated engine's other offload paths: what vLLM's SimpleCPUOffloadConnector and its
multi-tier offloading (TieringOffloadingSpec) count, over the same CPU tier the engine runs.

- `simple`: SimpleCPUOffloadConnector counts store decisions per block by outcome and blocks
  loaded (vllm/v1/simple_kv_offload/manager.py); transfers finish within the step here, so no
  block stays pinned or pending and the pool never refuses a store (no `dropped_cpu_full`).
- `tiering`: the CPU tier is the primary (`0:primary`) and a file-system tier (`1:fs`) sits
  below it. Every store cascades (is written through) to fs at FS_WRITE_BYTES_PER_SECOND; a
  lookup that misses the primary continues in fs, and fs hits are promoted (read into the
  primary) at FS_READ_BYTES_PER_SECOND before they load to the GPU. The fs tier holds
  FS_CAPACITY_FACTOR x the primary's blocks, least recently used out. To give the failure
  series something to count soon after start, the second cascade and promotion fail, then
  every CASCADE_FAILURE_EVERY-th cascade and PROMOTION_FAILURE_EVERY-th promotion (a failed
  cascade writes nothing; a failed promotion delivers nothing and the blocks are prefilled).
Names and label sets are those of vLLM 0.33's own code (kvops/sim/layouts.json, CONNECTOR_LAYOUTS).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

PATHS = ("native", "simple", "tiering")
PRIMARY, FS = "0:primary", "1:fs"
FS_WRITE_BYTES_PER_SECOND = 4.0e9
FS_READ_BYTES_PER_SECOND = 6.0e9
FS_CAPACITY_FACTOR = 4
CASCADE_FAILURE_EVERY = 50
PROMOTION_FAILURE_EVERY = 40
FIRST_FAILURE = 2  # the second job of each kind fails, then one in every *_FAILURE_EVERY
PROMOTION_QUEUEING = 2.0  # a promotion's latency over its transfer time (job creation to completion)


@dataclass
class SimpleCounters:
    """SimpleCPUOffloadConnector's counts: store decisions by outcome and loads, in blocks."""

    outcomes: dict[str, int] = field(default_factory=dict)  # outcome -> blocks, first positive on
    load_blocks: int = 0


@dataclass
class TierCounters:
    """One tier's counts, as vLLM's TieringMetricsTracker keeps them (chunk = one block here)."""

    chunk_queries: int = 0
    chunk_hits: int = 0
    read_bytes: int = 0  # promotions: this tier -> the primary
    read_seconds: float = 0.0
    write_bytes: int = 0  # cascades: the primary -> this tier
    write_seconds: float = 0.0
    promotion_failures: int = 0
    cascade_failures: int = 0
    promotions: int = 0
    cascades: int = 0


class FsTier:
    """The file-system tier below the CPU primary (`tiering` path)."""

    def __init__(self, capacity_blocks: int, bytes_per_block: int) -> None:
        self.capacity = capacity_blocks
        self.bytes_per_block = bytes_per_block
        self.keys: OrderedDict[int, None] = OrderedDict()  # least recently used first
        self.tiers = {PRIMARY: TierCounters(), FS: TierCounters()}
        self.promotion_latency: list[tuple[str, float]] = []  # (result, seconds) not yet observed

    def cascade(self, keys: list[int]) -> None:
        """Write blocks just stored in the primary through to fs, as one job."""
        fs = self.tiers[FS]
        fs.cascades += 1
        if fs.cascades % CASCADE_FAILURE_EVERY == FIRST_FAILURE:
            fs.cascade_failures += 1
            return
        for key in keys:
            self.keys[key] = None
            self.keys.move_to_end(key)
            if len(self.keys) > self.capacity:
                self.keys.popitem(last=False)
        nbytes = len(keys) * self.bytes_per_block
        fs.write_bytes += nbytes
        fs.write_seconds += nbytes / FS_WRITE_BYTES_PER_SECOND

    def lookup(self, primary_hits: int, primary_queried: int, rest: list[int]) -> list[int]:
        """Count a lookup: `primary_queried` blocks asked of the primary, `primary_hits` found,
        then `rest` (the blocks after the primary's run) asked of fs. Returns the fs run that
        was promoted into the primary (empty when the promotion failed)."""
        primary, fs = self.tiers[PRIMARY], self.tiers[FS]
        primary.chunk_queries += primary_queried
        primary.chunk_hits += primary_hits
        run = 0
        while run < len(rest) and rest[run] in self.keys:
            run += 1
        fs.chunk_queries += len(rest)
        fs.chunk_hits += run
        if run == 0:
            return []
        found = rest[:run]
        fs.promotions += 1
        seconds = run * self.bytes_per_block / FS_READ_BYTES_PER_SECOND
        if fs.promotions % PROMOTION_FAILURE_EVERY == FIRST_FAILURE:
            fs.promotion_failures += 1
            self.promotion_latency.append(("failure", seconds * PROMOTION_QUEUEING))
            return []
        for key in found:
            self.keys.move_to_end(key)
        fs.read_bytes += run * self.bytes_per_block
        fs.read_seconds += seconds
        self.promotion_latency.append(("success", seconds * PROMOTION_QUEUEING))
        return found
