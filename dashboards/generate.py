"""Generate the kvops Grafana dashboards from kvops.names; `--check` fails when they are stale.

    python dashboards/generate.py           # (re)write dashboards/*.json
    python dashboards/generate.py --check   # CI: exit 1 if a file is stale or stray, or a
                                            # panel queries a name the exporter does not define

Panels are plain dicts, as in vLLM's tools/generate_grafana_dashboards.py: no Grafana SDK to
pin. Every query names only kvops_* metrics from kvops.names or recording rules defined in
alerts/*.yml, so a renamed metric breaks this check instead of a dashboard in production.
Each file is the "Import dashboard" JSON model (no API envelope), Grafana 12 schema.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DASHBOARDS_DIR = Path(__file__).resolve().parent
# Check against this checkout's kvops/names.py, installed or not (python dashboards/generate.py).
sys.path.insert(0, str(DASHBOARDS_DIR.parent))
from kvops import names  # noqa: E402

ALERTS_DIR = DASHBOARDS_DIR.parent / "alerts"
SCHEMA_VERSION = 41  # Grafana 12.0; Grafana 11 imports it unchanged
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
RATE = "$__rate_interval"
# Labels Prometheus adds to every scraped series, on top of a spec's own labels.
SCRAPE_LABELS = ("job", "instance")

# Label matchers, one per variable set. Engines and targets show in legends, not filters.
SEL = 'job=~"$job", instance=~"$instance"'
SEL_MODEL = f'{SEL}, model_name=~"$model"'
SEL_GPU = f'{SEL}, gpu=~"$gpu"'
BY_ENGINE = "job, instance, target, model_name, engine, engine_kind"
LEGEND_ENGINE = "{{model_name}} · engine {{engine}} · {{target}}"
LEGEND_GPU = "GPU {{gpu}} · {{instance}}"


# --- PromQL names -----------------------------------------------------------------------------

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_BRACES = re.compile(r"\{[^{}]*\}")
_BRACKETS = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"(?<![\w:.$])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?")
_KEYWORDS = frozenset(
    {
        "and",
        "or",
        "unless",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "offset",
        "inf",
        "nan",
    }
)
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^{}]*)\}")
_MATCHER_LABEL = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")


def metric_names(expr: str) -> set[str]:
    """The metric (and recording-rule) names a PromQL expression selects.

    Strips strings, label matchers, range/subquery brackets and grouping clauses, then keeps
    identifiers that are neither keywords nor function calls. Enough for the expressions
    kvops writes; it is a checker, not a PromQL parser (Prometheus itself parses them in the
    live test).
    """
    text = _STRING.sub('""', expr)
    text = _BRACES.sub(" ", text)
    text = _BRACKETS.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    found: set[str] = set()
    for match in _IDENT.finditer(text):
        ident, call = match.group(1), match.group(2)
        if call or ident.lower() in _KEYWORDS:
            continue
        found.add(ident)
    return found


def selector_labels(expr: str) -> dict[str, set[str]]:
    """metric name -> label names its `name{...}` selectors match on."""
    text = _STRING.sub('""', expr)
    out: dict[str, set[str]] = {}
    for match in _SELECTOR.finditer(text):
        out.setdefault(match.group(1), set()).update(_MATCHER_LABEL.findall(match.group(2)))
    return out


def recording_rules(alerts_dir: Path = ALERTS_DIR) -> set[str]:
    """Names recorded by the rule files in alerts/ (the tests under alerts/tests are not rules)."""
    recorded: set[str] = set()
    for path in sorted(alerts_dir.glob("*.yml")):
        doc = yaml.safe_load(path.read_text()) or {}
        for group in doc.get("groups", []):
            recorded.update(rule["record"] for rule in group.get("rules", []) if "record" in rule)
    return recorded


def unknown_names(expr: str, recorded: set[str]) -> list[str]:
    """Problems with one expression: names nobody defines, labels a metric does not carry."""
    # A histogram's samples are <name>_bucket{le}, _sum, _count: each is a name it exposes.
    specs = {n: spec for spec in names.all_specs() for n in spec.sample_names}
    used = metric_names(expr)
    problems = [f"unknown metric {n!r}" for n in sorted(used - specs.keys() - recorded)]
    if not used:
        problems.append("selects no metric")
    for name, labels in selector_labels(expr).items():
        spec = specs.get(name)
        if spec is None:
            continue
        allowed = set(spec.labels) | ({"le"} if name.endswith("_bucket") else set())
        extra = labels - allowed - set(SCRAPE_LABELS)
        problems += [f"{name} has no label {label!r}" for label in sorted(extra)]
    return problems


# --- panels -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    expr: str
    legend: str = ""


@dataclass
class Panel:
    title: str
    description: str
    targets: list[Target]
    unit: str
    kind: str = "timeseries"  # or "stat"
    width: int = 12
    height: int = 8
    min: float | None = None
    max: float | None = None
    thresholds: list[tuple[float, str]] = field(default_factory=list)  # (from value, colour)
    states: dict[int, tuple[str, str]] = field(default_factory=dict)  # value -> (text, colour)
    # The last target on a right-hand axis with this unit (two quantities, one time axis).
    right_unit: str | None = None


@dataclass
class Row:
    title: str
    panels: list[Panel]


def _field_config(panel: Panel) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [{"color": "green", "value": None}]
    steps += [{"color": colour, "value": value} for value, colour in panel.thresholds]
    defaults: dict[str, Any] = {
        "unit": panel.unit,
        "color": {"mode": "thresholds" if panel.kind == "stat" else "palette-classic"},
        "thresholds": {"mode": "absolute", "steps": steps},
        # vLLM ratios are NaN when nothing was looked up: say so rather than draw a gap.
        "mappings": [{"type": "special", "options": {"match": "nan", "result": {"text": "No traffic"}}}],
    }
    if panel.states:
        states = {str(v): {"text": text, "color": colour} for v, (text, colour) in panel.states.items()}
        defaults["mappings"].insert(0, {"type": "value", "options": states})
    if panel.min is not None:
        defaults["min"] = panel.min
    if panel.max is not None:
        defaults["max"] = panel.max
    if panel.kind == "timeseries":
        defaults["custom"] = {
            "drawStyle": "line",
            "lineWidth": 1,
            "fillOpacity": 10,
            "showPoints": "never",
            "spanNulls": False,
            "thresholdsStyle": {"mode": "line" if panel.thresholds else "off"},
        }
    overrides: list[dict[str, Any]] = []
    if panel.right_unit is not None:
        overrides.append(
            {
                "matcher": {"id": "byFrameRefID", "options": chr(ord("A") + len(panel.targets) - 1)},
                "properties": [
                    {"id": "custom.axisPlacement", "value": "right"},
                    {"id": "unit", "value": panel.right_unit},
                    {"id": "min", "value": 0},
                    {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
                ],
            }
        )
    return {"defaults": defaults, "overrides": overrides}


def _options(panel: Panel) -> dict[str, Any]:
    if panel.kind == "stat":
        return {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value",
            "graphMode": "none",
            "justifyMode": "auto",
            "orientation": "auto",
            "textMode": "auto",
        }
    return {
        "legend": {
            "displayMode": "table",
            "placement": "bottom",
            "showLegend": True,
            "calcs": ["lastNotNull", "max"],
        },
        "tooltip": {"mode": "multi", "sort": "desc"},
    }


def _panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    return {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "fieldConfig": _field_config(panel),
        "options": _options(panel),
        "targets": [
            {
                "refId": chr(ord("A") + i),
                "datasource": DATASOURCE,
                "editorMode": "code",
                "expr": t.expr,
                "legendFormat": t.legend or "__auto",
                "range": panel.kind == "timeseries",
                "instant": panel.kind == "stat",
            }
            for i, t in enumerate(panel.targets)
        ],
    }


def _layout(rows: list[Row]) -> list[dict[str, Any]]:
    """Rows top to bottom; panels left to right, wrapping at Grafana's 24 columns."""
    out: list[dict[str, Any]] = []
    panel_id, y = 1, 0
    for row in rows:
        out.append(
            {
                "id": panel_id,
                "type": "row",
                "title": row.title,
                "collapsed": False,
                "panels": [],
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
            }
        )
        panel_id, y = panel_id + 1, y + 1
        x, line_height = 0, 0
        for panel in row.panels:
            if x + panel.width > 24:
                x, y, line_height = 0, y + line_height, 0
            out.append(_panel_json(panel, panel_id, x, y))
            panel_id += 1
            x += panel.width
            line_height = max(line_height, panel.height)
        y += line_height
    return out


