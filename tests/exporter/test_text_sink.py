"""The exporter's text, written straight from a snapshot, is generate_latest's bytes of the
families kvops.exporter.families builds from the same snapshot (prometheus_client's own
encoder over its own families is the reference)."""

from __future__ import annotations

import dataclasses
import math
import typing

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.exposition import generate_latest

from kvops.exporter import line_text, text_sink
from kvops.exporter.families import render
from kvops.exporter.text_sink import write
from kvops.snapshot import (
    CollectorStatus,
    EngineSample,
    GpuSample,
    Histogram,
    HostSample,
    LMCacheSample,
    ProcessMemory,
    Snapshot,
    TargetSample,
)


class _Registry:
    def __init__(self, metrics):
        self.metrics = metrics

    def collect(self):
        return self.metrics


def reference(snap: Snapshot) -> bytes:
    return generate_latest(_Registry(render(snap)))


def use_python_lines(monkeypatch) -> None:
    """The Python join, gather, buckets and keyed instead of kvops/exporter/_lines.c's."""
    monkeypatch.setattr(line_text, "_c_join", None)
    monkeypatch.setattr(text_sink, "gather", line_text.python_gather)
    monkeypatch.setattr(text_sink, "put_buckets", line_text.python_buckets)
    monkeypatch.setattr(text_sink, "put_keyed", line_text.python_keyed)
    monkeypatch.setattr(text_sink, "put_keyed_all", line_text.python_keyed_all)


@pytest.fixture(params=["C join", "Python join"])
def joiner(request, monkeypatch):
    if request.param == "Python join":
        use_python_lines(monkeypatch)
    else:
        assert line_text._c_join is not None, (
            "kvops/exporter/_lines.c is not built: pip install -e . with gcc and python3-dev"
        )
    return request.param


# Values at the edges of the text format: Go's exponent form from 1e6, NaN and infinities,
# -0, ints (PCIe generations), subnormals, and the float repr's shortest forms.
_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e6, 999999.9999999999, 1e-300, 5e-324, 123456789012.0, 0.1]),
    st.integers(min_value=-(2**70), max_value=2**70),
)
# Label values: escapes, newlines, non-ASCII and astral characters (no lone surrogates, which
# no decoded page holds).
_LABEL = st.text(st.characters(blacklist_categories=["Cs"]), max_size=12) | st.sampled_from(
    ['a"b', "c\\d", "e\nf", "é", "𝔘"]
)


def _histogram(draw) -> Histogram:
    bounds = sorted(set(draw(st.lists(st.floats(-10, 1e7, allow_nan=False), min_size=0, max_size=4))))
    counts = draw(st.lists(_VALUES, min_size=len(bounds) + 1, max_size=len(bounds) + 1))
    return Histogram(tuple(zip([*bounds, math.inf], counts, strict=True)), draw(_VALUES), draw(_VALUES))


def _filled(draw, cls, **fixed):
    """An instance of a snapshot dataclass with every value field drawn (None or a value)."""
    hints = typing.get_type_hints(cls)
    values = dict(fixed)
    for f in dataclasses.fields(cls):
        if f.name in values:
            continue
        hint = str(hints[f.name])
        if hint.startswith("dict[str, kvops.snapshot.Histogram]"):
            values[f.name] = {draw(_LABEL): _histogram(draw) for _ in range(draw(st.integers(0, 2)))}
        elif "Histogram" in hint:
            values[f.name] = _histogram(draw) if draw(st.booleans()) else None
        elif hint.startswith("dict[str, float]"):
            values[f.name] = draw(st.dictionaries(_LABEL, _VALUES, max_size=2))
        elif hint in ("float | None", "int | None", "typing.Optional[float]", "typing.Optional[int]"):
            values[f.name] = draw(st.none() | _VALUES)
    return cls(**values)


