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
import functools
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
from kvops.operator_files import read_secret
from kvops.rates import EngineInterval, interval
from kvops.snapshot import GpuSample, Snapshot, TargetSample
from kvops.transport.http import FetchError, FetchOptions, HttpClient, normalise_target
from kvops.transport.multi import MultiFetcher

# Labels the store adds or the delta query carries; not part of what the target exposed.
_NAME_LABEL = "kvops_name"  # a series name carried as a label (a store or a recording rule may)
_SCRAPE_LABELS = ("__name__", _NAME_LABEL)
STEP_LOOKBACK = "10m"  # how far back the scrape interval is read from
MAX_STEP_SECONDS = 600.0  # so no gap between samples read over it is longer
MAX_TIME = 2.0**33  # the latest sample time taken from a store (year 2242)
# A store's answer is capped, and decoded with its objects counted, so a
# hostile or runaway answer costs bounded memory (a 16 MB answer decoded plainly cost 460 MB;
# 8 MiB of 93,000 engines now peaks at 181 MB, the process included).
MAX_ANSWER_BYTES = 8 * 2**20
MAX_ANSWER_SERIES = 100_000  # a name's series in one answer: 5,000 engines x 20 buckets
ONE_SHOT_SECONDS = 30.0  # `--once`: a store's queries over every engine may take seconds
PARALLEL_QUERIES = 4  # a frame's queries in flight at once, on connections kept alive
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


def names_query(flavour: Flavour) -> str:
    """Which of the flavour's names the store holds at the instant: each frame then asks for
    those alone (kvops reads 200 names across engine kinds and releases; a fleet serves a few
    dozen of them)."""
    return f"count by (__name__) ({_selector(flavour.counters + flavour.gauges)})"


def delta_query(name: str, offset: str, matcher: str = "") -> str:
    """One counter's stored difference over the window per series, negative ones (resets)
    dropped. One query per name: the name is known without label_replace on every series (that
    and matching every counter series at once cost 2-3x as much on 2,000 engines)."""
    series = f"{name}{{{matcher}}}"
    return f"({series} - {series} offset {offset}) >= 0"


# What the fleet's charts draw (kvops.top.history.deltas_of), each engine's names for it.
FLEET_COUNTERS: tuple[str, ...] = tuple(sorted(registry.CHART_COUNTERS))


def fleet_sum_query(name: str, offset: str) -> str:
    """One counter's stored difference over the window summed over the fleet (per
    transfer_type, which the 0.16-0.23 names need), resets dropped per series as in
    delta_query."""
    return f"sum by (transfer_type) (({name} - {name} offset {offset}) >= 0)"


def _offset(seconds: float) -> str:
    return f"{max(1, math.ceil(seconds * 1000))}ms"


def _value(raw: Any) -> float | None:
    """An instant vector's value; None for an unreadable one and for "NaN", "+Inf" and
    "-Inf" (the API's spellings, which a store holds): unknown."""
    try:
        value = float(raw[1])
    except (TypeError, ValueError, OverflowError, IndexError, KeyError):
        return None
    return value + 0.0 if math.isfinite(value) else None  # + 0.0: -0 is 0


def _time(raw: Any) -> float | None:
    """A sample time (Unix seconds) a store gave; None for one that is no number or outside
    1970 to 2^33 s (year 2242): a 400-digit time or 1e308 would make every window and
    offset computed from it overflow."""
    try:
        value = float(raw)
    except (TypeError, ValueError, OverflowError):
        return None
    return value if 0 < value < MAX_TIME else None


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


@functools.lru_cache(maxsize=16384)  # a fleet's instances, the same every frame
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
    # operator_files.read_secret: capped, one line, and refused when world-writable (any user
    # could then choose the credential sent to the store)
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