def _query_variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "definition": query,
        "query": {"qryType": 1, "query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "refresh": 2,  # on time range change: engines come and go
        "includeAll": True,
        "allValue": ".*",
        "multi": True,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "options": [],
        "regex": "",
        "sort": 1,
        "hide": 0,
    }


def _variables(extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    datasource = {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "options": [],
        "refresh": 1,
        "regex": "",
        "hide": 0,
    }
    return [
        datasource,
        # kvops_collector_success is served by every exporter, with or without targets or GPUs.
        _query_variable("job", "Job", "label_values(kvops_collector_success, job)"),
        _query_variable(
            "instance", "Instance", 'label_values(kvops_collector_success{job=~"$job"}, instance)'
        ),
        *extra,
    ]


def _dashboard(
    uid: str, title: str, description: str, rows: list[Row], variables: list[dict[str, Any]]
) -> dict:
    return {
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "description": description,
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "id": None,
        "links": [
            {
                "type": "dashboards",
                "tags": ["kvops"],
                "asDropdown": False,
                "includeVars": True,
                "keepTime": True,
                "title": "kvops dashboards",
            }
        ],
        "panels": _layout(rows),
        "refresh": "30s",
        "schemaVersion": SCHEMA_VERSION,
        "tags": ["kvops", "vllm"],
        "templating": {"list": variables},
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "browser",
        "title": title,
        "uid": uid,
        "version": 1,
    }


# --- the dashboards -----------------------------------------------------------------------------


def offload_overview() -> dict[str, Any]:
    def rate(metric: str, matchers: str = "") -> str:
        sel = f"{SEL_MODEL}, {matchers}" if matchers else SEL_MODEL
        return f"rate({metric}{{{sel}}}[{RATE}])"

    def per(numerator: str, denominator: str) -> str:
        return f"{rate(numerator)} / {rate(denominator)}"

    rows = [
        Row(
            "Status",
            [
                Panel(
                    "Targets up",
                    "vLLM endpoints the exporters scrape, 1 when the last scrape parsed. "
                    "Metric: `kvops_target_up`.",
                    [Target(f"kvops_target_up{{{SEL}}}", "{{target}}")],
                    "none",
                    kind="stat",
                    width=8,
                    height=4,
                    states={0: ("down", "red"), 1: ("up", "green")},
                ),
                Panel(
                    "Collectors",
                    "Whether each exporter source (vllm, lmcache, host, nvidia, amd) succeeded on its last "
                    "run, worst instance shown. A failing source costs only its own series; a GPU vendor's "
                    "collector fails for good on a host without that vendor. "
                    "Metric: `kvops_collector_success`.",
                    [Target(f"min by (collector) (kvops_collector_success{{{SEL}}})", "{{collector}}")],
                    "none",
                    kind="stat",
                    width=8,
                    height=4,
                    states={0: ("failing", "orange"), 1: ("ok", "green")},
                ),
                Panel(
                    "CPU offload tier size",
                    "Configured size of each engine's CPU offload tier (vllm:kv_offload_config_info, else "
                    "--kv-offloading-size). Metric: `kvops_offload_cpu_tier_bytes`.",
                    [
                        Target(
                            f"max by ({BY_ENGINE}) (kvops_offload_cpu_tier_bytes{{{SEL_MODEL}}})",
                            LEGEND_ENGINE,
                        )
                    ],
                    "bytes",
                    kind="stat",
                    width=8,
                    height=4,
                ),
            ],
        ),
        Row(
            "Prefix cache",
            [
                Panel(
                    "Local (GPU) prefix-cache hit rate",
                    "Share of looked-up prompt tokens found in GPU HBM over 5m windows. "
                    'Metric: `kvops:prefix_cache_hit_ratio:rate5m{tier="local"}`.',
                    [
                        Target(
                            f'kvops:prefix_cache_hit_ratio:rate5m{{{SEL_MODEL}, tier="local"}}', LEGEND_ENGINE
                        )
                    ],
                    "percentunit",
                    min=0,
                    max=1,
                ),
                Panel(
                    "Offload tier (external) hit rate",
                    "Share of tokens looked up in the KV offload tier that were found there, 5m windows. "
                    "Under 50% while in use fires KvopsOffloadHitRateLow. vLLM 0.11.x counts external "
                    "queries over the whole prompt. "
                    'Metric: `kvops:prefix_cache_hit_ratio:rate5m{tier="external"}`.',
                    [
                        Target(
                            f'kvops:prefix_cache_hit_ratio:rate5m{{{SEL_MODEL}, tier="external"}}',
                            LEGEND_ENGINE,
                        )
                    ],
                    "percentunit",
                    min=0,
                    max=1,
                    thresholds=[(0.5, "transparent")],
                ),
            ],
        ),
        Row(
            "Offload transfers",
            [
                Panel(
                    "Transfer bandwidth (bytes over transfer time)",
                    "DMA bandwidth while copying: bytes over summed transfer time, per direction (store = "
                    "GPU to offload tier, load = back). Compare with the PCIe link max on the GPU dashboard. "
                    "Metric: `kvops:offload_bandwidth_bytes_per_second:rate5m`.",
                    [
                        Target(
                            f"kvops:offload_bandwidth_bytes_per_second:rate5m{{{SEL_MODEL}}}",
                            "{{direction}} · " + LEGEND_ENGINE,
                        )
                    ],
                    "Bps",
                    min=0,
                ),
                Panel(
                    "Offered load (bytes over wall time)",
                    "Bytes offloaded and loaded back per second of wall time: the traffic the tier puts on "
                    "the PCIe link. Metric: `kvops_offload_transfer_bytes_total`.",
                    [
                        Target(
                            rate("kvops_offload_transfer_bytes_total"),
                            "{{direction}} · " + LEGEND_ENGINE,
                        )
                    ],
                    "Bps",
                    min=0,
                ),
                Panel(
                    "Load : store ratio",
                    "Bytes loaded back per byte stored, 5m windows: how much of what is offloaded is reused. "
                    "Near 0 with a full tier means blocks are evicted before reuse. "
                    "Metric: `kvops:offload_load_store_ratio:rate5m`.",
                    [Target(f"kvops:offload_load_store_ratio:rate5m{{{SEL_MODEL}}}", LEGEND_ENGINE)],
                    "percentunit",
                    min=0,
                ),
                Panel(
                    "Transfer time share",
                    "Seconds spent transferring per second of wall time, summed over workers, per direction. "
                    "Metric: `kvops_offload_transfer_seconds_total`.",
                    [
                        Target(
                            rate("kvops_offload_transfer_seconds_total"),
                            "{{direction}} · " + LEGEND_ENGINE,
                        )
                    ],
                    "percentunit",
                    min=0,
                ),
            ],
        ),
        Row(
            "Offload tiers (docs/tiers.md)",
            [
                Panel(
                    "Prompt tokens by source",
                    "Where each prompt token came from, per second: local_compute (prefilled), "
                    "local_cache_hit (GPU prefix cache), external_kv_transfer (offload tier / connector); "
                    "SGLang reports only source=total. Metric: `kvops_prompt_tokens_total`.",
                    [
                        Target(
                            f"sum by ({BY_ENGINE}, source) ({rate('kvops_prompt_tokens_total')})",
                            "{{source}} · " + LEGEND_ENGINE,
                        )
                    ],
                    "short",
                    min=0,
                ),
                Panel(
                    "Prefill saved per tier (share of prompt tokens)",
                    "Share of prompt tokens each tier served instead of prefill, 5m windows: device is the "
                    "GPU prefix cache, host/disk/p2p/storage the offload tiers. "
                    "Metric: `kvops:prompt_tokens_cached_share:rate5m`.",
                    [
                        Target(
                            f"kvops:prompt_tokens_cached_share:rate5m{{{SEL_MODEL}}}",
                            "{{source}} · " + LEGEND_ENGINE,
                        )
                    ],
                    "percentunit",
                    min=0,
                    max=1,
                ),
                Panel(
                    "Offload payoff (tokens saved per GB moved)",
                    "Prompt tokens the offload tiers served per GB copied to and from them, 5m windows. "
                    "Low with heavy traffic: the tier costs PCIe and saves little prefill. "
                    "Metric: `kvops:offload_tokens_saved_per_gb_moved:rate5m`.",
                    [Target(f"kvops:offload_tokens_saved_per_gb_moved:rate5m{{{SEL_MODEL}}}", LEGEND_ENGINE)],
                    "short",
                    min=0,
                ),
                Panel(
                    "Tier pressure: failed and skipped stores",
                    "Stores per second that found no room (allocation failures, vLLM 0.26+; SGLang's dropped "
                    "tokens) or were skipped under the store threshold. Absent until the first event. "
                    "Metrics: `kvops_offload_allocation_failures_total`, "
                    "`kvops_offload_stores_skipped_total`, `kvops_offload_dropped_tokens_total`.",
                    [
                        Target(rate("kvops_offload_allocation_failures_total"), "failed · " + LEGEND_ENGINE),
                        Target(rate("kvops_offload_stores_skipped_total"), "skipped · " + LEGEND_ENGINE),
                        Target(
                            rate("kvops_offload_dropped_tokens_total"), "dropped tokens · " + LEGEND_ENGINE
                        ),
                    ],
                    "short",
                    min=0,
                ),
                Panel(
                    "Does offloading pay off: TTFT p90 and the offload share",
                    "Time to first token p90 per engine (left axis, from the engine's own buckets) beside "
                    "the share of prompt tokens the tiers below the GPU served (right axis, dashed), on one "
                    "time axis, 5m windows: a share that rises while TTFT does not fall is offload that "
                    "does not pay (docs/payoff.md). Metrics: `kvops:time_to_first_token_seconds:p90_rate5m`, "
                    "`kvops:offload_prompt_tokens_share:rate5m`.",
                    [
                        Target(
                            f"kvops:time_to_first_token_seconds:p90_rate5m{{{SEL_MODEL}}}",
                            "TTFT p90 · " + LEGEND_ENGINE,
                        ),
                        Target(
                            f"kvops:offload_prompt_tokens_share:rate5m{{{SEL_MODEL}}}",
                            "offload share · " + LEGEND_ENGINE,
                        ),
                    ],
                    "s",
                    min=0,
                    right_unit="percentunit",
                    width=24,
                ),
                Panel(
                    "Queue time p90",
                    "p90 of the time requests waited before being scheduled, 5m windows, from the engine's "
                    "own buckets: offload that relieves KV pressure should shorten it. "
                    "Metric: `kvops:request_queue_time_seconds:p90_rate5m`.",
                    [Target(f"kvops:request_queue_time_seconds:p90_rate5m{{{SEL_MODEL}}}", LEGEND_ENGINE)],
                    "s",
                    min=0,
                ),
                Panel(
                    "Offload lookup delay p99",
                    "p99 of one offload lookup (mode=sync, inside the scheduler step) and of a deferred "
                    "lookup (mode=async), 5m windows. Sync over 10 ms fires KvopsOffloadLookupDelayHigh. "
                    "Metric: `kvops:offload_lookup_delay_seconds:p99_rate5m`.",
                    [
                        Target(
                            f"kvops:offload_lookup_delay_seconds:p99_rate5m{{{SEL_MODEL}}}",
                            "{{mode}} · " + LEGEND_ENGINE,
                        )
                    ],
                    "s",
                    min=0,
                    thresholds=[(0.01, "orange")],
                ),
                Panel(
                    "CPU tier chunks pinned by transfers",
                    "Share of the CPU tier's chunks held by in-flight transfers (op=any|read|write). This is "
                    "NOT how full the tier is. Metric: `kvops_offload_cpu_in_flight_ratio`.",
                    [
                        Target(
                            f"kvops_offload_cpu_in_flight_ratio{{{SEL_MODEL}}}", "{{op}} · " + LEGEND_ENGINE
                        )
                    ],
                    "percentunit",
                    min=0,
                    max=1,
                ),
                Panel(
                    "Loaded bytes: engine count vs GPU host-link receive",
                    "Bytes the engines say they loaded back to the GPU against bytes the GPUs their "
                    "processes use received over their host link (all traffic), per target: PCIe, or "
                    "NVLink-C2C on Grace (GPM-measured). Loads above the receive are counted but not "
                    "moved over this link. Metrics: `kvops_offload_transfer_bytes_total`, "
                    "`kvops_gpu_host_link_receive_bytes_total`.",
                    [
                        Target(
                            "sum by (job, instance, target) "
                            "(" + rate("kvops_offload_transfer_bytes_total", 'direction="load"') + ")",
                            "engine loads · {{target}}",
                        ),
                        Target(
                            "sum by (job, instance, target) (kvops_target_gpu_info{" + SEL + "} "
                            "* on (job, instance, gpu, uuid) group_left () "
                            "sum without (kind, vendor) "
                            f"(rate(kvops_gpu_host_link_receive_bytes_total{{{SEL}}}[{RATE}])))",
                            "host-link receive · {{target}}",
                        ),
                    ],
                    "Bps",
                    min=0,
                ),
                Panel(
                    "Blocks moved between tiers (KVBM)",
                    "KV blocks per second by edge (<from>_to_<to>), where the engine counts blocks only "
                    "(Dynamo KVBM; no block size on its page, so no bytes), and the blocks whose move "
                    "failed (its object storage reads and writes; KvopsOffloadTransferFailures). Metrics: "
                    "`kvops_offload_transfer_blocks_total`, `kvops_offload_edge_failed_blocks_total`.",
                    [
                        Target(
                            f"sum by ({BY_ENGINE}, edge) ({rate('kvops_offload_transfer_blocks_total')})",
                            "{{edge}} · " + LEGEND_ENGINE,
                        ),
                        Target(
                            f"sum by ({BY_ENGINE}, edge) ({rate('kvops_offload_edge_failed_blocks_total')})",
                            "failed {{edge}} · " + LEGEND_ENGINE,
                        ),
                    ],
                    "short",
                    min=0,
                ),
                Panel(
                    "Tier fill",
                    "How full each offload tier is where the engine says: used/capacity tokens (SGLang "
                    "host pool) or the engine's own ratio (TensorRT-LLM host pool). "
                    "Metrics: `kvops_offload_tier_used_tokens`, `kvops_offload_tier_capacity_tokens`, "
                    "`kvops_offload_tier_usage_ratio`.",
                    [
                        Target(
                            f"kvops_offload_tier_used_tokens{{{SEL_MODEL}}}"
                            f" / kvops_offload_tier_capacity_tokens{{{SEL_MODEL}}}",
                            "{{tier}} · " + LEGEND_ENGINE,
                        ),
                        Target(
                            f"kvops_offload_tier_usage_ratio{{{SEL_MODEL}}}", "{{tier}} · " + LEGEND_ENGINE
                        ),
                    ],
                    "percentunit",
                    min=0,
                    max=1,
                ),
            ],
        ),
        Row(
            "Multi-tier and SimpleCPU offloading (vLLM)",
            [
                Panel(
                    "Chunk hit rate per tier",
                    "vLLM multi-tier offloading (TieringOffloadingSpec): chunks found over chunks looked up "
                    "in each tier, 5m windows (host = the CPU primary, disk = a filesystem tier, storage = "
                    "an object store or remote tier). "
                    "Metrics: `kvops_offload_tier_chunk_hits_total`, "
                    "`kvops_offload_tier_chunk_lookups_total`.",
                    [
                        Target(
                            per(
                                "kvops_offload_tier_chunk_hits_total",
                                "kvops_offload_tier_chunk_lookups_total",
                            ),
                            "{{tier}} · " + LEGEND_ENGINE,
                        )
                    ],
                    "percentunit",
                    min=0,
                    max=1,
                ),
                Panel(
                    "Tier bandwidth while transferring",
                    "Promotions (read: tier to CPU primary) and cascades (write: primary to tier), bytes "
                    "over summed transfer time, 5m windows. "
                    "Metrics: `kvops_offload_tier_{read,write}_{bytes,seconds}_total`.",
                    [
                        Target(
                            per(
                                "kvops_offload_tier_read_bytes_total", "kvops_offload_tier_read_seconds_total"
                            ),
                            "read {{tier}} · " + LEGEND_ENGINE,
                        ),
                        Target(
                            per(
                                "kvops_offload_tier_write_bytes_total",
                                "kvops_offload_tier_write_seconds_total",
                            ),
                            "write {{tier}} · " + LEGEND_ENGINE,
                        ),
                    ],
                    "Bps",
                    min=0,
                ),
                Panel(
                    "Tier job failures and jobs in flight",
                    "Failed promotions and cascades per second (KvopsOffloadTierJobFailures) and cascade "
                    "jobs in flight (a backlog that never drains fires KvopsOffloadCascadeBacklog). Metrics: "
                    "`kvops_offload_tier_{promotion,cascade}_failures_total`, "
                    "`kvops_offload_tier_active_cascades`.",
                    [
                        Target(
                            rate("kvops_offload_tier_promotion_failures_total"),
                            "promotion failures {{tier}} · " + LEGEND_ENGINE,
                        ),
                        Target(
                            rate("kvops_offload_tier_cascade_failures_total"),
                            "cascade failures {{tier}} · " + LEGEND_ENGINE,
                        ),
                        Target(
                            f"kvops_offload_tier_active_cascades{{{SEL_MODEL}}}",
                            "cascades in flight {{tier}} · " + LEGEND_ENGINE,
                        ),
                    ],
                    "short",
                    min=0,
                ),
                Panel(
                    "SimpleCPU offload: store decisions by outcome",
                    "SimpleCPUOffloadConnector's store decisions per second, in blocks (no block size is "
                    "exposed): dropped_cpu_full is the pool being full (KvopsOffloadPoolFull). "
                    "Metric: `kvops_offload_simple_save_outcomes_blocks_total`.",
                    [
                        Target(
                            "sum by ("
                            + BY_ENGINE
                            + ", outcome) ("
                            + rate("kvops_offload_simple_save_outcomes_blocks_total")
                            + ")",
                            "{{outcome}} · " + LEGEND_ENGINE,
                        )
                    ],
                    "short",
                    min=0,
                ),
            ],
        ),
        # --- issue 42 (h42a): vLLM KV connectors and tiering back-pressure -----------------------
        Row(
            "KV connectors and tier back-pressure",
            [
                Panel(
                    "KV transfer bandwidth by connector",
                    "NIXL and MooncakeConnector (P/D and peer transfer): bytes over summed transfer time of "
                    "successful transfers, 5m windows. "
                    "Metrics: `kvops_kv_transfer_size_bytes_sum`, `kvops_kv_transfer_seconds_sum`.",
                    [
                        Target(
                            per("kvops_kv_transfer_size_bytes_sum", "kvops_kv_transfer_seconds_sum"),
                            "{{connector}} · " + LEGEND_ENGINE,
                        )
                    ],
                    "Bps",
                    min=0,
                ),
                Panel(
                    "KV transfer failures and expired requests",
                    "Failed transfers (NIXL's include handshakes, notifications; KvopsKvTransferFailures), "
                    "failed receives (Mooncake) and requests whose KV expired before a decode instance "
                    "read it (KvopsKvRequestsExpired), per second. Metrics: "
                    "`kvops_kv_transfer_{failures,failed_receives,expired_requests}_total`.",
                    [
                        Target(
                            rate("kvops_kv_transfer_failures_total"),
                            "failed {{connector}} · " + LEGEND_ENGINE,
                        ),
                        Target(
                            rate("kvops_kv_transfer_failed_receives_total"),
                            "failed receives {{connector}} · " + LEGEND_ENGINE,
                        ),
                        Target(
                            rate("kvops_kv_transfer_expired_requests_total"),
                            "expired {{connector}} · " + LEGEND_ENGINE,
                        ),
                    ],
                    "short",
                    min=0,
                ),
                Panel(
                    "Tier back-pressure: blocks dropped",
                    "Blocks vLLM's back-pressure detector dropped instead of storing them in a slow "
                    "secondary tier, per second, per configured tier (KvopsOffloadTierBackpressureDrops). "
                    "Metric: `kvops_offload_tier_backpressure_blocks_dropped_total`.",
                    [
                        Target(
                            rate("kvops_offload_tier_backpressure_blocks_dropped_total"),
                            "{{tier_name}} ({{tier}}) · " + LEGEND_ENGINE,
                        )
                    ],
                    "short",
                    min=0,
                ),
                Panel(
                    "Storage connector bytes and failed operations",
                    "MooncakeStoreConnector and 3FS per operation: bytes per second, and operations whose "
                    "status was not ok per second (right axis). Metrics: "
                    "`kvops_offload_storage_operation_bytes_total`, "
                    "`kvops_offload_storage_operations_not_ok_total`.",
                    [
                        Target(
                            rate("kvops_offload_storage_operation_bytes_total"),
                            "{{operation}} · " + LEGEND_ENGINE,
                        ),
                        Target(
                            rate("kvops_offload_storage_operations_not_ok_total"),
                            "not ok {{operation}} · " + LEGEND_ENGINE,
                        ),
                    ],
                    "Bps",
                    min=0,
                    right_unit="short",
                ),
            ],
        ),
        Row(
            "Scheduler",
            [
                Panel(
                    "GPU KV cache usage",
                    "Share of GPU KV cache blocks in use. Near 1 with requests waiting or preemptions means "
                    "the GPU KV cache is the limit. Metric: `kvops_vllm_kv_cache_usage_ratio`.",
                    [Target(f"kvops_vllm_kv_cache_usage_ratio{{{SEL_MODEL}}}", LEGEND_ENGINE)],
                    "percentunit",
                    min=0,
                    max=1,
                    thresholds=[(0.9, "orange"), (0.98, "red")],
                ),
                Panel(
                    "Preemption rate",
                    "Requests the scheduler preempted per second (out of GPU KV blocks). Sustained, it fires "
                    "KvopsPreemptionsSustained. Metric: `kvops_vllm_preemptions_total`.",
                    [Target(rate("kvops_vllm_preemptions_total"), LEGEND_ENGINE)],
                    "reqps",
                    min=0,
                ),
                Panel(
                    "Requests running and waiting",
                    "Requests in model execution batches and waiting to be scheduled. "
                    "Metrics: `kvops_vllm_requests_running`, `kvops_vllm_requests_waiting`.",
                    [
                        Target(f"kvops_vllm_requests_running{{{SEL_MODEL}}}", "running · " + LEGEND_ENGINE),
                        Target(f"kvops_vllm_requests_waiting{{{SEL_MODEL}}}", "waiting · " + LEGEND_ENGINE),
                    ],
                    "short",
                    min=0,
                ),
            ],
        ),
    ]
    model = _query_variable(
        "model",
        "Model",
        'label_values(kvops_vllm_requests_running{job=~"$job", instance=~"$instance"}, model_name)',
    )
    return _dashboard(
        "kvops-offload-overview",
        "kvops / KV offload overview",
        "vLLM KV-cache offloading per model and engine: prefix-cache hit rates by tier, offload transfer "
        "bandwidth and load, GPU KV usage, preemptions. Served by `kvops exporter`.",
        rows,
        _variables([model]),
    )


def gpu_host_memory() -> dict[str, Any]:
    def rate(metric: str) -> str:
        return f"rate({metric}{{{SEL_GPU}}}[{RATE}])"

    rows = [
        Row(
            "GPU",
            [
                Panel(
                    "GPU memory",
                    "GPU memory in use and installed. Metrics: `kvops_gpu_memory_used_bytes`, "
                    "`kvops_gpu_memory_total_bytes`.",
                    [
                        Target(f"kvops_gpu_memory_used_bytes{{{SEL_GPU}}}", "used · " + LEGEND_GPU),
                        Target(f"kvops_gpu_memory_total_bytes{{{SEL_GPU}}}", "total · " + LEGEND_GPU),
                    ],
                    "bytes",
                    min=0,
                ),
                Panel(
                    "PCIe TX/RX against link max",
                    "Bytes per second over PCIe (TX = device to host, where offload stores go; RX = host "
                    "to device, loads), from the byte counter where the device has one, else the driver's "
                    "sampled rate; against the link's usable maximum per direction. Metrics: "
                    "`kvops_gpu_pcie_transmit_bytes_total`, `kvops_gpu_pcie_receive_bytes_total`, "
                    "`kvops_gpu_pcie_transmit_bytes_per_second`, `kvops_gpu_pcie_receive_bytes_per_second`, "
                    "`kvops_gpu_pcie_link_max_bytes_per_second`.",
                    [
                        Target(
                            f"{rate('kvops_gpu_pcie_transmit_bytes_total')} "
                            f"or kvops_gpu_pcie_transmit_bytes_per_second{{{SEL_GPU}}}",
                            "TX · " + LEGEND_GPU,
                        ),
                        Target(
                            f"{rate('kvops_gpu_pcie_receive_bytes_total')} "
                            f"or kvops_gpu_pcie_receive_bytes_per_second{{{SEL_GPU}}}",
                            "RX · " + LEGEND_GPU,
                        ),
                        Target(
                            f"kvops_gpu_pcie_link_max_bytes_per_second{{{SEL_GPU}}}",
                            "link max · " + LEGEND_GPU,
                        ),
                    ],
                    "Bps",
                    min=0,
                ),
                Panel(
                    "GPU utilization",
                    "Share of the driver's sample period the GPU was busy. "
                    "Metric: `kvops_gpu_utilization_ratio`.",
                    [Target(f"kvops_gpu_utilization_ratio{{{SEL_GPU}}}", LEGEND_GPU)],
                    "percentunit",
                    min=0,
                    max=1,
                ),
                Panel(
                    "PCIe link generation and width",
                    "Current and maximum PCIe generation and lane count. A current link below the maximum "
                    "under load (not at idle, where ASPM lowers it) has trained down: offload transfers "
                    "slow with it. "
                    "Metrics: `kvops_gpu_pcie_link_generation`, `kvops_gpu_pcie_link_width_lanes`.",
                    [
                        Target(
                            f"kvops_gpu_pcie_link_generation{{{SEL_GPU}}}", "Gen {{kind}} · " + LEGEND_GPU
                        ),
                        Target(
                            f"kvops_gpu_pcie_link_width_lanes{{{SEL_GPU}}}", "lanes {{kind}} · " + LEGEND_GPU
                        ),
                    ],
                    "none",
                    min=0,
                ),
                Panel(
                    "PCIe replays",
                    "Link-level retransmissions per second. Rising for 15 minutes fires "
                    "KvopsGpuPcieReplaysRising. Metric: `kvops_gpu_pcie_replay_total`.",
                    [Target(rate("kvops_gpu_pcie_replay_total"), LEGEND_GPU)],
                    "short",
                    min=0,
                ),
                # --- host link (issue 45): PCIe, or NVLink-C2C on Grace ---------------------------
                Panel(
                    "Host link TX/RX against link max (PCIe or NVLink-C2C)",
                    "Bytes per second over the link the GPU's host copies ride: PCIe, or NVLink-C2C on "
                    "Grace Hopper / Grace Blackwell, where NVML's GPM measures it and PCIe stays near "
                    "zero; against the link's maximum per direction from the driver. Metrics: "
                    "`kvops_gpu_host_link_transmit_bytes_total`, `kvops_gpu_host_link_receive_bytes_total`, "
                    "`kvops_gpu_host_link_max_bytes_per_second`.",
                    [
                        Target(
                            f"{rate('kvops_gpu_host_link_transmit_bytes_total')} "
                            f"or kvops_gpu_host_link_transmit_bytes_per_second{{{SEL_GPU}}}",
                            "TX {{kind}} · " + LEGEND_GPU,
                        ),
                        Target(
                            f"{rate('kvops_gpu_host_link_receive_bytes_total')} "
                            f"or kvops_gpu_host_link_receive_bytes_per_second{{{SEL_GPU}}}",
                            "RX {{kind}} · " + LEGEND_GPU,
                        ),
                        Target(
                            f"kvops_gpu_host_link_max_bytes_per_second{{{SEL_GPU}}}",
                            "link max {{kind}} · " + LEGEND_GPU,
                        ),
                    ],
                    "Bps",
                    min=0,
                ),
                Panel(
                    "Host link errors",
                    "Health counters of the host link per second: PCIe replays, L0 to recovery "
                    "transitions, NAKs, bad TLPs/DLLPs and AER-style counts (NVML fields 169, 173-182), "
                    "NVLink-C2C error interrupts and replays (231-233). Metric: "
                    "`kvops_gpu_host_link_errors_total`.",
                    [Target(rate("kvops_gpu_host_link_errors_total"), "{{counter}} · " + LEGEND_GPU)],
                    "short",
                    min=0,
                ),
                Panel(
                    "NVLink traffic",
                    "Bytes per second over each NVIDIA NVLink link, transmitted and received. "
                    "Metrics: `kvops_gpu_nvlink_transmit_bytes_total`, "
                    "`kvops_gpu_nvlink_receive_bytes_total`.",
                    [
                        Target(
                            rate("kvops_gpu_nvlink_transmit_bytes_total"), "TX link {{link}} · " + LEGEND_GPU
                        ),
                        Target(
                            rate("kvops_gpu_nvlink_receive_bytes_total"), "RX link {{link}} · " + LEGEND_GPU
                        ),
                    ],
                    "Bps",
                    min=0,
                ),
                Panel(
                    "XGMI traffic",
                    "Bytes per second over each AMD XGMI link, read and written. "
                    "Metrics: `kvops_gpu_xgmi_read_bytes_total`, `kvops_gpu_xgmi_write_bytes_total`.",
                    [
                        Target(rate("kvops_gpu_xgmi_read_bytes_total"), "read link {{link}} · " + LEGEND_GPU),
                        Target(
                            rate("kvops_gpu_xgmi_write_bytes_total"), "write link {{link}} · " + LEGEND_GPU
                        ),
                    ],
                    "Bps",
                    min=0,
                ),
            ],
        ),
        Row(
            "Host memory",
            [
                Panel(
                    "Host available RAM against the offload tier",
                    "MemAvailable and MemTotal from /proc/meminfo, with the KV offload tier configured on "
                    "the host. Available under a tenth of the tier fires KvopsHostMemoryLowForOffload. "
                    "Metrics: `kvops_host_memory_available_bytes`, `kvops_host_memory_total_bytes`, "
                    "`instance:kvops_offload_cpu_tier_bytes:sum`.",
                    [
                        Target(f"kvops_host_memory_available_bytes{{{SEL}}}", "available · {{instance}}"),
                        Target(f"kvops_host_memory_total_bytes{{{SEL}}}", "total · {{instance}}"),
                        Target(
                            f"instance:kvops_offload_cpu_tier_bytes:sum{{{SEL}}}",
                            "offload tier · {{instance}}",
                        ),
                    ],
                    "bytes",
                    min=0,
                ),
                Panel(
                    "Shmem and Mlocked",
                    "Shared memory (tmpfs, /dev/shm, the offload tier's mmap, pinned buffers) and locked "
                    "memory from /proc/meminfo. Metrics: `kvops_host_memory_shmem_bytes`, "
                    "`kvops_host_memory_mlocked_bytes`.",
                    [
                        Target(f"kvops_host_memory_shmem_bytes{{{SEL}}}", "Shmem · {{instance}}"),
                        Target(f"kvops_host_memory_mlocked_bytes{{{SEL}}}", "Mlocked · {{instance}}"),
                    ],
                    "bytes",
                    min=0,
                ),
                Panel(
                    "/dev/shm free",
                    "Free space in /dev/shm, where vLLM's CPU offload tier lives, with the tier size. Under "
                    "a tenth of the tier fires KvopsShmFreeLowForOffload. Metrics: "
                    "`kvops_host_shm_free_bytes`, `kvops_host_shm_size_bytes`, "
                    "`instance:kvops_offload_cpu_tier_bytes:sum`.",
                    [
                        Target(f"kvops_host_shm_free_bytes{{{SEL}}}", "free · {{instance}}"),
                        Target(f"kvops_host_shm_size_bytes{{{SEL}}}", "size · {{instance}}"),
                        Target(
                            f"instance:kvops_offload_cpu_tier_bytes:sum{{{SEL}}}",
                            "offload tier · {{instance}}",
                        ),
                    ],
                    "bytes",
                    min=0,
                ),
                Panel(
                    "NUMA node free memory",
                    "Free and total memory per NUMA node. Pinned offload buffers on the node far from the "
                    "GPU cost transfer bandwidth; one node running dry while another is free points there. "
                    "Metrics: `kvops_host_numa_memory_free_bytes`, `kvops_host_numa_memory_total_bytes`.",
                    [
                        Target(
                            f"kvops_host_numa_memory_free_bytes{{{SEL}}}", "free node {{node}} · {{instance}}"
                        ),
                        Target(
                            f"kvops_host_numa_memory_total_bytes{{{SEL}}}",
                            "total node {{node}} · {{instance}}",
                        ),
                    ],
                    "bytes",
                    min=0,
                ),
                Panel(
                    "vLLM process memory",
                    "Memory of each vLLM target's process tree on this host, by kind (rss_anon, rss_shmem, "
                    "locked, pinned). Metric: `kvops_vllm_process_memory_bytes`.",
                    [Target(f"kvops_vllm_process_memory_bytes{{{SEL}}}", "{{kind}} · {{target}}")],
                    "bytes",
                    min=0,
                ),
            ],
        ),
    ]
    gpu = _query_variable(
        "gpu", "GPU", 'label_values(kvops_gpu_info{job=~"$job", instance=~"$instance"}, gpu)'
    )
    return _dashboard(
        "kvops-gpu-host-memory",
        "kvops / GPU and host memory",
        "GPU memory and PCIe/NVLink/XGMI traffic, and the host memory KV offloading lives in: available "
        "RAM, Shmem, Mlocked, /dev/shm, vLLM process memory. Served by `kvops exporter`.",
        rows,
        _variables([gpu]),
    )


def kv_store() -> dict[str, Any]:
    """A KV store's own view (Mooncake's master, engine_kind="mooncake"; docs/tiers.md): a store is
    a target of its own, model_name "", so this dashboard filters by store, not by model."""
    sel = f'{SEL}, engine_kind="mooncake", target=~"$store"'
    legend = "{{target}}"

    def rate(metric: str, matchers: str = "") -> str:
        return f"rate({metric}{{{sel}{', ' + matchers if matchers else ''}}}[{RATE}])"

    def gauge(metric: str, matchers: str = "") -> str:
        return f"{metric}{{{sel}{', ' + matchers if matchers else ''}}}"

    memory = 'medium="memory"'
    rows = [
        Row(
            "Store capacity",
            [
                Panel(
                    "Allocated and capacity by medium",
                    "What the store holds and can hold in memory, on NoF SSD and in its file tier "
                    "(3FS/NFS). Memory near its capacity with puts refused fires KvopsKvStoreFull. "
                    "Metrics: `kvops_kv_store_allocated_bytes`, `kvops_kv_store_capacity_bytes`.",
                    [
                        Target(gauge("kvops_kv_store_allocated_bytes"), "allocated {{medium}} · " + legend),
                        Target(gauge("kvops_kv_store_capacity_bytes"), "capacity {{medium}} · " + legend),
                    ],
                    "bytes",
                    min=0,
                ),
                Panel(
                    "Keys and clients",
                    "Keys the store holds, and the clients alive by their last ping (each mounts memory). "
                    "Metrics: `kvops_kv_store_keys`, `kvops_kv_store_active_clients`.",
                    [
                        Target(gauge("kvops_kv_store_keys"), "keys · " + legend),
                        Target(gauge("kvops_kv_store_active_clients"), "clients · " + legend),
                    ],
                    "short",
                    min=0,
                ),
                Panel(
                    "Fullest segments",
                    "Bytes allocated in each mounted memory segment (one per client). One full segment "
                    "among empty ones is a client that mounted too little. Metric: "
                    "`kvops_kv_store_segment_allocated_bytes`.",
                    [Target(gauge("kvops_kv_store_segment_allocated_bytes"), "{{segment}} · " + legend)],
                    "bytes",
                    min=0,
                ),
            ],
        ),
        Row(
            "Store traffic",
            [
                Panel(
                    "Lookup hit rate",
                    "Gets whose lookup found a completed replica over all lookups: the store's own hit "
                    "rate (a vLLM connector's row counts the same traffic from its side). Metrics: "
                    "`kvops_kv_store_lookup_hits_total`, `kvops_kv_store_lookups_total`.",
                    [
                        Target(
                            f"{rate('kvops_kv_store_lookup_hits_total')}"
                            f" / {rate('kvops_kv_store_lookups_total')}",
                            legend,
                        )
                    ],
                    "percentunit",
                    min=0,
                    max=1,
                ),
                Panel(
                    "Bytes served by medium",
                    "Bytes of the lookups the store served from memory and from its file tier. Metric: "
                    "`kvops_kv_store_hit_bytes_total`.",
                    [Target(rate("kvops_kv_store_hit_bytes_total"), "{{medium}} · " + legend)],
                    "Bps",
                    min=0,
                ),
                Panel(
                    "Puts and lookups",
                    "Puts completed and lookups per second. Metrics: `kvops_kv_store_puts_total`, "
                    "`kvops_kv_store_lookups_total`.",
                    [
                        Target(rate("kvops_kv_store_puts_total"), "puts · " + legend),
                        Target(rate("kvops_kv_store_lookups_total"), "lookups · " + legend),
                    ],
                    "reqps",
                    min=0,
                ),
            ],
        ),
        Row(
            "Store failures and eviction",
            [
                Panel(
                    "Puts lost",
                    "Puts refused for want of space (KvopsKvStoreFull) and puts revoked or discarded, "
                    "whose data never landed (KvopsKvStorePutsAbandoned). A put of a key already held "
                    "is a failed start that loses nothing: not shown. Metrics: "
                    "`kvops_kv_store_put_no_space_failures_total`, `kvops_kv_store_puts_abandoned_total`.",
                    [
                        Target(rate("kvops_kv_store_put_no_space_failures_total"), "no space · " + legend),
                        Target(rate("kvops_kv_store_puts_abandoned_total"), "abandoned · " + legend),
                    ],
                    "reqps",
                    min=0,
                ),
                Panel(
                    "Eviction",
                    "Bytes evicted per second beside the memory capacity turned over per 10 minutes "
                    "(KvopsKvStoreEvictionStorm fires when the first passes the second for 15 minutes). "
                    "Metrics: `kvops_kv_store_evicted_bytes_total`, `kvops_kv_store_capacity_bytes`.",
                    [
                        Target(rate("kvops_kv_store_evicted_bytes_total"), "evicted · " + legend),
                        Target(
                            f"{gauge('kvops_kv_store_capacity_bytes', memory)} / 600",
                            "capacity per 10 min · " + legend,
                        ),
                    ],
                    "Bps",
                    min=0,
                ),
                Panel(
                    "Promotions and lookups that missed",
                    "Objects promoted from the file tier into memory, and lookups that found nothing "
                    "(a missing key fails its lookup). Metrics: `kvops_kv_store_promotions_total`, "
                    "`kvops_kv_store_get_failures_total`.",
                    [
                        Target(rate("kvops_kv_store_promotions_total"), "promoted · " + legend),
                        Target(rate("kvops_kv_store_get_failures_total"), "missed · " + legend),
                    ],
                    "reqps",
                    min=0,
                ),
            ],
        ),
    ]
    store = _query_variable(
        "store",
        "Store",
        'label_values(kvops_kv_store_keys{job=~"$job", instance=~"$instance"}, target)',
    )
    return _dashboard(
        "kvops-kv-store",
        "kvops / KV store",
        "A KV store's own view of the storage tier (Mooncake's master): capacity and use, keys, "
        "lookups and hits, bytes served, refused and abandoned puts, eviction. Served by `kvops exporter`.",
        rows,
        _variables([store]),
    )


def build() -> dict[str, dict[str, Any]]:
    """file name -> dashboard JSON model."""
    return {
        "kvops-offload-overview.json": offload_overview(),
        "kvops-gpu-host-memory.json": gpu_host_memory(),
        "kvops-kv-store.json": kv_store(),
    }


def render(dashboard: dict[str, Any]) -> str:
    return json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n"


def panel_queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, expr) for every query target of every panel."""
    return [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]


def check(out_dir: Path, dashboards: dict[str, dict[str, Any]], recorded: set[str]) -> list[str]:
    """Everything wrong with the committed dashboards, one line each; empty when all is well."""
    problems: list[str] = []
    for file_name, dashboard in dashboards.items():
        path = out_dir / file_name
        if not path.is_file():
            problems.append(f"{file_name}: missing; run python dashboards/generate.py")
        elif path.read_text() != render(dashboard):
            problems.append(f"{file_name}: stale; run python dashboards/generate.py")
        for title, expr in panel_queries(dashboard):
            problems += [f"{file_name}: panel {title!r}: {p}" for p in unknown_names(expr, recorded)]
    stray = sorted(p.name for p in out_dir.glob("*.json") if p.name not in dashboards)
    problems += [f"{name}: not produced by generate.py; remove it or add it there" for name in stray]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate the kvops Grafana dashboards.")
    parser.add_argument(
        "--check", action="store_true", help="fail if dashboards/ differs from what would be generated"
    )
    parser.add_argument("--out", type=Path, default=DASHBOARDS_DIR, help="directory of the JSON files")
    args = parser.parse_args(argv)
    if not args.out.is_dir():
        print(f"generate.py: error: --out {args.out} is not a directory", file=sys.stderr)
        return 2
    dashboards = build()
    recorded = recording_rules()
    if args.check:
        problems = check(args.out, dashboards, recorded)
        for line in problems:
            print(f"generate.py --check: {line}", file=sys.stderr)
        return 1 if problems else 0
    bad = [
        f"{name}: panel {title!r}: {p}"
        for name, dashboard in dashboards.items()
        for title, expr in panel_queries(dashboard)
        for p in unknown_names(expr, recorded)
    ]
    if bad:
        for line in bad:
            print(f"generate.py: error: {line}", file=sys.stderr)
        return 1
    for file_name, dashboard in dashboards.items():
        (args.out / file_name).write_text(render(dashboard))
        print(args.out / file_name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
