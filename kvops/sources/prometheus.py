"""`kvops top --prometheus URL`: the fleet view, every vLLM a Prometheus server knows.

Two instant queries over the HTTP API (/api/v1/query) per frame at most:
- the kvops_* series, where kvops exporters feed that Prometheus: decoded by
  kvops_exposition, as if the exporters had been scraped directly;
- else the raw vllm:* / lmcache:* series kvops reads, grouped by the `instance` label
  (one target per scraped vLLM) and normalised by kvops.sources.vllm.
Both paths turn the query result into the parser's ParseResult, so the one normaliser
handles every naming generation. The counters are cumulative in Prometheus as in vLLM, so
kvops.rates works unchanged on two instant queries taken an interval apart.
A Prometheus that cannot be reached is one target shown down, never an exception.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any
from urllib.parse import urlencode

from kvops.snapshot import Snapshot, TargetSample
from kvops.sources import kvops_exposition, vllm
from kvops.sources.exposition import Labels, ParseResult
from kvops.sources.http import FetchError, FetchOptions, HttpClient, normalise_target

# Labels Prometheus adds when it scrapes; not part of what the target exposed.
_SCRAPE_LABELS = ("__name__",)


def _name_regex(names: frozenset[str]) -> str:
    return "|".join(re.escape(n) for n in sorted(names))


def _selector(names: frozenset[str]) -> str:
    return '{__name__=~"' + _name_regex(names) + '"}'


KVOPS_QUERY = _selector(kvops_exposition.EXPORTED)
VLLM_QUERY = _selector(vllm.WANTED)
# When Prometheus last scraped: every exporter serves kvops_build_info, every vLLM release
# vllm:num_requests_running. A frame is new only when this moved, so frames between two
# Prometheus scrapes do not show zero rates.
KVOPS_STAMP = "max(timestamp(kvops_build_info))"
VLLM_STAMP = "max(timestamp(vllm:num_requests_running))"


def _value(raw: Any) -> float | None:
    try:
        return float(raw[1])
    except (TypeError, ValueError, IndexError):
        return None


def to_parse_result(series: list[dict[str, Any]]) -> ParseResult:
    """Instant-vector results -> the parser's shape: samples by name, labels without __name__."""
    result = ParseResult()
    for item in series:
        metric = item.get("metric") or {}
        name = metric.get("__name__")
        value = _value(item.get("value"))
        if not name or value is None:
            continue
        labels: Labels = {k: v for k, v in metric.items() if k not in _SCRAPE_LABELS}
        result.samples.setdefault(name, []).append((labels, value))
        if name.startswith(("vllm:", "lmcache:")):
            result.has_prefixed_sample = True
    return result


def _instance_target(instance: str) -> str:
    try:
        return normalise_target(instance)
    except Exception:  # an instance label that is not host:port (relabelled): keep it as given
        return instance


class PrometheusSource:
    live = True

    def __init__(self, url: str, timeout: float, options: FetchOptions | None = None) -> None:
        self.base = normalise_target(url)
        self.timeout = timeout
        self.options = options or FetchOptions()
        self.description = f"fleet view from Prometheus {self.base}"
        self._client = HttpClient(self.options)
        self._last_stamp: float | None = None

    def query(self, expr: str, deadline: float) -> list[dict[str, Any]]:
        """The result series of one instant query; FetchError on failure."""
        url = f"{self.base}/api/v1/query?{urlencode({'query': expr})}"
        text = self._client.fetch_text(url, deadline)
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:
            raise FetchError("Prometheus answered with something that is not JSON") from None
        if doc.get("status") != "success":
            raise FetchError(f"Prometheus query failed: {doc.get('error', 'unknown error')}")
        result = doc.get("data", {}).get("result") or []
        return result if isinstance(result, list) else []

    def _stamp(self, expr: str, deadline: float) -> float | None:
        series = self.query(expr, deadline)
        return _value(series[0].get("value")) if series else None

    def next(self) -> Snapshot | None:
        """A Snapshot stamped with Prometheus's last scrape time, or None when Prometheus
        has scraped nothing new since the last one."""
        start = time.monotonic()
        deadline = start + self.timeout
        try:
            stamp = self._stamp(KVOPS_STAMP, deadline)
            kvops = stamp is not None
            if not kvops:
                stamp = self._stamp(VLLM_STAMP, deadline)
            if stamp is None:
                raise FetchError("no kvops_* or vllm:* series in this Prometheus")
            if stamp == self._last_stamp:
                return None
            series = self.query(KVOPS_QUERY if kvops else VLLM_QUERY, deadline)
        except FetchError as exc:
            self._last_stamp = None
            return Snapshot(
                time=start, targets=[TargetSample(self.base, up=False, error=f"Prometheus: {exc}")]
            )
        self._last_stamp = stamp
        if kvops:
            return kvops_exposition.decode(to_parse_result(series), stamp)
        by_instance: dict[str, list[dict[str, Any]]] = {}
        for item in series:
            instance = (item.get("metric") or {}).get("instance", "")
            by_instance.setdefault(instance, []).append(item)
        snap = Snapshot(time=stamp)
        for instance, items in sorted(by_instance.items()):
            snap.targets.append(vllm.normalise(to_parse_result(items), _instance_target(instance)))
        return snap

    def close(self) -> None:
        self._client.close()
