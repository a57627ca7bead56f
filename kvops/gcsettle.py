"""Garbage-collector settings for `kvops top` and `kvops exporter`, once start-up is over.

CPython's cyclic collector runs whenever 700 container objects more were allocated than
freed. A scrape of 16 vLLM pages allocates tens of thousands (label dicts, sample tuples), so
the collector ran ~8 times a second, and each run of the oldest generation walked every
object the process holds: Textual's widget tree, the modules, the history rings. Measured
in `kvops top` with 16 targets at 1 Hz (gc.callbacks timing, 40 s): 190 ms of collection,
about 0.45 % of a core, most of it walking objects that live as long as the process.

After start-up those objects are frozen (gc.freeze: left out of every later collection) and
the youngest generation is collected every 20,000 allocations: a frame's garbage is still
collected within the frame, and cycles (which only the collector frees) stay bounded.

The exporter settles after its first exposition (kvops.exporter.round_exposition): one round
of 16 simulated vLLMs and 8 stub GPUs in process, three A/B pairs of 400 rounds (2026-11-27):
22.4 / 23.6 / 20.7 ms of CPU without, 21.5 / 20.7 / 19.6 ms with.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 20_000


def settle() -> None:
    """Freeze what exists now (call once start-up is done) and collect the young less often."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
