"""The rendered exposition has the shape real vLLM releases write (fixtures from vLLM's own code)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kvops.errors import UsageError
from kvops.sim import gen_layouts, layouts
from kvops.sim.render import SIMULATED, Renderer, parse_version
from kvops.sim.server import build_engine
from support.paths import RESEARCH

# Label names whose values are the workload's, not the format's.
VALUE_LABELS = {"model_name"}
FIXTURES = {
    "0.10.0": ("0.10.0/nooffload.prom", None),
    "0.11.2": ("0.11.2/offload-t2.prom", 64.0),
    "0.20.0": ("0.20.0/offload-t2.prom", 64.0),
    "0.33.0": ("0.33.0/offload-t2.prom", 64.0),
    "0.33.0-nooffload": ("0.33.0/nooffload.prom", None),
}


def shape(text: str) -> list[tuple[str, str, str, list[tuple[str, tuple[tuple[str, str], ...]]]]]:
    """Family order, type, HELP, and each sample's name with its label names (and le/enum values)."""
    out = []
    for fam in text_string_to_metric_families(text):
        if not fam.name.startswith("vllm:"):
            continue
        samples = []
        for s in fam.samples:
            if fam.name.endswith("config_info"):
                labels = tuple(sorted((k, "") for k in s.labels))
            else:
                labels = tuple(sorted((k, "" if k in VALUE_LABELS else v) for k, v in s.labels.items()))
            samples.append((s.name, labels))
        out.append((fam.name, fam.type, fam.documentation.replace(SIMULATED, ""), samples))
    return out


@pytest.mark.parametrize("key", list(FIXTURES))
def test_rendered_shape_matches_real_vllm(key: str, vllm_fixtures: Path) -> None:
    fixture, offload = FIXTURES[key]
    version = key.split("-")[0]
    engine = build_engine(seed=0, kv_offloading_size_gib=offload, num_gpu_blocks=2048)
    engine.advance_to(60.0)  # long enough that loads happened: every lazy series exists
    assert engine.counters.load_bytes > 0 or offload is None
    text = Renderer(engine, parse_version(version), 1.8e9, {}).render().decode()
    real = (vllm_fixtures / fixture).read_text()
    assert shape(text) == shape(real)


def test_lazy_series_are_absent_until_first_observed() -> None:
    engine = build_engine(seed=0)
    text = Renderer(engine, parse_version("0.33.0"), 1.8e9, {}).render().decode()
    assert "# TYPE vllm:kv_offload_load_bytes_total counter" in text
    assert "vllm:kv_offload_load_bytes_total{" not in text  # no load yet: HELP/TYPE only
    assert 'vllm:kv_offload_total_bytes_total{engine="0"' in text  # deprecated: pre-created
    assert "vllm:kv_offload_config_info{" not in text  # appears from the first step
    old = Renderer(engine, parse_version("0.20.0"), 1.8e9, {}).render().decode()
    assert 'transfer_type="CPU_to_GPU"' not in old  # 0.16-0.23 create it on the first load


def test_in_between_releases_drop_families_they_did_not_have() -> None:
    engine = build_engine(seed=0)
    engine.advance_to(5.0)

    def names(version: str) -> set[str]:
        text = Renderer(engine, parse_version(version), 1.8e9, {}).render().decode()
        return {f.name for f in text_string_to_metric_families(text)}

    assert "vllm:kv_offload_total_bytes" not in names("0.15.0")
    assert "vllm:kv_offload_total_bytes" in names("0.16.0")
    assert "vllm:kv_offload_store_bytes" in names("0.24.0")
    assert "vllm:kv_offload_lookup_sync_delay_seconds" not in names("0.25.0")
    assert "vllm:kv_offload_config_info" not in names("0.32.0")
    assert "vllm:external_prefix_cache_queries" not in names("0.11.0")
    assert "vllm:external_prefix_cache_queries" in names("0.11.1")


@pytest.mark.parametrize("text", ["0.9.9", "0.34.0", "1.0", "0.33.0.1", "", "v0.33.0"])
def test_unknown_versions_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError):
        parse_version(text)


def test_x_y_means_x_y_0() -> None:
    assert parse_version("0.24").text == "0.24.0"


def test_layouts_json_is_what_the_fixtures_say(vllm_fixtures: Path) -> None:
    """The shipped layouts.json is exactly the generator's output over the in-repo fixtures."""
    data = gen_layouts.extract(vllm_fixtures, RESEARCH / "vllm-metrics.json")
    shipped = Path(layouts.__file__).with_name("layouts.json").read_text()
    assert gen_layouts.render_json(data) == shipped
    assert data["LAYOUTS"] == layouts.LAYOUTS
    assert data["CACHE_CONFIG_LABELS"] == layouts.CACHE_CONFIG_LABELS
    assert {k: tuple(v) for k, v in data["PRESENCE"].items()} == layouts.PRESENCE
