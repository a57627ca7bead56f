"""vLLM (0.10 to 0.33) and LMCache expositions -> one TargetSample.

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

from collections.abc import Iterable

from kvops.snapshot import EngineSample, Histogram, LMCacheSample, TargetSample
from kvops.sources import kvbm, sglang, trtllm
from kvops.sources.exposition import Labels, ParseResult, families_of
from kvops.sources.histograms import histograms, sample_names

GIB = float(1 << 30)

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

# lmcache:* sample -> LMCacheSample field; LMCache's figures stay apart (snapshot.py says why).
LMCACHE_COUNTERS: dict[str, str] = {
    "lmcache:num_requested_tokens_total": "requested_tokens",
    "lmcache:num_hit_tokens_total": "hit_tokens",
    "lmcache:num_stored_tokens_total": "stored_tokens",
    "lmcache:num_lookup_tokens_total": "lookup_tokens",
    "lmcache:num_lookup_hits_total": "lookup_hits",
    "lmcache:num_retrieve_requests_total": "retrieve_requests",
    "lmcache:num_store_requests_total": "store_requests",
    "lmcache:num_lookup_requests_total": "lookup_requests",
    "lmcache:local_cache_usage": "local_cache_usage_bytes",
    "lmcache:num_vllm_hit_tokens_total": "vllm_hit_tokens",
    "lmcache:num_prompt_tokens_total": "prompt_tokens",
    "lmcache:num_remote_read_bytes_total": "remote_read_bytes",
    "lmcache:num_remote_write_bytes_total": "remote_write_bytes",
    "lmcache:local_cpu_evict_count_total": "evictions",
    "lmcache:num_slow_retrieval_by_time_total": "slow_retrievals_by_time",
    "lmcache:num_slow_retrieval_by_speed_total": "slow_retrievals_by_speed",
    "lmcache:local_storage_usage": "local_storage_usage_bytes",
    "lmcache:remote_cache_usage": "remote_cache_usage_bytes",
}
# LMCache's multi-process mode, served through OpenTelemetry's Prometheus reader (LMCache
# 0.5.x lmcache/v1/mp_observability/subscribers/metrics/): lookup series carry model_name,
# L1 series no model (the page's one model is used); no worker_id.
LMCACHE_MP_COUNTERS: dict[str, str] = {
    "lmcache_mp_lookup_requested_tokens_total": "lookup_tokens",
    "lmcache_mp_lookup_hit_tokens_total": "lookup_hits",
    "lmcache_mp_lookups_requests_total": "lookup_requests",
    "lmcache_mp_lookup_hit_l1_tokens_total": "l1_hit_tokens",
    "lmcache_mp_lookup_hit_l2_tokens_total": "l2_hit_tokens",
    "lmcache_mp_l1_read_chunks_total": "l1_read_chunks",
    "lmcache_mp_l1_write_chunks_total": "l1_write_chunks",
    "lmcache_mp_l1_evicted_chunks_total": "l1_evicted_chunks",
}
# lmcache:* histogram -> (LMCacheSample field, factor to base units): LMCache's remote get/put
# times are milliseconds, its retrieve/store times seconds, its speeds tokens per second.
LMCACHE_HISTOGRAMS: dict[str, tuple[str, float]] = {
    "lmcache:time_to_retrieve": ("retrieve_seconds", 1.0),
    "lmcache:time_to_store": ("store_seconds", 1.0),
    "lmcache:remote_time_to_get": ("remote_get_seconds", 1e-3),
    "lmcache:remote_time_to_put": ("remote_put_seconds", 1e-3),
    "lmcache:retrieve_speed": ("retrieve_speed", 1.0),
    "lmcache:store_speed": ("store_speed", 1.0),
}

_LMCACHE_NAMES = frozenset(
    [*LMCACHE_COUNTERS, *LMCACHE_MP_COUNTERS, *(n for f in LMCACHE_HISTOGRAMS for n in sample_names(f))]
)
WANTED: frozenset[str] = frozenset(
    [n for names in _SCALARS.values() for n in names]
    + [name for name, _ in _BY_LABEL.values()]
    + [n for family in [*_HISTOGRAMS.values(), _TYPED_SIZE] for n in sample_names(family)]
    + [n for pair in _FLAT_TRANSFER.values() for n in pair]
    + [_TYPED_BYTES, _TYPED_TIME, _OFFLOAD_CONFIG, _CACHE_CONFIG]
    + [n for pair in _SUFFIXED for n in pair]
    + list(_LMCACHE_NAMES)
)
# Engines other than vLLM, each read by its own module (docs/tiers.md); kind from the page.
OTHER_ENGINES = (sglang, kvbm, trtllm)
# Names whose one parsed sample makes a target up besides vllm:/lmcache: ones (docs/DESIGN.md).
OTHER_ENGINE_NAMES: frozenset[str] = frozenset().union(
    *(m.WANTED for m in OTHER_ENGINES), LMCACHE_MP_COUNTERS
)
ENGINE_NAMES = "SGLang, KVBM, TensorRT-LLM"
WANTED = WANTED | OTHER_ENGINE_NAMES
WANTED_FAMILIES = families_of(WANTED)

_EngineKey = tuple[str, str]  # (model_name, engine)


def _key(labels: Labels) -> _EngineKey:
    return (labels.get("model_name", ""), labels.get("engine", "0"))


def _by_engine(samples: Iterable[tuple[Labels, float]]) -> dict[_EngineKey, float]:
    out: dict[_EngineKey, float] = {}
    for labels, value in samples:
        key = _key(labels)
        out[key] = out.get(key, 0.0) + value
    return out


def _merge(a: Histogram | None, b: Histogram) -> Histogram:
    """Two series of one engine's histogram (extra labels kvops does not split by) added up;
    where their buckets differ, the first is kept rather than a made-up merge."""
    if a is None:
        return b
    if [le for le, _ in a.buckets] != [le for le, _ in b.buckets]:
        return a
    buckets = tuple((le, x + y) for (le, x), (_, y) in zip(a.buckets, b.buckets, strict=True))
    return Histogram(buckets, a.sum + b.sum, a.count + b.count)


def _scaled(hist: Histogram, factor: float) -> Histogram:
    """A histogram in another unit: bounds and sum scaled, counts kept."""
    if factor == 1.0:
        return hist
    return Histogram(tuple((le * factor, c) for le, c in hist.buckets), hist.sum * factor, hist.count)


def _histograms_by_engine(result: ParseResult, family: str) -> dict[_EngineKey, Histogram]:
    out: dict[_EngineKey, Histogram] = {}
    for labels, hist in histograms(result, family):
        out[_key(labels)] = _merge(out.get(_key(labels)), hist)
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


def detect_format(result: ParseResult) -> str:
    """Which offload naming the exposition uses (informational, shown by `kvops top`).

    Read from the TYPE lines of the families kvops reads (a family may be declared without
    samples yet): all the parser keeps when given a wanted set."""
    types = {name: kind for name, kind in result.types.items() if name in WANTED_FAMILIES}
    if "vllm:kv_offload_store_bytes_total" in types or "vllm:kv_offload_store_bytes" in types:
        return "flat offload names (vLLM 0.24+)"
    if _TYPED_BYTES in types or "vllm:kv_offload_total_bytes" in types:
        return "transfer_type offload names (vLLM 0.16-0.23)"
    if any(name.startswith("vllm:") for name in types):
        return "no offload transfer metrics"
    if any(name.startswith("lmcache:") for name in types):
        return "lmcache"
    if any(name.startswith("sglang:") for name in result.types):
        return "sglang"
    if any(name.startswith("kvbm_") for name in result.types):
        return "dynamo-kvbm"
    if any(name.startswith("trtllm_") for name in result.types):
        return "trtllm"
    return "unknown"


def normalise(result: ParseResult, target: str) -> TargetSample:
    """Map one parsed exposition to a TargetSample (up when a vllm:/lmcache: sample parsed)."""
    engines: dict[_EngineKey, EngineSample] = {}

    def engine(key: _EngineKey) -> EngineSample:
        sample = engines.get(key)
        if sample is None:
            sample = engines[key] = EngineSample(target=target, model_name=key[0], engine=key[1])
        return sample

    for field_name, names in _SCALARS.items():
        for name in reversed(names):  # preferred name last, so it wins where both exist
            for key, value in _by_engine(result.get(name)).items():
                setattr(engine(key), field_name, value)

    for field_name, (name, label) in _BY_LABEL.items():
        for labels, value in result.get(name):
            by_label = getattr(engine(_key(labels)), field_name)
            value_key = labels.get(label, "")
            by_label[value_key] = by_label.get(value_key, 0.0) + value
    for field_name, family in _HISTOGRAMS.items():
        for key, hist in _histograms_by_engine(result, family).items():
            setattr(engine(key), field_name, hist)
    # Transfer sizes: the flat (0.24+) histogram where it has a series, else the transfer_type
    # one (0.16-0.23; pre-created, so it may show 0 loads where the flat one has no series yet).
    typed_sizes: dict[tuple[_EngineKey, str], Histogram] = {}
    for labels, hist in histograms(result, _TYPED_SIZE):
        direction = _direction(labels.get("transfer_type", ""))
        if direction is not None:
            slot = (_key(labels), f"{direction}_size")
            typed_sizes[slot] = _merge(typed_sizes.get(slot), hist)
    for (key, field_name), hist in typed_sizes.items():
        if getattr(engine(key), field_name) is None:
            setattr(engine(key), field_name, hist)

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
                by_edge = getattr(engine(_key(labels)), field_name)
                by_edge[edge] = by_edge.get(edge, 0.0) + value

    # Transfers: the flat (0.24+) pair where it has a sample, else the transfer_type pair.
    typed: dict[tuple[_EngineKey, str], list[float]] = {}
    cpu_named: set[_EngineKey] = set()
    for index, name in enumerate((_TYPED_BYTES, _TYPED_TIME)):
        for labels, value in result.get(name):
            if "CPU" in labels.get("transfer_type", "").split("_to_"):
                cpu_named.add(_key(labels))
            direction = _direction(labels.get("transfer_type", ""))
            if direction is None:
                continue
            slot = typed.setdefault((_key(labels), direction), [0.0, 0.0])
            slot[index] += value
    for (key, direction), (nbytes, seconds) in typed.items():
        setattr(engine(key), f"{direction}_bytes", nbytes)
        setattr(engine(key), f"{direction}_seconds", seconds)
        if key in cpu_named:  # transfer_type names the medium: GPU <-> CPU
            engine(key).offload_tier = "host"
    for direction, (bytes_name, time_name) in _FLAT_TRANSFER.items():
        flat_bytes = _by_engine(result.get(bytes_name))
        flat_time = _by_engine(result.get(time_name))
        for key, nbytes in flat_bytes.items():
            sample = engine(key)
            sample.offload_tier = "host"  # 0.24-0.33: the CPU offloading spec's counters
            setattr(sample, f"{direction}_bytes", nbytes)
            setattr(sample, f"{direction}_seconds", flat_time.get(key))

    tier_by_key, tier_by_engine = _cpu_tier_bytes(result)
    for key, size in tier_by_key.items():
        engine(key).cpu_tier_bytes = size
    for sample in engines.values():
        if sample.cpu_tier_bytes is None:
            sample.cpu_tier_bytes = tier_by_engine.get(sample.engine)
        if sample.cpu_tier_bytes is not None:
            sample.offload_tier = "host"

    # No offload tier unless the page shows one: a server without a connector still exports
    # vllm:external_prefix_cache_* (at 0) and prompt_tokens_by_source{external_kv_transfer} (0).
    declares_offload = any(name.startswith(_OFFLOAD_PREFIX) for name in result.types)
    for sample in engines.values():
        if not (declares_offload or _shows_connector(sample)):
            sample.offload_tier = None

    # A reader whose names the page lacks is not run (a set test in C, against each reader's
    # dozens of lookups on every vLLM page).
    present = result.samples.keys()
    lmcache = [] if _LMCACHE_NAMES.isdisjoint(present) else _lmcache_samples(result, target)
    others = [e for module in OTHER_ENGINES if not module.WANTED.isdisjoint(present)
              for e in module.normalise_into(result, target)]  # fmt: skip
    # up (docs/DESIGN.md): one sample of a family kvops reads for some engine parsed.
    up = result.has_prefixed_sample or any(result.samples.get(name) for name in OTHER_ENGINE_NAMES)
    error = (
        None if up else f"no vllm: or lmcache: sample, nor one of another engine kvops reads ({ENGINE_NAMES})"
    )
    return TargetSample(
        target=target,
        up=up,
        error=error,
        engines=sorted(engines.values(), key=lambda e: (e.model_name, _engine_order(e.engine))) + others,
        lmcache=lmcache,
        vllm_format=detect_format(result),
        parse_errors=len(result.errors),
    )


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


def _lmcache_samples(result: ParseResult, target: str) -> list[LMCacheSample]:
    """LMCache's own figures per (model, worker), in base units (LMCACHE_HISTOGRAMS)."""
    items: dict[tuple[str, str], LMCacheSample] = {}

    def item(labels: Labels) -> LMCacheSample:
        key = (labels.get("model_name", labels.get("served_model_name", "")), labels.get("worker_id", "0"))
        found = items.get(key)
        if found is None:
            found = items[key] = LMCacheSample(target=target, model_name=key[0], worker_id=key[1])
        return found

    for source_name, field_name in LMCACHE_COUNTERS.items():
        for labels, value in result.get(source_name):
            sample = item(labels)
            setattr(sample, field_name, (getattr(sample, field_name) or 0.0) + value)
    mp_models = {labels["model_name"] for name in LMCACHE_MP_COUNTERS for labels, _ in result.get(name)
                 if "model_name" in labels}  # fmt: skip
    only_model = next(iter(mp_models)) if len(mp_models) == 1 else ""
    for source_name, field_name in LMCACHE_MP_COUNTERS.items():
        for labels, value in result.get(source_name):
            sample = item({"model_name": labels.get("model_name", only_model), "worker_id": "0"})
            setattr(sample, field_name, (getattr(sample, field_name) or 0.0) + value)
    for family, (field_name, factor) in LMCACHE_HISTOGRAMS.items():
        for labels, hist in histograms(result, family):
            sample = item(labels)
            setattr(sample, field_name, _merge(getattr(sample, field_name), _scaled(hist, factor)))
    return sorted(items.values(), key=lambda s: s.key)


def _engine_order(engine: str) -> tuple[int, str]:
    return (int(engine), "") if engine.isdigit() else (1 << 30, engine)
