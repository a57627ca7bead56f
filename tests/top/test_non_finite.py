"""NaN, ±Inf, -0 and 1e400 (which reads as +Inf) never crash and are shown as unknown (issue 25
item 1). A kvops page with `kvops_gpu_pcie_link_generation ... NaN` made `top --once --replay`
exit 1 (`int(NaN)` in the decoder), and a store answering "NaN" made `top --prometheus` print a
traceback. A real store can hold NaN.

Each decode path gets these values in every family it reads: the kvops exposition decoder,
the vLLM (and other engines') reader, the Prometheus query API's values; then rates and the
board, whose JSON must hold no NaN (`allow_nan=False`). Then the commands themselves, on a
replayed page and on a loopback store."""

from __future__ import annotations

import json
import math
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvops import names
from kvops.cli import main
from kvops.engines import registry
from kvops.exposition.parser import ParseResult
from kvops.frames import kvops_exposition, prometheus
from kvops.rates import interval
from kvops.snapshot import Snapshot
from kvops.top import numbers as units
from kvops.top.board import Board
from support.upstream import Upstream, body

NON_FINITE = [math.nan, math.inf, -math.inf, float("1e400")]
# As a page or the query API spells them ("1e400" in a page is out of range: a skipped line).
SPELLED = ["NaN", "+Inf", "-Inf", "-0", "1e400", "nan", "inf"]
values = st.sampled_from([*NON_FINITE, -0.0]) | st.floats(0, 1e12, allow_nan=False)
# A few values, dealt to the samples in turn: every sample gets one, and a failing mix shrinks fast.
palettes = st.lists(values, min_size=1, max_size=6)

# Labels every owner kind needs, plus a histogram bucket's.
OWNER_LABELS = {"target": "http://10.0.0.1:8000", "model_name": "m", "engine": "0", "engine_kind": "vllm",
                "worker_id": "0", "gpu": "0", "uuid": "GPU-1", "vendor": "nvidia"}  # fmt: skip


def _kvops_series() -> list[tuple[str, dict[str, str]]]:
    """(sample name, labels) for every sample of every family the exporter serves."""
    out = []
    for spec in names.all_specs():
        labels = {k: OWNER_LABELS.get(k, "x") for k in spec.owner_labels}
        if spec.split:
            splits = [v for v, _ in spec.split]
        elif spec.open_split or spec.info:
            splits = ["0"]
        else:
            splits = [None]
        for split in splits:
            full = labels if split is None else {**labels, spec.split_label: split}  # type: ignore[dict-item]
            for sample in spec.sample_names:
                extra = [{"le": "1"}, {"le": "+Inf"}] if sample.endswith("_bucket") else [{}]
                out += [(sample, {**full, **e}) for e in extra]
    return out


KVOPS_SERIES = _kvops_series()
VLLM_NAMES = sorted(registry.WANTED)  # every engine's names


def _result(series: list[tuple[str, dict[str, str]]], palette: list[float]) -> ParseResult:
    result = ParseResult()
    for i, (name, labels) in enumerate(series):
        result.samples.setdefault(name, []).append((dict(labels), palette[i % len(palette)]))
    result.has_prefixed_sample = True
    return result


def _served(before: Snapshot, after: Snapshot) -> dict:
    """What --once --json and the live board make of two frames: no NaN may reach them."""
    doc = interval(before, after).to_json()
    json.dumps(doc, allow_nan=False)
    board = Board()
    board.update(before)
    board.update(after)
    for row in board.rows.values():
        for name in ("kv_cache_usage", "local_hit_rate", "store_bytes", "requests_running"):
            value = row.get(name)
            assert value is None or math.isfinite(value), (name, value)
    return doc


def _finite_everywhere(obj: object) -> None:
    if isinstance(obj, float):
        assert math.isfinite(obj), obj
        assert not (obj == 0 and math.copysign(1, obj) < 0), "-0 is 0"
    elif isinstance(obj, dict):
        for v in obj.values():
            _finite_everywhere(v)
    elif isinstance(obj, list | tuple):
        for v in obj:
            _finite_everywhere(v)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(palettes, palettes)
