"""The engines kvops reads, and a /metrics page read through them.

Each engine is one module declaring an Engine (kvops/engines/common.py): the names it reads,
how a page shows it, its tiers, its fixtures and its reader. The scrapers (kvops/scrape), the
fleet view (kvops/frames/prometheus.py) and `kvops top` take the names and the reading from
here, so a new engine is its module, its fixtures, and one line below
(docs/adding-an-engine.md).
"""

from __future__ import annotations

from kvops.engines import (
    kvbm,
    lmcache,
    lmcache_mp,
    mooncake_store,
    sglang,
    sglang_storage,
    trtllm,
    vllm,
    vllm_3fs,
    vllm_hisparse,
    vllm_mooncake,
    vllm_mooncake_store,
    vllm_nixl,
    vllm_simple_offload,
    vllm_tiering,
)
from kvops.engines.common import Engine, Page
from kvops.exposition.parser import ParseResult, families_of
from kvops.snapshot import TargetSample

# In this order: engines on a page are listed in it, and the first page_format that names the
# page wins (vLLM's naming generations before LMCache's page before the others).
ENGINES: tuple[Engine, ...] = (
    vllm.ENGINE,
    vllm_tiering.ENGINE,  # after vllm: they add to the engines vllm.py read
    vllm_simple_offload.ENGINE,
    # issue 42 (h42a): vLLM's KV connectors, after vllm: they add to the engines it read
    vllm_nixl.ENGINE,
    vllm_mooncake.ENGINE,
    vllm_mooncake_store.ENGINE,
    vllm_3fs.ENGINE,
    vllm_hisparse.ENGINE,
    lmcache.ENGINE,
    lmcache_mp.ENGINE,
    sglang.ENGINE,
    sglang_storage.ENGINE,  # after sglang: it adds to the engines sglang.py read
    kvbm.ENGINE,
    trtllm.ENGINE,
    mooncake_store.ENGINE,  # a store's own page: a target of its own
)

WANTED: frozenset[str] = frozenset().union(*(e.families for e in ENGINES))
WANTED_FAMILIES = families_of(WANTED)
# Prefixes whose one sample makes a target up, read or not: the parser counts them.
UP_PREFIXES: tuple[str, ...] = tuple(e.up_prefix for e in ENGINES if e.up_prefix)
# Names whose one parsed sample makes a target up besides the prefixed ones (docs/DESIGN.md).
OTHER_ENGINE_NAMES: frozenset[str] = frozenset().union(*(e.families for e in ENGINES if not e.up_prefix))
# What `kvops top` computes no figure from: the exporter passes these histograms through.
PASS_THROUGH_FIELDS: frozenset[str] = frozenset().union(*(e.pass_through_fields for e in ENGINES))
PASS_THROUGH_HISTOGRAMS: frozenset[str] = frozenset().union(*(e.pass_through_names for e in ENGINES))
CHART_COUNTERS: frozenset[str] = frozenset().union(*(e.chart_counters for e in ENGINES))

# Sample name -> a bit per engine of ENGINES that reads it: which engines a page has, from one
# lookup per name on it (a set test per engine was 15 per page, most over an engine's names).
_ENGINES_READING: dict[str, int] = {}
for _index, _engine in enumerate(ENGINES):
    for _name in _engine.families:
        _ENGINES_READING[_name] = _ENGINES_READING.get(_name, 0) | 1 << _index


def _engines_reading(result: ParseResult) -> int:
    """A bit per engine of ENGINES that reads a name the page has."""
    engines = 0
    for name in result.samples:
        engines |= _ENGINES_READING.get(name, 0)
    return engines


_PREFIXED = " or ".join(UP_PREFIXES)
# Engines named by neither prefix (LMCache's multi-process page is LMCache's, named by its prefix).
_OTHERS = ", ".join(
    e.title for e in ENGINES if not e.up_prefix and e.kind not in {p.kind for p in ENGINES if p.up_prefix}
)


def normalise(result: ParseResult, target: str) -> TargetSample:
    """Map one parsed exposition to a TargetSample: each engine whose names the page holds
    reads it (found from the page's names, against each reader's dozens of lookups).
    NaN and ±Inf values are unknown: left out, as an absent series (issue 25)."""
    page = Page(target)
    # up (docs/DESIGN.md): one sample of a family kvops reads for some engine parsed, whatever its value.
    up = result.has_prefixed_sample or any(result.samples.get(name) for name in OTHER_ENGINE_NAMES)
    result.known_only()
    engines = _engines_reading(result)
    for index, engine in enumerate(ENGINES):
        if engines >> index & 1:
            engine.read(result, page)
            if result.renamed:  # SGLang's router spelling read as SGLang's: its other readers too
                result.renamed = False
                engines = _engines_reading(result)
    error = None if up else f"no {_PREFIXED} sample, nor one of another engine kvops reads ({_OTHERS})"
    return TargetSample(
        target=target,
        up=up,
        error=error,
        engines=page.engines,
        lmcache=sorted(page.lmcache_by_key.values(), key=lambda s: s.key),
        vllm_format=detect_format(result),
        parse_errors=len(result.errors),
    )


def detect_format(result: ParseResult) -> str:
    """Which engine and naming generation the page shows (informational, shown by `kvops top`)."""
    for engine in ENGINES:
        found = engine.page_format(result)
        if found is not None:
            return found
    return "unknown"
