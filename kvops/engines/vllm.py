"""vLLM (0.10 to 0.33) expositions -> EngineSamples (engine_kind="vllm").

The names changed several times (docs/research/vllm-metrics.md §5, §10):
- KV usage: vllm:kv_cache_usage_perc; vllm:gpu_cache_usage_perc before 0.12 (and early V1).
- local prefix cache: vllm:prefix_cache_*; vllm:gpu_prefix_cache_* before 0.12 (early V1
  counted blocks, not tokens: kvops reports what vLLM counted).
- connector (offload tier) prefix cache: vllm:external_prefix_cache_* from 0.11.1. 0.11.x
  counts queries over the whole prompt; later releases over what the GPU missed. Not re-based.
- offload transfers: vllm:kv_offload_{store,load}_{bytes,time}_total from 0.24; before that
  (0.16-0.23) only vllm:kv_offload_total_{bytes,time}_total{transfer_type="GPU_to_CPU"|
  "CPU_to_GPU"}. 0.24+ emits both (the deprecated ones fed from the flat ones): counted once,
  the flat series preferred, the deprecated one used only where the flat one has no sample
  yet (flat series are created lazily, the deprecated ones pre-created at 0).
- engine label: the data-parallel rank; absent in early V1 expositions, then "0".
Absent series stay None: unknown, never zero.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from kvops.engines.common import Engine, Engines, Page
from kvops.exposition.histograms import histograms, merged, sample_names
from kvops.exposition.parser import Labels, ParseResult, families_of
from kvops.snapshot import EngineSample, Histogram
from kvops.units import GIB

# EngineSample field -> sample names, preferred first.
_SCALARS: dict[str, tuple[str, ...]] = {
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "local_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "local_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "external_queries": ("vllm:external_prefix_cache_queries_total",),
    "external_hits": ("vllm:external_prefix_cache_hits_total",),
    "preemptions": ("vllm:num_preemptions_total",),
    "requests_running": ("vllm:num_requests_running",),
    "requests_waiting": ("vllm:num_requests_waiting",),
    "stores_skipped": ("vllm:kv_offload_stores_skipped_total",),
    "allocation_failures": ("vllm:kv_offload_allocation_failure_total",),
    "cpu_in_flight": ("vllm:kv_offload_cpu_cache_usage_perc",),
    "cpu_in_flight_read": ("vllm:kv_offload_cpu_cache_read_usage_perc",),
    "cpu_in_flight_write": ("vllm:kv_offload_cpu_cache_write_usage_perc",),
}
# EngineSample dict field -> (sample name, the label whose values key the dict).
_BY_LABEL: dict[str, tuple[str, str]] = {
    "prompt_tokens_by_source": ("vllm:prompt_tokens_by_source_total", "source"),
    "prompt_tokens_cached_by_source": ("vllm:prompt_tokens_cached_by_source_total", "source"),
    "requests_waiting_by_reason": ("vllm:num_requests_waiting_by_reason", "reason"),
    "requests_kv_fetch_by_stage": ("vllm:num_requests_kv_fetch_by_stage", "stage"),
}
# EngineSample Histogram field -> histogram family, passed through.
_HISTOGRAMS: dict[str, str] = {
    "lookup_sync_delay": "vllm:kv_offload_lookup_sync_delay_seconds",
    "lookup_async_delay": "vllm:kv_offload_lookup_async_delay_seconds",
    "store_size": "vllm:kv_offload_store_size",
    "load_size": "vllm:kv_offload_load_size",
    "cpu_allocation_chunks": "vllm:kv_offload_cpu_allocation_size",
    "kv_block_lifetime": "vllm:kv_block_lifetime_seconds",
    "kv_block_idle_before_evict": "vllm:kv_block_idle_before_evict_seconds",
    "kv_block_reuse_gap": "vllm:kv_block_reuse_gap_seconds",
    "ttft": "vllm:time_to_first_token_seconds",  # every release kvops reads
    "queue_time": "vllm:request_queue_time_seconds",
}
# llm-d's filesystem connector beside vLLM's CPU one (MultiConnector): the second
# OffloadingConnector registers vLLM's 0.16-0.23 names with its spec's suffix
# (llm-d-kv-cache-manager's install_offload_metric_suffix_patch). suffix -> tier.
SUFFIXED_TIERS = {"cpu": "host", "sharedstorage": "storage"}
_SUFFIXED = {
    (
        f"vllm:kv_offload_total_bytes_{suffix}_total",
        f"vllm:kv_offload_total_time_{suffix}_total",
    ): tier
    for suffix, tier in SUFFIXED_TIERS.items()
}
# The histograms no interval figure is computed from: the exporter passes them through, and
# `kvops top`, which shows only what rates.interval() computes, leaves their buckets unread.
PASS_THROUGH_FIELDS = frozenset(
    {"store_size", "load_size", "cpu_allocation_chunks", "kv_block_lifetime", "kv_block_idle_before_evict",
     "kv_block_reuse_gap"}
)  # fmt: skip
_TYPED_SIZE = "vllm:kv_offload_size"  # 0.16-0.23 (deprecated from 0.24): {transfer_type}
PASS_THROUGH_HISTOGRAMS = frozenset(
    n
    for family in [*(_HISTOGRAMS[key] for key in PASS_THROUGH_FIELDS), _TYPED_SIZE]
    for n in sample_names(family)
)  # the typed size histogram feeds store_size/load_size too
_FLAT_TRANSFER = {
    "store": ("vllm:kv_offload_store_bytes_total", "vllm:kv_offload_store_time_total"),
    "load": ("vllm:kv_offload_load_bytes_total", "vllm:kv_offload_load_time_total"),
}
_TYPED_BYTES = "vllm:kv_offload_total_bytes_total"
_TYPED_TIME = "vllm:kv_offload_total_time_total"
_OFFLOAD_CONFIG = "vllm:kv_offload_config_info"
_OFFLOAD_PREFIX = "vllm:kv_offload_"  # families only an offloading connector registers
_CACHE_CONFIG = "vllm:cache_config_info"

WANTED: frozenset[str] = frozenset(
    [n for names in _SCALARS.values() for n in names]
    + [name for name, _ in _BY_LABEL.values()]
    + [n for family in [*_HISTOGRAMS.values(), _TYPED_SIZE] for n in sample_names(family)]
    + [n for pair in _FLAT_TRANSFER.values() for n in pair]
    + [_TYPED_BYTES, _TYPED_TIME, _OFFLOAD_CONFIG, _CACHE_CONFIG]
    + [n for pair in _SUFFIXED for n in pair]
)
_FAMILIES = families_of(WANTED)

_EngineKey = tuple[str, str]  # (model_name, engine)


def _key(labels: Labels) -> _EngineKey:
    return (labels.get("model_name", ""), labels.get("engine", "0"))


class _Engines(Engines):
    def of(self, labels: Labels) -> EngineSample:
        """The engine a sample's labels name: Engines.get(_key(labels)) with _key written out,
        one call instead of two (~40 samples a page are routed to their engine)."""
        key = (labels.get("model_name", ""), labels.get("engine", "0"))
        sample = self.by_key.get(key)
        return sample if sample is not None else self.get(key)


def _by_engine(samples: Iterable[tuple[Labels, float]]) -> dict[_EngineKey, float]:
    out: dict[_EngineKey, float] = {}
    for labels, value in samples:
        key = _key(labels)
        out[key] = out.get(key, 0.0) + value
    return out


def _histograms_by_engine(found: list[tuple[Labels, Histogram]]) -> dict[_EngineKey, Histogram]:
    out: dict[_EngineKey, Histogram] = {}
    for labels, hist in found:
        key = _key(labels)
        out[key] = merged(out.get(key), hist)
    return out


def _direction(transfer_type: str) -> str | None:
    # 0.16-0.23 built the label from medium names: src + "_to_" + dst.
    src, sep, dst = transfer_type.partition("_to_")
    if not sep:
        return None
    if src == "GPU":
        return "store"
    if dst == "GPU":
        return "load"
    return None


@functools.lru_cache(maxsize=256)  # a page has a few transfer types, the same every scrape
def _transfer_kind(transfer_type: str) -> tuple[str | None, bool]:
    """A transfer_type label's direction (_direction), and whether it names the CPU medium."""
    return _direction(transfer_type), "CPU" in transfer_type.split("_to_")


