"""What vLLM's KV transfer connectors share: NIXL and MooncakeConnector (P/D and peer transfer)
write the same shape, per-transfer histograms of time, bytes and descriptors, and failure
counters (vllm/distributed/kv_transfer/kv_connector/v1/{nixl,mooncake}/stats.py). A reader here
keys every figure by its connector, so two connectors on one page (a MultiConnector) stay apart.
"""

from __future__ import annotations

from collections.abc import Callable

from kvops.engines.common import Page, engine_on_page, vllm_key
from kvops.exposition.histograms import histograms, merged, sample_names
from kvops.exposition.parser import Labels, ParseResult
from kvops.snapshot import EngineSample


def families(histogram_families: dict[str, str], counters: dict[str, str]) -> frozenset[str]:
    """Every sample name a connector's reader asks for."""
    names = [n for family in histogram_families.values() for n in sample_names(family)]
    return frozenset([*names, *counters.values()])


def reader(
    connector: str, histogram_families: dict[str, str], counters: dict[str, str]
) -> Callable[[ParseResult, Page], None]:
    """A reader adding the connector's histograms (field -> family) and counters (field ->
    sample name) under `connector` in the EngineSample dict fields named."""

    def read(result: ParseResult, page: Page) -> None:
        def owner(labels: Labels) -> EngineSample:
            return engine_on_page(page, vllm_key(labels), "vllm")

        for field_name, family in histogram_families.items():
            for labels, hist in histograms(result, family):
                by_connector = getattr(owner(labels), field_name)
                by_connector[connector] = merged(by_connector.get(connector), hist)
        for field_name, name in counters.items():
            for labels, value in result.get(name):
                by_connector = getattr(owner(labels), field_name)
                by_connector[connector] = by_connector.get(connector, 0.0) + value

    return read