def test_the_kvops_decoder_reads_non_finite_values_as_unknown(first: list[float], second: list[float]):
    before = kvops_exposition.decode(_result(KVOPS_SERIES, first), 100.0)
    after = kvops_exposition.decode(_result(KVOPS_SERIES, second), 101.0)
    for snap in (before, after):
        for gpu in snap.gpus:
            for name in ("pcie_link_gen", "pcie_link_width", "pcie_link_gen_max", "pcie_link_width_max"):
                assert getattr(gpu, name) is None or isinstance(getattr(gpu, name), int)
    _served(before, after)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(palettes, palettes)
def test_the_engine_readers_read_non_finite_values_as_unknown(first: list[float], second: list[float]):
    series = [(name, {"model_name": "m", "engine": "0", "le": "1"}) for name in VLLM_NAMES]
    before = Snapshot(time=100.0, targets=[registry.normalise(_result(series, first), "t")])
    after = Snapshot(time=101.0, targets=[registry.normalise(_result(series, second), "t")])
    _served(before, after)


@pytest.mark.parametrize("spelled", SPELLED)
def test_the_query_api_reader_reads_non_finite_values_as_unknown(spelled: str):
    item = {"metric": {"__name__": "vllm:num_requests_running", "engine": "0"}, "value": [100, spelled]}
    parsed = prometheus.to_parse_result([item])
    if spelled == "-0":
        [(_, value)] = parsed.get("vllm:num_requests_running")
        assert value == 0 and math.copysign(1, value) > 0
    else:
        assert parsed.get("vllm:num_requests_running") == []
    # JSON numbers too: 1e400 is +Inf to Python's json.
    assert (
        prometheus.to_parse_result(json.loads('[{"metric": {"__name__": "a"}, "value": [1, 1e400]}]')).get(
            "a"
        )
        == []
    )


def _kvops_page(value: str) -> str:
    return (
        "".join(
            f"{name}{{{','.join(f'{k}={json.dumps(v)}' for k, v in labels.items())}}} {value}\n"
            for name, labels in KVOPS_SERIES
        )
        + 'kvops_target_up{target="http://10.0.0.1:8000"} 1\n'
    )


VLLM_PAGE = (Path(__file__).parents[1] / "fixtures" / "vllm" / "0.33.0" / "offload-t2.prom").read_text()


def _vllm_page(value: str) -> str:
    """A real vLLM page with every value of a sample line replaced."""
    lines = []
    for line in VLLM_PAGE.splitlines():
        if line and not line.startswith("#") and "_info{" not in line:  # info series: no figure
            line = line.rsplit(" ", 1)[0] + " " + value
        lines.append(line)
    return "\n".join(lines) + "\n"


def test_the_issue_page_replays_with_exit_0(tmp_path: Path, capsys):
    page = tmp_path / "p.prom"
    page.write_text(
        'kvops_gpu_info{gpu="0",uuid="GPU-1",vendor="nvidia",name="H100",pci_bus_id="0"} 1\n'
        'kvops_gpu_pcie_link_generation{gpu="0",uuid="GPU-1",vendor="nvidia",link="current"} NaN\n'
        'kvops_gpu_pcie_link_width_lanes{gpu="0",uuid="GPU-1",vendor="nvidia",link="current"} +Inf\n'
    )
    assert main(["top", "--once", "--replay", str(page), str(page)]) == 0
    assert main(["top", "--once", "--json", "--replay", str(page), str(page)]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out.splitlines()[-1])
    [gpu] = doc["gpus"]
    assert gpu.get("pcie_link_gen") is None and gpu.get("pcie_link_width") is None