def _cpu_tier_bytes(result: ParseResult) -> tuple[dict[_EngineKey, float], dict[str, float]]:
    """Configured offload tier size: per (model, engine) from kv_offload_config_info (0.33+);
    per engine from cache_config_info's kv_offloading_size in GiB (0.11.1+, no model label)."""
    by_key: dict[_EngineKey, float] = {}
    for labels, _ in result.get(_OFFLOAD_CONFIG):
        raw = labels.get("cpu_kv_cache_size_bytes")
        try:
            by_key[_key(labels)] = by_key.get(_key(labels), 0.0) + float(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
    by_engine: dict[str, float] = {}
    for labels, _ in result.get(_CACHE_CONFIG):
        raw = labels.get("kv_offloading_size")
        try:
            size = float(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):  # "None" or absent: offloading off or older vLLM
            continue
        by_engine[labels.get("engine", "0")] = size * GIB
    return by_key, by_engine


def page_format(result: ParseResult) -> str | None:
    """Which offload naming the exposition uses (informational, shown by `kvops top`).

    Read from the TYPE lines of the families kvops reads (a family may be declared without
    samples yet): all the parser keeps when given a wanted set."""
    types = result.types

    def typed(*names: str) -> bool:
        return any(name in types and name in _FAMILIES for name in names)

    if typed("vllm:kv_offload_store_bytes_total", "vllm:kv_offload_store_bytes"):
        return "flat offload names (vLLM 0.24+)"
    if typed(_TYPED_BYTES, "vllm:kv_offload_total_bytes"):
        return "transfer_type offload names (vLLM 0.16-0.23)"
    if any(name.startswith("vllm:") and name in _FAMILIES for name in types):
        return "no offload transfer metrics"
    return None


def read(result: ParseResult, page: Page) -> None:
    """Add the page's vLLM engines, ordered by model then data-parallel rank."""
    engines = _Engines(page.target, "vllm")
    _read_scalars(result, engines)
    _read_histograms(result, engines)
    _read_suffixed_edges(result, engines)
    _read_transfers(result, engines)
    _read_tier_size(result, engines)
    _drop_undeclared_tier(result, engines)
    page.engines.extend(sorted(engines.samples(), key=lambda e: (e.model_name, _engine_order(e.engine))))


def _drop_undeclared_tier(result: ParseResult, engines: Engines) -> None:
    """No offload tier unless the page shows one: a server without a connector still exports
    vllm:external_prefix_cache_* (at 0) and prompt_tokens_by_source{external_kv_transfer} (0)."""
    declares_offload = any(name.startswith(_OFFLOAD_PREFIX) for name in result.types)
    for sample in engines.samples():
        if not (declares_offload or _shows_connector(sample)):
            sample.offload_tier = None


def _shows_connector(sample: EngineSample) -> bool:
    """A KV connector at work on this engine (one that names no medium: LMCache, NIXL...)."""
    return bool(
        sample.external_queries
        or sample.external_hits
        or sample.prompt_tokens_by_source.get("external_kv_transfer")
        or sample.store_bytes is not None
        or sample.load_bytes is not None
        or sample.cpu_tier_bytes is not None
        or sample.transfer_bytes_by_edge
    )


# (sample name, field) in the order they are read: a field's preferred name last, so that
# it wins where a page has both.
_SCALAR_ORDER = [(name, field_name) for field_name, names in _SCALARS.items() for name in reversed(names)]


def _read_scalars(result: ParseResult, engines: _Engines) -> None:
    samples = result.samples
    for name, field_name in _SCALAR_ORDER:
        found = samples.get(name)
        if not found:
            continue
        if len(found) == 1:  # one engine, one series: most pages
            labels, value = found[0]
            setattr(engines.of(labels), field_name, 0.0 + value)
            continue
        for key, total in _by_engine(found).items():
            setattr(engines.get(key), field_name, total)
    for field_name, (name, label) in _BY_LABEL.items():
        for labels, value in result.get(name):
            by_label = getattr(engines.of(labels), field_name)
            value_key = labels.get(label, "")
            by_label[value_key] = by_label.get(value_key, 0.0) + value


# (field, family, the family's _bucket name) for each histogram field
_HISTOGRAM_BUCKETS = [(field, family, sample_names(family)[0]) for field, family in _HISTOGRAMS.items()]


def _read_histograms(result: ParseResult, engines: _Engines) -> None:
    samples = result.samples
    for field_name, family, bucket_name in _HISTOGRAM_BUCKETS:
        if bucket_name not in samples:  # a family this page does not have: no call for it
            continue
        found = histograms(result, family)
        if len(found) == 1:  # one engine, one series: most pages
            labels, hist = found[0]
            setattr(engines.of(labels), field_name, hist)
            continue
        for key, hist in _histograms_by_engine(found).items():
            setattr(engines.get(key), field_name, hist)
    # Transfer sizes: the flat (0.24+) histogram where it has a series, else the transfer_type
    # one (0.16-0.23; pre-created, so it may show 0 loads where the flat one has no series yet).
    typed_sizes: dict[tuple[_EngineKey, str], Histogram] = {}
    for labels, hist in histograms(result, _TYPED_SIZE):
        direction = _direction(labels.get("transfer_type", ""))
        if direction is not None:
            slot = (_key(labels), f"{direction}_size")
            typed_sizes[slot] = merged(typed_sizes.get(slot), hist)
    for (key, field_name), hist in typed_sizes.items():
        if getattr(engines.get(key), field_name) is None:
            setattr(engines.get(key), field_name, hist)


def _read_suffixed_edges(result: ParseResult, engines: _Engines) -> None:
    for (bytes_name, time_name), tier in _SUFFIXED.items():
        for name, field_name in (
            (bytes_name, "transfer_bytes_by_edge"),
            (time_name, "transfer_seconds_by_edge"),
        ):
            for labels, value in result.get(name):
                direction = _direction(labels.get("transfer_type", ""))
                if direction is None:
                    continue
                edge = f"gpu_to_{tier}" if direction == "store" else f"{tier}_to_gpu"
                by_edge = getattr(engines.of(labels), field_name)
                by_edge[edge] = by_edge.get(edge, 0.0) + value


def _read_transfers(result: ParseResult, engines: Engines) -> None:
    """The flat (0.24+) pair where it has a sample, else the transfer_type pair."""
    typed: dict[tuple[_EngineKey, str], list[float]] = {}
    cpu_named: set[_EngineKey] = set()
    for index, name in enumerate((_TYPED_BYTES, _TYPED_TIME)):
        for labels, value in result.get(name):
            direction, names_cpu = _transfer_kind(labels.get("transfer_type", ""))
            if names_cpu:
                cpu_named.add(_key(labels))
            if direction is None:
                continue
            slot = typed.setdefault((_key(labels), direction), [0.0, 0.0])
            slot[index] += value
    for (key, direction), (nbytes, seconds) in typed.items():
        setattr(engines.get(key), f"{direction}_bytes", nbytes)
        setattr(engines.get(key), f"{direction}_seconds", seconds)
        if key in cpu_named:  # transfer_type names the medium: GPU <-> CPU
            engines.get(key).offload_tier = "host"
    for direction, (bytes_name, time_name) in _FLAT_TRANSFER.items():
        flat_bytes = _by_engine(result.get(bytes_name))
        flat_time = _by_engine(result.get(time_name))
        for key, nbytes in flat_bytes.items():
            sample = engines.get(key)
            sample.offload_tier = "host"  # 0.24-0.33: the CPU offloading spec's counters
            setattr(sample, f"{direction}_bytes", nbytes)
            setattr(sample, f"{direction}_seconds", flat_time.get(key))


def _read_tier_size(result: ParseResult, engines: Engines) -> None:
    tier_by_key, tier_by_engine = _cpu_tier_bytes(result)
    for key, size in tier_by_key.items():
        engines.get(key).cpu_tier_bytes = size
    for sample in engines.samples():
        if sample.cpu_tier_bytes is None:
            sample.cpu_tier_bytes = tier_by_engine.get(sample.engine)
        if sample.cpu_tier_bytes is not None:
            sample.offload_tier = "host"


def _engine_order(engine: str) -> tuple[int, str]:
    return (int(engine), "") if engine.isascii() and engine.isdigit() else (1 << 30, engine)


ENGINE = Engine(
    kind="vllm",
    title="vLLM",
    families=WANTED,
    page_format=page_format,
    tiers=("gpu", "host", "disk", "storage", "peer", "external"),
    fixtures="vllm",
    read=read,
    up_prefix="vllm:",
    pass_through_fields=PASS_THROUGH_FIELDS,
    pass_through_names=PASS_THROUGH_HISTOGRAMS,
    # The fleet's charts: lookups and hits of both tiers, bytes stored and loaded, by every
    # name vLLM has used for them (not the transfer times: the charts draw bytes per
    # wall-clock second, and each name is a query over the whole fleet in the store's view).
    chart_counters=frozenset(
        [
            *(
                n
                for f in ("local_queries", "local_hits", "external_queries", "external_hits")
                for n in _SCALARS[f]
            ),
            *(bytes_name for bytes_name, _ in _FLAT_TRANSFER.values()),
            _TYPED_BYTES,
        ]
    ),
)