class _AnswerDecoder:
    """json.loads hooks for a query answer: integers and constants read as floats (a 400-digit
    integer is inf, so unknown, never an OverflowError), and decoding stopped past
    MAX_ANSWER_SERIES objects of each kind, so a runaway answer stops before its objects fill
    memory (a hook that only counts: sharing the strings too cost three times the decoding)."""

    def __init__(self) -> None:
        self.objects = 0

    def counted(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.objects += 1
        if self.objects > 2 * MAX_ANSWER_SERIES + 2:  # a series is two objects (itself, its metric)
            raise BadAnswer(f"the answer holds more than {MAX_ANSWER_SERIES:,} series")
        return obj

    def load(self, text: str) -> Any:
        return json.loads(text, object_hook=self.counted, parse_int=float, parse_constant=float)


def _answer_series(text: str) -> list[dict[str, Any]]:
    """The result series of one instant query's answer; FetchError (BadAnswer for a wrong
    shape)."""
    try:
        doc = _AnswerDecoder().load(text)
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


def _named(series: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """A one-name query's series with that name (a difference or a sum drops it)."""
    for item in series:
        metric = item.get("metric")
        if isinstance(metric, dict):  # this answer's own dict: named in place
            metric["__name__"] = name
        else:
            item["metric"] = {"__name__": name}
    return series


def _capped(exc: FetchError) -> FetchError:
    if "over the limit" in str(exc):  # kvops.transport.http's words for a body over the cap
        return FetchError(f"an answer over kvops's cap of {MAX_ANSWER_BYTES // 2**20} MiB a query")
    return exc


class PrometheusSource:
    live = True

    def __init__(self, url: str, timeout: float, options: FetchOptions | None = None) -> None:
        self.base = normalise_target(url)
        self.timeout = timeout
        self.options = replace(options or FetchOptions(), max_body_bytes=MAX_ANSWER_BYTES)
        self.description = f"fleet view from {self.base}"
        self._client = HttpClient(self.options)
        self._clients: list[HttpClient] = []  # one per query of a concurrent round
        self._multi = MultiFetcher(max_connections=PARALLEL_QUERIES)
        self._last_stamp: float | None = None
        self._step: dict[str, float] = {}  # flavour -> scrape interval, read once it is sane
        self.bytes_fetched = 0  # answer bytes, for benchmarks/top_fleet.py
        # The live view's page: the first `page` engines in target order (less what
        # `page_filter` leaves out) are fetched whole, the fleet only as sums, so a frame costs
        # O(rows shown). None: every engine (--once, and sorts on a figure).
        self.page: int | None = None
        self.page_filter = ""
        self.last_fleet: tuple[EngineInterval | None, int] | None = None  # (fleet figures, engines)
        self._engines: list[tuple[str, str, str]] = []  # (instance, model, engine), sorted
        self._engines_read = -math.inf
        self._names: dict[str, frozenset[str]] = {}  # flavour -> the names the store holds
        self._names_read = -math.inf

    def _url(self, expr: str, at: float | None) -> str:
        params = {"query": expr} if at is None else {"query": expr, "time": repr(at)}
        return f"{self.base}/api/v1/query?{urlencode(params)}"

    def query(self, expr: str, deadline: float, at: float | None = None) -> list[dict[str, Any]]:
        """The result series of one instant query; FetchError (BadAnswer for a wrong shape)."""
        try:
            text = self._client.fetch_text(self._url(expr, at), deadline)
        except FetchError as exc:
            raise _capped(exc) from None
        self.bytes_fetched += len(text)
        return _answer_series(text)

    def queries(
        self, exprs: list[str], deadline: float, at: float | None = None
    ) -> list[list[dict[str, Any]]]:
        """Several instant queries at `at`, PARALLEL_QUERIES at a time: the store answers one
        while kvops decodes another. The first failure (in `exprs`' order) is raised."""
        while len(self._clients) < len(exprs):
            self._clients.append(HttpClient(self.options))
        answers: list[list[dict[str, Any]] | FetchError] = [FetchError("not fetched")] * len(exprs)

        def done(index: int, outcome: str | FetchError, _seconds: float) -> None:
            if isinstance(outcome, FetchError):
                answers[index] = _capped(outcome)
                return
            self.bytes_fetched += len(outcome)
            try:
                answers[index] = _answer_series(outcome)
            except FetchError as exc:
                answers[index] = exc

        jobs = [(self._clients[i], self._url(e, at)) for i, e in enumerate(exprs)]
        self._multi.fetch(jobs, deadline, done)
        for answer in answers:
            if isinstance(answer, FetchError):
                raise answer
        return answers  # type: ignore[return-value]  # every one a list now

    def _newest(self, deadline: float) -> tuple[Flavour, float, float | None]:
        """The flavour the store holds (kvops exporters' first), its newest sample's time and,
        for a page, how many engines it holds now (asked in the same round)."""
        exprs = [f"max(timestamp({f.stamp}))" for f in (KVOPS, VLLM)]
        if self.page is not None:
            exprs.append(f"count({VLLM.stamp})")
        answers = self.queries(exprs, deadline)
        count = answers[2] if len(answers) > 2 else []
        engines = _value(count[0].get("value")) if count else 0.0
        for flavour, series in zip((KVOPS, VLLM), answers, strict=False):
            if series:
                stamp = _time(_value(series[0].get("value")))
                if stamp is None:
                    raise BadAnswer(f"the newest {flavour.stamp} sample's time is not a time")
                return flavour, stamp, engines
        raise FetchError("no kvops_* or vllm:* series in this store")

    def _scrape_step(self, flavour: Flavour, stamp: float, deadline: float) -> float | None:
        """The store's scrape interval: the median gap between one series' stored samples.
        Kept once known; a gap outside (0, MAX_STEP_SECONDS] is no interval (a hostile store's
        sample times 0 and 1e308), and a frame that fails forgets it (next())."""
        if flavour.name in self._step:
            return self._step[flavour.name]
        one = self.query(f"topk(1, timestamp({flavour.stamp}))", deadline, stamp)
        if not one:
            return None
        labels = one[0].get("metric") or {}
        matchers = ",".join(f'{k}="{_escape(str(v))}"' for k, v in sorted(labels.items()) if k != "__name__")
        rows = self.query(f"{flavour.stamp}{{{matchers}}}[{STEP_LOOKBACK}]", deadline, stamp)
        values = (rows[0].get("values") or []) if rows else []
        if not isinstance(values, list):
            raise BadAnswer("the stored samples are not a list")
        try:
            raw = [float(v[0]) for v in values if isinstance(v, list) and v]
        except (TypeError, ValueError):
            raise BadAnswer("the stored samples' timestamps are not numbers") from None
        times = sorted(t for t in (_time(r) for r in raw) if t is not None)
        gaps = [b - a for a, b in itertools.pairwise(times) if 0 < b - a <= MAX_STEP_SECONDS]
        if not gaps:
            return None
        step = self._step[flavour.name] = statistics.median(gaps)
        return step

    def _present(self, flavour: Flavour, stamp: float, deadline: float) -> frozenset[str]:
        """The flavour's names the store holds (names_query); read again with the engine list."""
        fresh = time.monotonic() - self._names_read <= ENGINE_LIST_SECONDS
        if flavour.name in self._names and (fresh or self.page is None):
            return self._names[flavour.name]
        wanted = frozenset(flavour.counters + flavour.gauges)
        held = self.query(names_query(flavour), deadline, stamp)
        names = frozenset(n for n in ((s.get("metric") or {}).get("__name__") for s in held) if n in wanted)
        self._names[flavour.name] = names  # type: ignore[assignment]  # str by the `in`
        self._names_read = time.monotonic()
        return self._names[flavour.name]

    def frame(self, deadline: float) -> Frame | None:
        """(before, after) for the store's newest sample, None when there is none newer than
        the last frame's. Raises FetchError.

        Asked: the names the store holds (once, then with the engine list), then, in one
        concurrent round, each held gauge and counter by name (for the page's engines in the
        live view), the time the window spans, and for a page the fleet's sums of the counters
        the charts draw."""
        flavour, stamp, engines = self._newest(deadline)
        if stamp == self._last_stamp:
            return None
        step = self._scrape_step(flavour, stamp, deadline)
        paged = self.page is not None and flavour is VLLM
        matcher = self._page_matcher(stamp, engines, deadline) if paged else ""
        held = self._present(flavour, stamp, deadline)
        gauges = [g for g in flavour.gauges if g in held]
        exprs = [f"{g}{{{matcher}}}" for g in gauges]
        counters: list[str] = []
        sums: list[str] = []
        window = _offset(1.5 * step) if step is not None else ""
        if step is not None:  # two samples stored: an interval to show
            counters = [c for c in flavour.counters if c in held]
            exprs += [delta_query(c, window, matcher) for c in counters]
            s = f"{flavour.stamp}{{{matcher}}}"
            exprs.append(f"timestamp({s}) - timestamp({s} offset {window})")
            if paged:
                sums = [c for c in FLEET_COUNTERS if c in held]
                exprs += [fleet_sum_query(c, window) for c in sums]
        answers = iter(self.queries(exprs, deadline, stamp)) if exprs else iter([])
        series = [item for name in gauges for item in _named(next(answers), name)]
        for name in counters:
            series += _named(next(answers), name)
        self.last_fleet = None
        span: float | None = None
        if step is not None:
            spans = next(answers)
            known = [v for v in (_value(item.get("value")) for item in spans) if v is not None and v > 0]
            span = statistics.median(known) if known else None
            if span is not None and not span <= MAX_STEP_SECONDS * 2:
                span = None  # not a window over stored samples: no interval rather than a wrong one
            if paged and span:
                summed = [item for name in sums for item in _named(next(answers), name)]
                self.last_fleet = (self._fleet_sums(summed, stamp, span), len(self._engines))
        after = self._decode(flavour, series, stamp)
        self._last_stamp = stamp
        return (before_of(after, span) if span else Snapshot(time=stamp)), after

    def once(self) -> Frame:
        """The one frame of `--once`: every engine, within ONE_SHOT_SECONDS (a store's deadline,
        not a 1 Hz frame's). Raises FetchError."""
        pair = self.frame(time.monotonic() + max(self.timeout, ONE_SHOT_SECONDS))
        assert pair is not None  # the first frame is always new
        return pair

    def set_page(self, page: int | None, text_filter: str = "") -> None:
        """Which engines the live view shows whole (see `page`); a change is fetched at the
        next call, without waiting for the store's next sample."""
        if (page, text_filter) != (self.page, self.page_filter):
            self.page, self.page_filter = page, text_filter
            self._last_stamp = None

    def _page_matcher(self, stamp: float, total: float | None, deadline: float) -> str:
        """An `instance=~"..."` matcher for the engines of the page. The list of engines (labels
        only) is read again when their count (`total`) changed or after ENGINE_LIST_SECONDS."""
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
            # Nothing read from a store that failed is kept: its interval and names are read
            # again once it answers (a hostile answer's interval would fail every later frame).
            self._last_stamp = None
            self._step.clear()
            self._names.clear()
            down = TargetSample(self.base, up=False, error=f"Prometheus: {exc}")
            return Snapshot(time=start), Snapshot(time=start, targets=[down])

    def close(self) -> None:
        self._multi.close()
        for client in (self._client, *self._clients):
            client.close()


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