@st.composite
def snapshots(draw) -> Snapshot:
    targets = []
    for i in range(draw(st.integers(0, 3))):
        target = f"http://h{i}:8000"
        engines = [
            _filled(
                draw,
                EngineSample,
                target=target,
                model_name=draw(_LABEL),
                engine=str(n),
                offload_tier=draw(st.sampled_from([None, "host", "external"])),
            )
            for n in range(draw(st.integers(0, 2)))
        ]
        lmcache = [
            _filled(draw, LMCacheSample, target=target, model_name=draw(_LABEL), worker_id=str(n))
            for n in range(draw(st.integers(0, 1)))
        ]
        identity = draw(st.sampled_from([{}, {"namespace": "serving", "pod": f"vllm-{i}", "container": ""}]))
        targets.append(
            TargetSample(
                target,
                draw(st.booleans()),
                engines=engines,
                lmcache=lmcache,
                scrape_seconds=draw(st.none() | _VALUES),
                identity=identity,
            )
        )
    gpus = [
        _filled(
            draw,
            GpuSample,
            index=str(n),
            uuid=f"GPU-{n}",
            vendor=draw(st.sampled_from(["nvidia", "amd"])),
            name=draw(st.none() | _LABEL),
            pci_bus_id=draw(st.none() | _LABEL),
            extra=draw(st.dictionaries(st.sampled_from(["gtt_used_bytes", "gtt_total_bytes"]), _VALUES)),
            processes=draw(st.dictionaries(st.integers(1, 99999), _VALUES, max_size=2)),
        )
        for n in range(draw(st.integers(0, 2)))
    ]
    numa = {
        str(n): draw(st.dictionaries(st.sampled_from(["total", "free"]), _VALUES))
        for n in range(draw(st.integers(0, 2)))
    }
    host = _filled(draw, HostSample, numa_nodes=numa) if draw(st.booleans()) else None
    processes = [
        ProcessMemory(
            t.target,
            rss_anon=draw(st.none() | _VALUES),
            pinned=draw(st.none() | _VALUES),
            gpus=[("0", "GPU-0")],
        )
        for t in targets[: draw(st.integers(0, 2))]
    ]
    collectors = [CollectorStatus("nvidia", draw(st.booleans()), draw(_VALUES), None)]
    return Snapshot(time=0, targets=targets, gpus=gpus, host=host, processes=processes, collectors=collectors)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(snap=snapshots())
def test_any_snapshot_is_written_as_generate_latest_writes_its_families(snap):
    expected = reference(snap)
    assert write(snap) == expected
    assert write(snap) == expected  # again, from the kept heads
    with pytest.MonkeyPatch.context() as monkeypatch:
        use_python_lines(monkeypatch)
        assert write(snap) == expected


def test_kept_heads_follow_an_engine_whose_keys_and_bounds_change(joiner):
    """The same engine (so the same kept heads) from scrape to scrape with other sources,
    a None among them, a histogram's buckets re-bounded, a field gone and back."""
    rounds = [
        ({"local_cache_hit": 1.0, "external_kv_transfer": 2.0}, ((0.1, 1.0), (math.inf, 3.0)), 5.0),
        ({"local_cache_hit": 1.0, "external_kv_transfer": 2.0}, ((0.1, 1.0), (math.inf, 3.0)), 5.0),
        (
            {"external_kv_transfer": 4.0, "local_compute": 1e9},
            ((0.1, 2.0), (1.0, 3.0), (math.inf, 4.0)),
            None,
        ),
        (
            {"external_kv_transfer": None, "local_compute": 2e9},
            ((0.5, 2.0), (1.0, 3.0), (math.inf, 4.0)),
            1.0,
        ),
        ({}, ((0.5, 2.0), (math.inf, 4.0)), 2.0),
        ({"local_compute": 3e9, "external_kv_transfer": 5.0, "1": 1.0}, ((0.5, 2.0), (math.inf, 4.0)), 3.0),
    ]
    for by_source, buckets, running in rounds:
        engine = EngineSample(
            "http://h:8000",
            "m",
            requests_running=running,
            prompt_tokens_cached_by_source=by_source,
            ttft=Histogram(buckets, 1.5, buckets[-1][1]),
            tier_chunk_hits={"1:fs": 2.0, "0:primary": 1.0} if running else {},
            requests_waiting_by_reason={math.nan: 1.0, "capacity": 2.0} if running == 1.0 else {},
        )
        snap = Snapshot(time=0, targets=[TargetSample("http://h:8000", True, engines=[engine])])
        assert write(snap) == reference(snap)


