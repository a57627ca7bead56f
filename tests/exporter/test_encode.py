"""kvops's encoder writes the same bytes as prometheus_client's generate_latest."""

from __future__ import annotations

import math

from prometheus_client.exposition import generate_latest
from prometheus_client.utils import floatToGoString

from kvops.exporter.encode import encode
from kvops.exporter.families import family, render
from kvops.names import KV_CACHE_USAGE, PREFIX_HITS
from kvops.snapshot import CollectorStatus, EngineSample, GpuSample, HostSample, Snapshot, TargetSample


class _Registry:
    def __init__(self, metrics):
        self.metrics = metrics

    def collect(self):
        return self.metrics


def test_render_of_a_full_snapshot_is_byte_equal():
    engine = EngineSample(
        "http://h:8000", 'org/"quoted"\\model\nx', "1", kv_cache_usage=0.5, local_queries=1e15,
        local_hits=3.0, store_bytes=6.1905829888e10, store_seconds=1.789232341487594, preemptions=0.0,
        requests_running=97,
    )  # fmt: skip
    snap = Snapshot(
        time=0,
        targets=[TargetSample("http://h:8000", True, engines=[engine], scrape_seconds=0.012),
                 TargetSample("http://down:1", False, error="refused")],
        gpus=[GpuSample("0", "GPU-1", "nvidia", name="H100", memory_used_bytes=1 << 40,
                        pcie_tx_bytes=2**64 + 1)],
        host=HostSample(memory_total_bytes=24e9, memory_available_bytes=math.inf),
        collectors=[CollectorStatus("vllm", False, 0.01, "1 of 2 targets down")],
    )  # fmt: skip
    metrics = render(snap)
    assert encode(metrics) == generate_latest(_Registry(metrics))


def test_special_values_and_empty_families():
    usage = family(KV_CACHE_USAGE)
    for i, v in enumerate([math.nan, -math.inf, math.inf, 0.1, 1e-300, -0.0, 123456789012345678]):
        usage.add_metric(["t", "m", str(i)], v)
    hits = family(PREFIX_HITS)  # no samples: HELP and TYPE only
    metrics = [usage, hits]
    assert encode(metrics) == generate_latest(_Registry(metrics))


def _add_histogram_by_add_metric(metric, labels, value):
    """prometheus_client's own way, the reference for families._add_histogram."""
    buckets = [(floatToGoString(le), count) for le, count in value.buckets]
    metric.add_metric(list(labels), buckets, value.sum)


def test_histograms_of_simulated_vllm_pages_are_byte_equal(monkeypatch):
    """Every histogram vLLM's offload surface passes through (kvops.sim pages, 16 seeds), plus
    one with a negative bound (no _count/_sum then) and one whose count is not its +Inf
    bucket's: kvops's families, encoded, are generate_latest's bytes of add_metric's."""
    from kvops.engines import registry
    from kvops.exporter import families
    from kvops.exposition import parser as exposition
    from kvops.names import bound
    from kvops.sim.server import Sim
    from kvops.snapshot import Histogram

    targets = [
        registry.normalise(
            exposition.parse(Sim(seed=i).metrics().decode(), registry.WANTED), f"http://h:{8000 + i}"
        )
        for i in range(16)
    ]
    spec = next(s for s in bound("engine") if s.type == "histogram")
    labels = ["http://h:1", 'm"\\', "0", "vllm", "sync"]

    def everything():
        metrics = render(Snapshot(time=0, targets=targets))
        odd = family(spec)
        families.add(odd, labels, Histogram(((-1.0, 1.0), (0.5, 2.0), (math.inf, 3.0)), -0.5, 3.0))
        families.add(odd, labels, Histogram(((0.25, 0.0), (math.inf, 4.0)), 1.5, 5.0))
        return [*metrics, odd]

    fast = everything()
    histograms = [m for m in fast if m.type == "histogram" and m.samples]
    assert len(histograms) >= 3 and sum(len(m.samples) for m in histograms) > 500
    monkeypatch.setattr(families, "_add_histogram", _add_histogram_by_add_metric)
    reference = everything()
    assert encode(fast) == generate_latest(_Registry(reference))


def test_a_pods_labels_reach_its_histogram_buckets():
    """Histogram series are kept whole until encoded (kvops/exporter/histogram_family.py): a
    discovered pod's namespace/pod/container must still be on every one of their lines."""
    import math as m

    from kvops.snapshot import Histogram

    ttft = Histogram(((0.1, 1.0), (1.0, 3.0), (m.inf, 4.0)), 2.5, 4.0)
    engine = EngineSample("http://p:8000", "m", "0", requests_running=1, ttft=ttft)
    pod = {"namespace": "serving", "pod": "vllm-0", "container": "vllm"}
    snap = Snapshot(time=0, targets=[TargetSample("http://p:8000", True, engines=[engine], identity=pod)])
    metrics = render(snap)
    text = encode(metrics).decode()
    ttft_lines = [line for line in text.splitlines() if line.startswith("kvops_time_to_first_token_seconds")]
    assert len(ttft_lines) == 5  # three buckets, _count and _sum
    assert all('namespace="serving",pod="vllm-0"' in line for line in ttft_lines), ttft_lines
    assert encode(metrics) == generate_latest(_Registry(metrics))
