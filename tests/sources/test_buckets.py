"""The C grouping of bucket samples (kvops/exposition/_buckets.c) returns what histograms._group
returns, on every histogram of every page of the suite and on generated samples; histograms()
reads alike with and without it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvops.exposition import histograms as hist
from kvops.exposition.parser import parse
from support.suite_pages import PAGES

_buckets = pytest.importorskip(
    "kvops.exposition._buckets", reason="not built; test_the_grouping_is_built fails"
)


def c_group(samples):
    return _buckets.group(samples, hist._LE, hist._le)


def same(a, b) -> bool:
    """Equal, and in the same order (series, and bounds within each)."""
    return list(a.items()) == list(b.items()) and all(
        list(x[0].items()) == list(y[0].items()) for x, y in zip(a.values(), b.values(), strict=True)
    )


def test_the_grouping_is_built():
    assert hist._c_group is not None, "kvops/exposition/_buckets.c is not built: pip install -e . with gcc"


def _bucket_lists():
    for name, text, wanted in PAGES:
        result = parse(text, wanted)
        for sample_name, samples in result.samples.items():
            if sample_name.endswith("_bucket"):
                yield f"{name}:{sample_name}", samples


BUCKETS = list(_bucket_lists())


def test_the_suite_has_histograms_of_every_engine():
    kinds = {name.split("/")[0].split("#")[0] for name, _ in BUCKETS}
    assert {
        "vllm",
        "vllm-real",
        "vllm-tiering",
        "sglang-storage",
        "lmcache",
        "expfmt",
        "promparse",
    } <= kinds, kinds
    assert sum(len(s) for _, s in BUCKETS) > 2000


@pytest.mark.parametrize(("name", "samples"), BUCKETS, ids=[name for name, _ in BUCKETS])
def test_suite_histograms_group_alike(name, samples):
    assert same(c_group(samples), hist._group(samples))


@pytest.mark.parametrize("name_text_wanted", PAGES, ids=[name for name, _, _ in PAGES])
def test_histograms_read_alike_with_and_without_the_c_grouping(name_text_wanted, monkeypatch):
    _, text, wanted = name_text_wanted
    result = parse(text, wanted)
    families = {n[: -len("_bucket")] for n in result.samples if n.endswith("_bucket")}
    with_c = {f: hist.histograms(result, f) for f in families}
    monkeypatch.setattr(hist, "_c_group", None)
    assert with_c == {f: hist.histograms(result, f) for f in families}


_NAMES = st.sampled_from(["le", "model_name", "engine", "a", "LE", "le "])
_VALUES = st.sampled_from(["0.1", "1", "+Inf", "NaN", "x", "", "1e3", "-0", "m", "0"])
_LABELS = st.lists(st.tuples(_NAMES, _VALUES), max_size=4).map(dict)


@settings(max_examples=500, deadline=None)
@given(samples=st.lists(st.tuples(_LABELS, st.floats(allow_nan=True) | st.integers()), max_size=25))
def test_generated_samples_group_alike(samples):
    # Label orders differ from line to line (a different series for both), bounds are missing,
    # NaN, not numbers; values of any kind pass through.
    assert same(c_group(samples), hist._group(samples))


def test_a_series_keeps_its_first_lines_label_order_and_page_order():
    samples = [
        ({"a": "1", "le": "1.0"}, 1.0),
        ({"le": "+Inf", "a": "1"}, 2.0),
        ({"a": "2", "le": "+Inf"}, 3.0),
        ({"a": "1", "le": "+Inf"}, 4.0),
    ]
    grouped = c_group(samples)
    assert list(grouped) == [(("a", "1"),), (("a", "2"),)]
    assert grouped[(("a", "1"),)] == ({"a": "1"}, [(1.0, 1.0), (math.inf, 2.0), (math.inf, 4.0)])
    assert same(grouped, hist._group(samples))


def test_bad_input_raises():
    with pytest.raises(TypeError):
        c_group([({"le": "1"}, 1.0, 2.0)])
    with pytest.raises(TypeError):
        c_group([(["le", "1"], 1.0)])

    def refuse(raw):
        raise ValueError(raw)

    with pytest.raises(ValueError, match=r"0\.25"):
        _buckets.group([({"le": "0.25"}, 1.0)], {}, refuse)


def test_a_bound_reader_that_empties_the_list_ends_the_grouping_without_a_crash():
    samples = [({"le": "1"}, 1.0), ({"le": "2"}, 2.0), ({"le": "3"}, 3.0)]

    def emptying(raw):
        samples.clear()
        return 1.0

    assert _buckets.group(samples, {}, emptying) == {(): ({}, [(1.0, 1.0)])}


class _Colliding(str):
    """A label value whose hash is every other's: series told apart by comparing alone."""

    def __hash__(self) -> int:
        return 7


def test_series_whose_hashes_collide_are_told_apart_by_their_labels():
    samples = [
        ({"a": _Colliding(v), "b": _Colliding(w), "le": le}, float(n))
        for n, (v, w, le) in enumerate(
            [("1", "x", "1"), ("2", "x", "1"), ("1", "y", "1"), ("1", "x", "+Inf")]
        )
    ]
    grouped = c_group(samples)
    assert len(grouped) == 3 and same(grouped, hist._group(samples))