def _pages_snapshot() -> Snapshot:
    """16 simulated vLLMs (every histogram vLLM's offload surface passes through), pods on two."""
    from kvops.engines import registry
    from kvops.exposition import parser
    from kvops.sim.server import Sim

    targets = [
        registry.normalise(
            parser.parse(Sim(seed=i).metrics().decode(), registry.WANTED), f"http://h:{8000 + i}"
        )
        for i in range(16)
    ]
    targets[3].identity = {"namespace": "serving", "pod": "vllm-3", "container": "vllm"}
    targets[7].identity = {"namespace": "serving", "pod": "vllm-7", "container": ""}
    return Snapshot(time=0, targets=targets)


def test_simulated_pages_are_written_as_generate_latest_writes_their_families(joiner):
    snap = _pages_snapshot()
    text = write(snap)
    assert text == reference(snap)
    assert text.count(b"_bucket{") > 500 and b'pod="vllm-3"' in text and b'pod="vllm-7"' in text


def test_an_empty_lmcache_family_is_left_out_and_a_present_one_kept(joiner):
    engine = EngineSample("http://h:8000", "m", requests_running=1.0)
    bare = Snapshot(time=0, targets=[TargetSample("http://h:8000", True, engines=[engine])])
    assert b"kvops_lmcache" not in write(bare) and write(bare) == reference(bare)
    worker = LMCacheSample("http://h:8000", "m", "0", hit_tokens=5.0)
    both = Snapshot(time=0, targets=[TargetSample("http://h:8000", True, engines=[engine], lmcache=[worker])])
    assert b"kvops_lmcache" in write(both) and write(both) == reference(both)


def test_the_last_familys_header_is_written_when_it_has_no_series(joiner):
    # build_info always has its one series; a snapshot without collectors ends in empty families
    snap = Snapshot(time=0, targets=[TargetSample("http://h:8000", False, error="refused")])
    assert write(snap) == reference(snap)
    assert write(Snapshot(time=0)) == reference(Snapshot(time=0))


def test_kept_heads_are_bounded(monkeypatch, joiner):
    monkeypatch.setattr(text_sink, "_HEADS_MAX", 3)
    monkeypatch.setattr(text_sink, "_HEADS", {})
    engines = [EngineSample("http://h:8000", f"m{i}", requests_running=float(i)) for i in range(10)]
    snap = Snapshot(time=0, targets=[TargetSample("http://h:8000", True, engines=engines)])
    assert write(snap) == reference(snap)
    assert len(text_sink._HEADS) <= 3


def test_kept_owner_heads_are_bounded(monkeypatch, joiner):
    """Targets that come and go make a new group of kept heads each time; past the bound on
    the heads they hold, all are dropped, and what is written stays the same."""
    monkeypatch.setattr(text_sink, "_GROUP_HEADS_MAX", 50)
    monkeypatch.setattr(text_sink, "_GROUPS", {})
    monkeypatch.setattr(text_sink, "_group_heads", 0)
    for n in range(12):  # a different set of targets each scrape
        targets = [
            TargetSample(
                f"http://h{i}:8000",
                True,
                engines=[EngineSample(f"http://h{i}:8000", "m", requests_running=1.0, local_hits=2.0)],
            )
            for i in range(n, n + 3)
        ]
        snap = Snapshot(time=0, targets=targets)
        assert write(snap) == reference(snap)
        assert 0 < text_sink._group_heads <= 50 + 3 and len(text_sink._GROUPS) <= 6


def test_the_c_joiner_is_built():
    """setup.py builds it where a compiler is at hand, as the README's test command installs one;
    without it every comparison above would compare the Python join with itself."""
    try:
        import kvops.exporter._lines  # noqa: F401
    except ImportError as exc:  # pragma: no cover - the message is the point
        pytest.fail(
            f"the C line joiner is not built ({exc}): install gcc and Python's headers"
            " (Debian: gcc python3-dev) and run `pip install -e .` again"
        )
    assert line_text._c_join is not None


def test_a_pod_label_never_overrides_a_label_of_the_series(joiner):
    engine = EngineSample("http://h:8000", "m", requests_running=1.0)
    odd = {"target": "elsewhere", "pod": "vllm-0"}  # discovery gives namespace/pod/container only
    snap = Snapshot(time=0, targets=[TargetSample("http://h:8000", True, engines=[engine], identity=odd)])
    text = write(snap)
    assert text == reference(snap)
    assert b'target="elsewhere"' not in text and b'pod="vllm-0"' in text
