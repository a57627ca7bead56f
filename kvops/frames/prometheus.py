"""`kvops top --prometheus URL`: the fleet view, computed by the store from its history.

The store (Prometheus, or anything behind its query API: VictoriaMetrics, Thanos, Mimir)
holds every engine's counters already, so one frame needs no waiting for a scrape:
- `max(timestamp(S))`: the newest stored sample, where every query of the frame is
  evaluated (S = kvops_build_info where kvops exporters feed the store, else
  vllm:num_requests_running, which every vLLM release serves);
- once: the store's scrape interval, from the gaps between one series' stored samples;
  the window W is 1.5 of it, so `x offset W` is an older stored sample than `x`;
- the counters' deltas over W, as `x - x offset W`: a plain difference of two stored
  samples, the same on every store (Prometheus's increase() extrapolates to the window's
  edges, VictoriaMetrics' does not). A negative difference (a counter reset) is dropped, so
  that engine's figure is unknown rather than wrong;
- the gauges (KV usage, running, waiting, the offload tier's size) at that instant;
- the time the deltas span: `timestamp(S) - timestamp(S offset W)` per series, the median.
Deltas and gauges go through the same decoders as a scrape (kvops_exposition for kvops_*
series, the engine registry for raw vllm:* ones, one target per `instance`), and the frame is a
pair of Snapshots, (before, after), whose counters start at zero: kvops.rates computes the
figures from them exactly as it does from two scrapes.

A store that cannot be reached is one target shown down in the live view; an answer that is
not a Prometheus query result is an error with one line (`--once`: exit 2).
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import re
import statistics
import time
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

from kvops.engines import registry
from kvops.errors import UsageError
from kvops.exposition.parser import Labels, ParseResult
from kvops.frames import kvops_exposition
from kvops.rates import EngineInterval, interval
from kvops.snapshot import GpuSample, Snapshot, TargetSample
from kvops.transport.http import FetchError, FetchOptions, HttpClient, normalise_target

# Labels the store adds or the delta query carries; not part of what the target exposed.
_NAME_LABEL = "kvops_name"  # the series name, kept through the subtraction by label_replace
_SCRAPE_LABELS = ("__name__", _NAME_LABEL)
STEP_LOOKBACK = "10m"  # how far back the scrape interval is read from
ENGINE_LIST_SECONDS = 30.0  # the live view's list of engines (labels only) is read this often


class BadAnswer(FetchError):
    """The store answered, but not with a Prometheus query result of the expected shape."""


@dataclass(frozen=True)
class Flavour:
    """One way engines reach the store: kvops exporters' kvops_* series, or raw vllm:*."""

    name: str
    stamp: str  # a series every engine (or exporter) serves on every scrape
    counters: tuple[str, ...]  # cumulative: read as deltas over the window
    gauges: tuple[str, ...]  # read at the instant


