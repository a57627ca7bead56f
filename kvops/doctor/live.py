"""`kvops doctor --target URL`: read a running server's /metrics twice and report the live
offload signals the alerts watch, as findings with their playbooks.

The figures are kvops.rates' (the same as `kvops top --once --json`), over one interval of
INTERVAL_SECONDS; the thresholds are the alerts' (alerts/kvops-alerts.yml), applied to that
interval instead of their 15-30 minute windows, so a finding here is a symptom to confirm,
not a fired alert. Works for every engine kind kvops reads (docs/tiers.md).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass

from kvops.errors import UsageError, one_line
from kvops.playbooks_path import playbooks_dir
from kvops.rates import EngineInterval, interval
from kvops.scrape.target import TargetScraper
from kvops.snapshot import Snapshot, TargetSample
from kvops.termsafe import visible

INTERVAL_SECONDS = 10.0
FETCH_TIMEOUT_SECONDS = 10.0
HIT_RATE_LOW = 0.5  # KvopsOffloadHitRateLow
LOOKUP_P99_HIGH_SECONDS = 0.01  # KvopsOffloadLookupDelayHigh


@dataclass
class LiveFinding:
    id: str  # the alert's name: its playbook is playbooks/<id>.md
    severity: str
    target: str
    model_name: str
    engine: str
    engine_kind: str
    evidence: str
    playbook: str


def _read(scraper: TargetScraper) -> TargetSample:
    sample = scraper.scrape(time.monotonic() + FETCH_TIMEOUT_SECONDS)
    if not sample.up:
        raise UsageError(f"cannot read {scraper.url}: {one_line(sample.error)}")
    return sample


def findings_for(row: EngineInterval) -> list[tuple[str, str]]:
    """(alert id, evidence) for the signals this interval shows."""
    out: list[tuple[str, str]] = []
    failures = row.allocation_failures_per_second
    if failures:
        out.append(("KvopsOffloadAllocationFailuresSustained", f"{failures:.3g} failed stores/s"))
    elif row.dropped_tokens_per_second:
        dropped = row.dropped_tokens_per_second
        out.append(
            ("KvopsOffloadAllocationFailuresSustained", f"{dropped:.3g} KV tokens/s dropped without a copy")
        )
    if row.write_only_tier:
        out.append(
            ("KvopsOffloadWriteOnlyTier", f"{row.store_bytes or 0:.3g} B stored, nothing ever loaded back")
        )
    p99 = row.lookup_delay_p99_seconds.get("sync")
    if p99 is not None and p99 > LOOKUP_P99_HIGH_SECONDS:
        out.append(("KvopsOffloadLookupDelayHigh", f"sync lookup p99 {p99 * 1000:.3g} ms"))
    if row.external_hit_rate is not None and row.external_hit_rate < HIT_RATE_LOW:
        out.append(("KvopsOffloadHitRateLow", f"offload tier hit rate {row.external_hit_rate:.1%}"))
    if row.preemptions:
        out.append(("KvopsPreemptionsSustained", f"{row.preemptions:.0f} preemptions in the interval"))
    return out


def diagnose(url: str, interval_seconds: float = INTERVAL_SECONDS) -> tuple[list[LiveFinding], list[dict]]:
    """Findings and the interval's per-engine figures (JSON-ready)."""
    scraper = TargetScraper(url, probe=False)  # two pages and out: no filtered page to ask for
    try:
        first = Snapshot(time=time.monotonic(), targets=[_read(scraper)])
        time.sleep(interval_seconds)
        second = Snapshot(time=time.monotonic(), targets=[_read(scraper)])
    finally:
        scraper.close()
    doc = interval(first, second)
    found: list[LiveFinding] = []
    engines: list[dict] = []
    for row in doc.targets:
        if not isinstance(row, EngineInterval):
            continue
        engines.append(row.to_json())
        for alert, evidence in findings_for(row):
            playbook = str(playbooks_dir() / f"{alert}.md")
            found.append(
                LiveFinding(
                    alert,
                    "warning",
                    row.target,
                    row.model_name,
                    row.engine,
                    row.engine_kind,
                    evidence,
                    playbook,
                )
            )
    return found, engines


def run(url: str, as_json: bool, strict: bool, interval_seconds: float | None = None) -> int:
    if interval_seconds is None:
        interval_seconds = INTERVAL_SECONDS
    # The scraper logs a target going down for the long-running exporter; here doctor says why
    # itself, in its one line on stderr.
    scrape_log = logging.getLogger("kvops.scrape.target")
    level = scrape_log.level
    scrape_log.setLevel(logging.ERROR)
    try:
        found, engines = diagnose(url, interval_seconds)
    finally:
        scrape_log.setLevel(level)
    if as_json:
        doc = {"target": url, "interval_seconds": interval_seconds,
               "findings": [asdict(f) for f in found], "engines": engines}  # fmt: skip
        print(json.dumps(doc, allow_nan=False))
    else:
        print(_text(url, found, engines, interval_seconds))
    return 1 if (strict and found) else 0


def _pct(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.1%}"


def _bytes(value: float | None) -> str:
    return "unknown" if value is None else f"{value / 1e6:.3g} MB"


def figures(engine: dict) -> str:
    """What the thresholds were applied to, for one engine's interval (to_json's fields)."""
    moved = engine.get("store_bytes") is not None or engine.get("load_bytes") is not None
    parts = [f"local hit rate {_pct(engine.get('local_hit_rate'))}"]
    if engine.get("external_hit_rate") is None and not moved:
        return f"no offload traffic in the interval; {parts[0]}"
    parts.insert(0, f"offload tier hit rate {_pct(engine.get('external_hit_rate'))}")
    parts.append(f"stored {_bytes(engine.get('store_bytes'))}, loaded {_bytes(engine.get('load_bytes'))}")
    failures = engine.get("allocation_failures_per_second")
    parts.append("allocation failures " + ("unknown" if failures is None else f"{failures:.3g}/s"))
    p99 = (engine.get("lookup_delay_p99_seconds") or {}).get("sync")
    parts.append("sync lookup p99 " + ("unknown" if p99 is None else f"{p99 * 1000:.3g} ms"))
    preemptions = engine.get("preemptions")
    parts.append("preemptions " + ("unknown" if preemptions is None else f"{preemptions:.0f}"))
    return ", ".join(parts)


def _text(url: str, found: list[LiveFinding], engines: list[dict], seconds: float) -> str:
    lines = [f"kvops doctor --target {visible(url)}: {len(engines)} engine(s), {seconds:g} s interval"]
    flagged = {(f.target, f.model_name, f.engine) for f in found}
    for e in engines:
        key = (e.get("target"), e.get("model_name"), e.get("engine"))
        verdict = "signals below" if key in flagged else "healthy, no alert threshold crossed"
        where = f"{visible(str(e.get('model_name')))} engine {visible(str(e.get('engine')))}"
        lines.append(f"  {where} ({visible(str(e.get('engine_kind')))}): {verdict}: {visible(figures(e))}")
    for f in found:
        where = f"{visible(f.model_name)} engine {visible(f.engine)} ({f.engine_kind})"
        lines.append(f"  {f.severity:<8} {f.id:<42} {where}: {visible(f.evidence)}")
        lines.append(f"           playbook: {f.playbook}")
    return "\n".join(lines)
