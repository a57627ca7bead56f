"""A parsed sample's labels dict is shared: a line read before gets the dict kept for its label
set (parser._HEADS), the same object on every later page (kvops/exposition/parser.py,
ParseResult), and a histogram series read before gets the dict kept for its labels without
`le` (kvops/exposition/_buckets.c). No reader may change one. Every page of the suite, and the
exporter's page of 16 simulated vLLMs read back as `kvops top` reads it, go through every
reader twice (the second time on the kept dicts); each dict must read the same after."""

from __future__ import annotations

import time

from kvops.engines import registry
from kvops.exporter.text_sink import write
from kvops.exposition import parser
from kvops.exposition.histograms import histograms
from kvops.frames import kvops_exposition
from kvops.frames.replay import _WANTED as REPLAY_WANTED
from kvops.sim.server import Sim
from kvops.snapshot import Snapshot
from support.suite_pages import PAGES


def read_unchanged(text: str, wanted: frozenset[str], read) -> int:  # type: ignore[no-untyped-def]
    """Parse `text` twice, each time reading it with `read`; the labels dicts shared with an
    earlier parse must be unchanged after. Returns how many of them were shared."""
    shared = 0
    for _ in range(2):
        result = parser.parse(text, wanted)
        kept = {id(heads[1]) for heads in parser._HEADS.values()}
        dicts = [labels for samples in result.samples.values() for labels, _ in samples]
        dicts += [  # each histogram series' labels, as the readers get them
            labels
            for name in result.samples
            if name.endswith("_bucket")
            for labels, _ in histograms(result, name.removesuffix("_bucket"))
        ]
        before = [dict(labels) for labels in dicts]
        read(result)
        assert [dict(labels) for labels in dicts] == before
        shared += sum(1 for labels in dicts if id(labels) in kept)
    return shared


def test_no_engine_reader_changes_a_shared_label_dict():
    shared = sum(
        read_unchanged(page, wanted, lambda r: registry.normalise(r, "http://h:8000"))
        for _, page, wanted in PAGES
    )
    assert shared > 1000  # the dicts were shared (the test would pass vacuously on copies)


def test_top_reading_the_exporters_page_changes_no_shared_label_dict():
    pages = [Sim(seed=i).metrics().decode() for i in range(16)]
    targets = [
        registry.normalise(parser.parse(p, registry.WANTED), f"http://h:{8000 + i}")
        for i, p in enumerate(pages)
    ]
    text = write(Snapshot(time=0, targets=targets)).decode()
    shared = read_unchanged(text, REPLAY_WANTED, lambda r: kvops_exposition.decode(r, time.monotonic()))
    assert shared > 500
