"""Interval rules: lazily created counters, restarts, zero denominators, down targets."""

from __future__ import annotations

import pytest

from kvops.rates import counter_delta, interval
from kvops.snapshot import EngineSample, GpuSample, Snapshot, TargetSample

T = "http://h:8000"


def snap(t: float, *engines: EngineSample, up: bool = True, gpus: list[GpuSample] | None = None) -> Snapshot:
    target = TargetSample(T, up=up, engines=list(engines) if up else [], error=None if up else "refused")
    return Snapshot(time=t, targets=[target], gpus=gpus or [])


def eng(**values: float | None) -> EngineSample:
    return EngineSample(target=T, model_name="m", engine="0", **values)


@pytest.mark.parametrize(
    ("prev", "cur", "expected"),
    [(10.0, 15.0, 5.0), (None, 7.0, 7.0), (100.0, 3.0, 3.0), (5.0, None, None), (4.0, 4.0, 0.0)],
)
def test_counter_delta(prev, cur, expected):
    assert counter_delta(prev, cur) == expected


def test_restart_counts_from_zero_and_never_goes_negative():
    before = eng(local_queries=1000, local_hits=900, store_bytes=5e9, store_seconds=1.0, preemptions=7)
    after = eng(local_queries=100, local_hits=20, store_bytes=1e9, store_seconds=0.05, preemptions=0)
    (row,) = interval(snap(0, before), snap(1, after)).targets
    assert row.local_hit_rate == pytest.approx(0.2)
    assert row.store_bandwidth_bytes_per_second == pytest.approx(2e10)
    assert row.store_bytes == 1e9 and row.preemptions == 0


def test_series_created_between_samples_counts_from_zero():
    before = eng(store_bytes=4e9, store_seconds=0.1)  # no load has happened yet: series absent
    after = eng(store_bytes=6e9, store_seconds=0.15, load_bytes=1e9, load_seconds=0.025)
    (row,) = interval(snap(0, before), snap(2, after)).targets
    assert row.load_bytes == 1e9
    assert row.load_bandwidth_bytes_per_second == pytest.approx(4e10)
    assert row.load_store_ratio == pytest.approx(0.5)
    assert row.load_offered_bytes_per_second == pytest.approx(5e8)


def test_zero_and_unknown_denominators_are_null():
    before = eng(local_queries=10, local_hits=5, store_bytes=1e9, store_seconds=1.0)
    after = eng(local_queries=10, local_hits=5, store_bytes=1e9, store_seconds=1.0)
    (row,) = interval(snap(0, before), snap(1, after)).targets
    assert row.local_hit_rate is None  # no queries in the interval
    assert row.store_bandwidth_bytes_per_second is None  # nothing moved
    assert row.external_hit_rate is None  # not exposed at all
    assert row.load_store_ratio is None


def test_down_target_is_marked_and_has_no_figures():
    doc = interval(snap(0, eng(local_queries=1)), snap(1, up=False)).to_json()
    assert doc["targets"] == [
        {"target": T, "model_name": None, "engine": None, "up": False, "error": "refused"}
    ]


def test_target_that_was_down_at_the_start_has_state_but_no_interval():
    cur = snap(1, eng(local_queries=100, local_hits=50, kv_cache_usage=0.5, requests_running=3))
    (row,) = interval(snap(0, up=False), cur).targets
    assert row.up and row.kv_cache_usage == 0.5 and row.requests_running == 3
    assert row.local_hit_rate is None and row.store_bytes is None


def test_gpu_pcie_rate_from_counters_with_wrap_as_reset_and_link_fraction():
    g0 = GpuSample(
        "0", "GPU-a", "nvidia", pcie_tx_bytes=1e9, pcie_rx_bytes=9e9, pcie_link_max_bytes_per_second=63e9
    )
    g1 = GpuSample(
        "0", "GPU-a", "nvidia", pcie_tx_bytes=64e9, pcie_rx_bytes=1e9, pcie_link_max_bytes_per_second=63e9
    )
    (row,) = interval(snap(0, gpus=[g0]), snap(2, gpus=[g1])).gpus
    assert row.pcie_transmit_bytes_per_second == pytest.approx(31.5e9)
    assert row.pcie_transmit_link_fraction == pytest.approx(0.5)
    assert row.pcie_receive_bytes_per_second == pytest.approx(0.5e9)  # went down: reset, from 0


def test_gpu_without_counter_uses_driver_sample():
    g = GpuSample("1", "GPU-b", "nvidia", pcie_rx_bytes_per_second=3e9)
    (row,) = interval(snap(0, gpus=[g]), snap(1, gpus=[g])).gpus
    assert row.pcie_receive_bytes_per_second == 3e9 and row.pcie_transmit_bytes_per_second is None


def test_pcie_cross_check_flags_each_way_and_needs_both_sides():
    from kvops.rates import pcie_cross_check

    gib = float(1 << 30)
    assert pcie_cross_check(10 * gib, 4 * gib) == "counted_not_moved"
    assert pcie_cross_check(0.0, 2 * gib) == "moved_not_counted"
    assert pcie_cross_check(3 * gib, 3.1 * gib) == "consistent"
    assert pcie_cross_check(None, 3 * gib) is None and pcie_cross_check(3 * gib, None) is None


def test_cross_check_joins_the_targets_gpus_over_the_interval():
    from kvops.snapshot import ProcessMemory

    gib = float(1 << 30)

    def at(t: float, load: float, rx: float) -> Snapshot:
        s = snap(t, eng(load_bytes=load, load_seconds=1.0, store_bytes=1.0, store_seconds=1.0))
        s.gpus = [GpuSample("0", "GPU-a", "nvidia", pcie_rx_bytes=rx)]
        s.processes = [ProcessMemory(target=T, gpus=[("0", "GPU-a")])]
        return s

    (row,) = interval(at(0, 0.0, 0.0), at(1, 8 * gib, 2 * gib)).targets
    assert row.pcie_cross_check == "counted_not_moved"
    (row,) = interval(at(0, 0.0, 0.0), at(1, 2 * gib, 2.5 * gib)).targets
    assert row.pcie_cross_check == "consistent"
    (row,) = interval(snap(0, eng(load_bytes=0.0)), snap(1, eng(load_bytes=1.0))).targets
    assert row.pcie_cross_check is None  # no GPU joined to the target: not checked


def test_histogram_delta_and_quantile_over_an_interval():
    from kvops.rates import histogram_delta, quantile
    from kvops.snapshot import Histogram

    inf = float("inf")
    a = Histogram(((0.001, 10.0), (0.01, 10.0), (inf, 10.0)), 0.005, 10.0)
    b = Histogram(((0.001, 10.0), (0.01, 20.0), (inf, 20.0)), 0.1, 20.0)
    d = histogram_delta(a, b)
    assert d is not None and d.count == 10 and d.buckets[0][1] == 0.0
    assert quantile(0.5, d) == pytest.approx(0.001 + 0.009 * 0.5)
    assert histogram_delta(b, a) == a  # went down: a restart, counts from 0