@pytest.mark.parametrize("spelled", SPELLED)
@pytest.mark.parametrize("page", [_kvops_page, _vllm_page], ids=["exporter", "vllm"])
def test_replayed_pages_of_non_finite_values_exit_0_with_unknown_figures(tmp_path, capsys, page, spelled):
    path = tmp_path / "p.prom"
    path.write_text(page(spelled))
    assert main(["top", "--once", "--replay", str(path), str(path)]) == 0
    assert main(["top", "--once", "--json", "--replay", str(path), str(path)]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "internal error" not in captured.out
    doc = json.loads(captured.out.splitlines()[-1], parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    _finite_everywhere(doc)
    if spelled != "-0":
        for row in doc["targets"]:
            assert row.get("kv_cache_usage") is None and row.get("requests_running") is None


def _store(value: str):
    """A loopback Prometheus query API answering `value` for every sample of one vLLM engine."""
    labels = {"instance": "10.0.0.1:8000", "model_name": "m", "engine": "0"}

    def vector(series: list[dict]) -> dict:
        return {"status": "success", "data": {"resultType": "vector", "result": series}}

    def handle(h: BaseHTTPRequestHandler) -> None:
        query = parse_qs(urlsplit(h.path).query).get("query", [""])[0]
        if query.startswith("max(timestamp(kvops_build_info"):
            doc = vector([])
        elif query.startswith("max(timestamp("):
            doc = vector([{"metric": {}, "value": [100, "100"]}])
        elif query.startswith("topk("):
            doc = vector([{"metric": labels, "value": [100, "100"]}])
        elif query.endswith("[10m]"):
            values = [[70, value], [85, value], [100, value]]
            doc = {
                "status": "success",
                "data": {"resultType": "matrix", "result": [{"metric": labels, "values": values}]},
            }
        elif query.startswith("timestamp("):
            doc = vector([{"metric": labels, "value": [100, value]}])
        elif query.startswith("(label_replace"):
            doc = vector([{"metric": labels | {"kvops_name": name}, "value": [100, value]}
                          for name in VLLM_NAMES])  # fmt: skip
        else:  # the gauges
            doc = vector(
                [{"metric": labels | {"__name__": name}, "value": [100, value]} for name in VLLM_NAMES]
            )
        body(json.dumps(doc))(h)

    return handle


@pytest.mark.parametrize("spelled", SPELLED)
def test_a_store_answering_non_finite_values_gives_unknown_figures_not_a_traceback(capsys, spelled: str):
    """Exit 1 where no value is finite: the engine then has no sample kvops can read, so it is
    down (its reason says so), and every target down is exit 1 (docs/DESIGN.md)."""
    upstream = Upstream()
    upstream.routes["/api/v1/query"] = _store(spelled)
    try:
        for argv in (["--json"], []):
            code = main(["top", "--once", *argv, "--prometheus", upstream.base])
            assert code == (0 if spelled == "-0" else 1), capsys.readouterr().err
    finally:
        upstream.stop()
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    doc = json.loads(captured.out.splitlines()[0], parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    _finite_everywhere(doc)
    if spelled != "-0":
        for row in doc["targets"]:
            assert row.get("requests_running") is None and row.get("local_hit_rate") is None


@given(st.lists(st.sampled_from([*NON_FINITE, -0.0, None]) | st.floats(0, 1e12), min_size=1, max_size=20))
def test_every_unit_writes_non_finite_values_as_unknown(values_seen: list[float | None]):
    for value in values_seen:
        for write in (units.pct, units.gbps, units.gb, units.gib, units.ratio, units.count):
            text = write(value)
            assert "nan" not in text and "inf" not in text and "-0" not in text.replace("e-0", "")
            if value is None or not math.isfinite(value):
                assert text == units.UNKNOWN
        for style in (units.hit_rate_style, units.link_style, units.usage_style):
            style(value)
        if value is not None:
            assert len(units.bar(value, 10)) == 10
    line = units.sparkline(values_seen, 20)
    assert len(line) == 20