def _split(names: frozenset[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    # Every counter kvops reads is named *_total (names.py, and vLLM's own names).
    counters = tuple(sorted(n for n in names if n.endswith("_total")))
    return counters, tuple(sorted(n for n in names if not n.endswith("_total")))


KVOPS = Flavour("kvops", "kvops_build_info", *_split(kvops_exposition.EXPORTED))
VLLM = Flavour("vllm", "vllm:num_requests_running", *_split(registry.WANTED))


def _selector(names: tuple[str, ...], offset: str = "", matcher: str = "") -> str:
    regex = "|".join(re.escape(n) for n in names)
    extra = f",{matcher}" if matcher else ""
    return '{__name__=~"' + regex + '"' + extra + "}" + (f" offset {offset}" if offset else "")


def _named(selector: str) -> str:
    return f'label_replace({selector}, "{_NAME_LABEL}", "$1", "__name__", "(.+)")'


def delta_query(flavour: Flavour, offset: str, matcher: str = "") -> str:
    """Every counter's stored difference over the window, negative ones (resets) dropped."""
    now = _named(_selector(flavour.counters, matcher=matcher))
    before = _named(_selector(flavour.counters, offset, matcher))
    return f"({now} - {before}) >= 0"


# What the fleet's charts draw (kvops.top.history.deltas_of), each engine's names for it.
FLEET_COUNTERS: tuple[str, ...] = tuple(sorted(registry.CHART_COUNTERS))


def fleet_sums_query(names: tuple[str, ...], offset: str) -> str:
    """Each counter's stored difference over the window summed over the fleet (per
    transfer_type, which the 0.16-0.23 names need), resets dropped per series as in
    delta_query. One name at a time: the differences of one name need no label_replace to
    keep series apart, and the all-names form (label_replace on every series, then matching
    them) cost 2-3x as much on 2,000 engines (benchmarks/top_fleet.py)."""

    def one(name: str) -> str:
        total = f"sum by (transfer_type) (({name} - {name} offset {offset}) >= 0)"
        return f'label_replace({total}, "{_NAME_LABEL}", "{name}", "", "")'

    return " or ".join(one(n) for n in names)


def _offset(seconds: float) -> str:
    return f"{max(1, math.ceil(seconds * 1000))}ms"


def _value(raw: Any) -> float | None:
    """An instant vector's value; None for an unreadable one and for "NaN", "+Inf" and
    "-Inf" (the API's spellings, which a store holds): unknown."""
    try:
        value = float(raw[1])
    except (TypeError, ValueError, IndexError, KeyError):
        return None
    return value + 0.0 if math.isfinite(value) else None  # + 0.0: -0 is 0


def _check_series(result: Any, kind: str) -> list[dict[str, Any]]:
    if not isinstance(result, list) or not all(
        isinstance(item, dict) and isinstance(item.get("metric", {}), dict) for item in result
    ):
        raise BadAnswer(f"the {kind} result is not a list of series")
    return result


def to_parse_result(series: list[dict[str, Any]]) -> ParseResult:
    """Instant-vector results -> the parser's shape: samples by name, labels without __name__
    (a delta's name is in kvops_name)."""
    result = ParseResult()
    for item in series:
        metric = item.get("metric") or {}
        name = metric.get("__name__") or metric.get(_NAME_LABEL)
        value = _value(item.get("value"))
        if not isinstance(name, str) or value is None:
            continue
        labels: Labels = {str(k): str(v) for k, v in metric.items() if k not in _SCRAPE_LABELS}
        result.samples.setdefault(name, []).append((labels, value))
        if name.startswith(registry.UP_PREFIXES):
            result.has_prefixed_sample = True
    return result


def _instance_target(instance: str) -> str:
    try:
        return normalise_target(instance)
    except Exception:  # an instance label that is not host:port (relabelled): keep it as given
        return instance


def _zeroed_gpu(gpu: GpuSample) -> GpuSample:
    def zero(value: float | None) -> float | None:
        return None if value is None else 0.0

    return replace(
        gpu,
        pcie_tx_bytes=zero(gpu.pcie_tx_bytes),
        pcie_rx_bytes=zero(gpu.pcie_rx_bytes),
        pcie_replays=zero(gpu.pcie_replays),
        nvlink_tx_bytes=dict.fromkeys(gpu.nvlink_tx_bytes, 0.0),
        nvlink_rx_bytes=dict.fromkeys(gpu.nvlink_rx_bytes, 0.0),
        xgmi_read_bytes=dict.fromkeys(gpu.xgmi_read_bytes, 0.0),
        xgmi_write_bytes=dict.fromkeys(gpu.xgmi_write_bytes, 0.0),
    )


def before_of(after: Snapshot, seconds: float) -> Snapshot:
    """The start of a delta frame: every target up with no engine sample (kvops.rates counts
    an engine's counters from 0 then), the GPUs' counters at 0, `seconds` earlier."""
    targets = [TargetSample(t.target, up=True) for t in after.targets if t.up]
    return Snapshot(time=after.time - seconds, targets=targets, gpus=[_zeroed_gpu(g) for g in after.gpus])


def auth_options(
    bearer_token_file: str | None = None,
    basic_auth: str | None = None,
    ca_file: str | None = None,
    headers: list[str] | None = None,
) -> FetchOptions:
    """FetchOptions from `--prometheus-*` flags (UsageError with one line when one is bad).

    basic_auth is USER:PASSWORD_FILE (the password is read from a file, never the command
    line); headers are "Name: value" (Mimir's X-Scope-OrgID, say)."""
    extra: list[str] = []

    def read_secret(path: str, flag: str) -> str:
        try:
            with open(path, "rb") as f:
                raw = f.read(64 * 1024 + 1)
        except OSError as exc:
            raise UsageError(f"{flag} {path}: cannot read: {exc.strerror or exc}") from None
        if len(raw) > 64 * 1024:
            raise UsageError(f"{flag} {path}: larger than 64 KiB, not a secret")
        try:
            text = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise UsageError(f"{flag} {path}: not UTF-8 text") from None
        if not text or any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
            raise UsageError(f"{flag} {path}: empty or holds control characters")
        return text

    token = read_secret(bearer_token_file, "--prometheus-bearer-token-file") if bearer_token_file else None
    if basic_auth is not None:
        user, sep, path = basic_auth.partition(":")
        if not sep or not user or not path:
            raise UsageError("--prometheus-basic-auth: give USER:PASSWORD_FILE")
        if token:
            raise UsageError("give --prometheus-bearer-token-file or --prometheus-basic-auth, not both")
        password = read_secret(path, "--prometheus-basic-auth")
        extra.append("Authorization: Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    for header in headers or []:
        name, sep, value = header.partition(":")
        if not sep or not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", name.strip()):
            raise UsageError(f"--prometheus-header {header!r}: give 'Name: value'")
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
            raise UsageError(f"--prometheus-header {name.strip()}: control characters in the value")
        extra.append(f"{name.strip()}: {value.strip()}")
    if ca_file is not None:
        try:
            with open(ca_file, "rb"):
                pass
        except OSError as exc:
            raise UsageError(f"--prometheus-ca-file {ca_file}: cannot read: {exc.strerror or exc}") from None
    return FetchOptions(bearer_token=token, ca_file=ca_file, extra_headers=tuple(extra))


# (before, after). A store holding one sample has no interval yet: `before` is then empty,
# which leaves every rate unknown while the gauges show.
Frame = tuple[Snapshot, Snapshot]


class PrometheusSource:
    live = True

    def __init__(self, url: str, timeout: float, options: FetchOptions | None = None) -> None:
        self.base = normalise_target(url)
        self.timeout = timeout
        self.options = options or FetchOptions()
        self.description = f"fleet view from {self.base}"
        self._client = HttpClient(self.options)
        self._last_stamp: float | None = None
        self._step: dict[str, float | None] = {}  # flavour -> scrape interval, read once
        self.bytes_fetched = 0  # answer bytes, for benchmarks/top_fleet.py
        # The live view's page: the first `page` engines in target order (less what
        # `page_filter` leaves out) are fetched whole, the fleet only as sums, so a frame costs
        # O(rows shown). None: every engine (--once, and sorts on a figure).
        self.page: int | None = None
        self.page_filter = ""
        self.last_fleet: tuple[EngineInterval | None, int] | None = None  # (fleet figures, engines)
        self._engines: list[tuple[str, str, str]] = []  # (instance, model, engine), sorted
        self._engines_read = -math.inf

    def query(self, expr: str, deadline: float, at: float | None = None) -> list[dict[str, Any]]:
        """The result series of one instant query; FetchError (BadAnswer for a wrong shape)."""
        params = {"query": expr} if at is None else {"query": expr, "time": repr(at)}
        text = self._client.fetch_text(f"{self.base}/api/v1/query?{urlencode(params)}", deadline)
        self.bytes_fetched += len(text)
        try:
            doc = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            raise BadAnswer("the answer is not JSON") from None
        if not isinstance(doc, dict):
            raise BadAnswer("the answer is not a JSON object")
        if doc.get("status") != "success":
            error = doc.get("error", "unknown error")
            raise FetchError(f"query failed: {str(error)[:200]}")
        data = doc.get("data")
        if not isinstance(data, dict) or data.get("resultType") not in ("vector", "matrix", "scalar"):
            raise BadAnswer("the answer has no data.resultType of vector, matrix or scalar")
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data.get("result")}]
        return _check_series(data.get("result"), str(data["resultType"]))

    def _stamp(self, flavour: Flavour, deadline: float) -> float | None:
        series = self.query(f"max(timestamp({flavour.stamp}))", deadline)
        return _value(series[0].get("value")) if series else None

    def _scrape_step(self, flavour: Flavour, stamp: float, deadline: float) -> float | None:
        """The store's scrape interval: the median gap between one series' stored samples."""
        if flavour.name in self._step:
            return self._step[flavour.name]
        one = self.query(f"topk(1, timestamp({flavour.stamp}))", deadline, stamp)
        if not one:
            return None
        labels = one[0].get("metric") or {}
        matchers = ",".join(f'{k}="{_escape(str(v))}"' for k, v in sorted(labels.items()) if k != "__name__")
        rows = self.query(f"{flavour.stamp}{{{matchers}}}[{STEP_LOOKBACK}]", deadline, stamp)
        values = (rows[0].get("values") or []) if rows else []
        try:
            times = sorted(float(v[0]) for v in values if isinstance(v, list) and v)
        except (TypeError, ValueError):
            raise BadAnswer("the stored samples' timestamps are not numbers") from None
        times = [t for t in times if math.isfinite(t)]
        gaps = [b - a for a, b in itertools.pairwise(times) if b > a]
        step = statistics.median(gaps) if gaps else None
        self._step[flavour.name] = step
        return step

    def frame(self, deadline: float) -> Frame | None:
        """(before, after) for the store's newest sample, None when there is none newer than
        the last frame's. Raises FetchError."""
        flavour, stamp = KVOPS, self._stamp(KVOPS, deadline)
        if stamp is None:
            flavour, stamp = VLLM, self._stamp(VLLM, deadline)
        if stamp is None:
            raise FetchError("no kvops_* or vllm:* series in this store")
        if stamp == self._last_stamp:
            return None
        step = self._scrape_step(flavour, stamp, deadline)
        paged = self.page is not None and flavour is VLLM
        matcher = self._page_matcher(stamp, deadline) if paged else ""
        self.last_fleet = None
        gauges = self.query(_selector(flavour.gauges, matcher=matcher), deadline, stamp)
        deltas: list[dict[str, Any]] = []
        span: float | None = None
        if step is not None:  # two samples stored: an interval to show
            window = _offset(1.5 * step)
            deltas = self.query(delta_query(flavour, window, matcher), deadline, stamp)
            s = f"{flavour.stamp}{{{matcher}}}"
            spans = self.query(f"timestamp({s}) - timestamp({s} offset {window})", deadline, stamp)
            known = [v for v in (_value(item.get("value")) for item in spans) if v is not None and v > 0]
            span = statistics.median(known) if known else None
            if paged and span:
                sums = self.query(fleet_sums_query(FLEET_COUNTERS, window), deadline, stamp)
                self.last_fleet = (self._fleet_sums(sums, stamp, span), len(self._engines))
        after = self._decode(flavour, gauges + deltas, stamp)
        self._last_stamp = stamp
        return (before_of(after, span) if span else Snapshot(time=stamp)), after

    def set_page(self, page: int | None, text_filter: str = "") -> None:
        """Which engines the live view shows whole (see `page`); a change is fetched at the
        next call, without waiting for the store's next sample."""
        if (page, text_filter) != (self.page, self.page_filter):
            self.page, self.page_filter = page, text_filter
            self._last_stamp = None

    def _page_matcher(self, stamp: float, deadline: float) -> str:
        """An `instance=~"..."` matcher for the engines of the page. The list of engines (labels
        only) is read again when their count changed or after ENGINE_LIST_SECONDS."""
        count = self.query(f"count({VLLM.stamp})", deadline, stamp)
        total = _value(count[0].get("value")) if count else 0.0
        if total != len(self._engines) or time.monotonic() - self._engines_read > ENGINE_LIST_SECONDS:
            listed = self.query(f"group by (instance, model_name, engine) ({VLLM.stamp})", deadline, stamp)
            self._engines = sorted(
                {(str(m.get("instance", "")), str(m.get("model_name", "")), str(m.get("engine", "0")))
                 for m in (item.get("metric") or {} for item in listed)}
            )  # fmt: skip
            self._engines_read = time.monotonic()
        needle = self.page_filter.lower()
        chosen = [
            e for e in self._engines if needle in _instance_target(e[0]).lower() or needle in e[1].lower()
        ]
        instances = sorted({e[0] for e in chosen[: self.page or 0]})
        if not instances:
            return 'instance="kvops-no-engine-matches"'
        return 'instance=~"' + _escape("|".join(re.escape(i) for i in instances)) + '"'

    def _fleet_sums(self, series: list[dict[str, Any]], stamp: float, span: float) -> EngineInterval | None:
        """The whole fleet's figures (one series per counter name, summed by the store), read
        as one engine's: a kvops.rates entry."""
        after = Snapshot(time=stamp, targets=[registry.normalise(to_parse_result(series), "fleet")])
        after.targets[0].up = True
        entries = [
            t for t in interval(before_of(after, span), after).targets if isinstance(t, EngineInterval)
        ]
        return entries[0] if entries else None

    def _decode(self, flavour: Flavour, series: list[dict[str, Any]], stamp: float) -> Snapshot:
        if flavour is KVOPS:
            return kvops_exposition.decode(to_parse_result(series), stamp)
        by_instance: dict[str, list[dict[str, Any]]] = {}
        for item in series:
            instance = (item.get("metric") or {}).get("instance", "")
            by_instance.setdefault(str(instance), []).append(item)
        snap = Snapshot(time=stamp)
        for instance, items in sorted(by_instance.items()):
            snap.targets.append(registry.normalise(to_parse_result(items), _instance_target(instance)))
        return snap

    def next(self) -> Frame | None:
        """The live view's frame; a store that fails is one target shown down."""
        start = time.monotonic()
        try:
            return self.frame(start + self.timeout)
        except FetchError as exc:
            self._last_stamp = None
            down = TargetSample(self.base, up=False, error=f"Prometheus: {exc}")
            return Snapshot(time=start), Snapshot(time=start, targets=[down])

    def close(self) -> None:
        self._client.close()


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
