"""The C grouping of bucket samples (kvops/exposition/_buckets.c) returns what histograms._group
returns, and its series() what histograms._histograms reads, on every histogram of every page
of the suite and on generated samples; histograms() reads alike with and without them."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvops.exposition import histograms as hist
from kvops.exposition.parser import ParseResult, parse
from kvops.snapshot import Histogram
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
    assert hist._c_group is not None, "_buckets.c is not built: pip install -e . with gcc and python3-dev"


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
    monkeypatch.setattr(hist, "_c_series", None)
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


def read_alike(buckets, sums, counts) -> None:
    """histograms() with the C series() equals the Python reading: the same series, labels in
    the same order, the same bounds, sums and counts (as objects: a NaN is the one it read)."""
    result = ParseResult(samples={"h_bucket": buckets, "h_sum": sums, "h_count": counts})
    got = hist.histograms(result, "h")
    want = hist._histograms(buckets, sums, counts)
    assert [(list(labels.items()), h.buckets) for labels, h in got] == [
        (list(labels.items()), h.buckets) for labels, h in want
    ]
    assert [(h.sum, h.count) for _, h in got] == [(h.sum, h.count) for _, h in want] or all(
        (a.sum is b.sum or a.sum == b.sum) and (a.count is b.count or a.count == b.count)
        for (_, a), (_, b) in zip(got, want, strict=True)
    )


def test_the_suite_reads_histograms():
    found = 0
    for _, text, wanted in PAGES:
        result = parse(text, wanted)
        found += sum(
            len(hist.histograms(result, n[: -len("_bucket")]))
            for n in result.samples
            if n.endswith("_bucket")
        )
    assert found > 150


@pytest.mark.parametrize("name_text_wanted", PAGES, ids=[name for name, _, _ in PAGES])
def test_suite_histograms_read_alike_in_c_and_python(name_text_wanted):
    _, text, wanted = name_text_wanted
    result = parse(text, wanted)
    for name in result.samples:
        if name.endswith("_bucket"):
            family = name[: -len("_bucket")]
            read_alike(result.get(name), result.get(f"{family}_sum"), result.get(f"{family}_count"))


_SERIES_LABELS = st.lists(
    st.tuples(st.sampled_from(["a", "b", "le"]), st.sampled_from(["1", "2", "+Inf", "0.5", "-3"])), max_size=3
).map(dict)


@settings(max_examples=800, deadline=None)
@given(
    buckets=st.lists(st.tuples(_SERIES_LABELS, st.floats(allow_nan=False) | st.integers()), max_size=20),
    sums=st.lists(st.tuples(_SERIES_LABELS, st.floats(allow_nan=False)), max_size=4),
    counts=st.lists(st.tuples(_SERIES_LABELS, st.floats(allow_nan=False)), max_size=4),
)
def test_generated_histograms_read_alike_in_c_and_python(buckets, sums, counts):
    # Bounds out of order and repeated, series without +Inf, _sum and _count lines in another
    # label order, repeated (the last wins), carrying an `le` of their own, or missing.
    read_alike(buckets, sums, counts)


def test_sum_and_count_lines_are_matched_by_their_labels_in_order_the_last_winning():
    buckets = [({"a": "1", "le": "+Inf"}, 5.0), ({"a": "1", "le": "0.5"}, 2.0), ({"a": "2", "le": "1"}, 1.0)]
    sums = [({"a": "1"}, 1.0), ({"a": "1"}, 3.0), ({"a": "2"}, 9.0)]
    counts = [({"a": "1", "le": "+Inf"}, 7.0)]  # not the series' labels: the +Inf count stands
    got = _buckets.series(buckets, sums, counts, hist._LE, hist._le)
    # a=2 has no +Inf bucket: not a histogram, whatever its sum
    assert got == [({"a": "1"}, ((0.5, 2.0), (math.inf, 5.0)), 3.0, 5.0)]
    read_alike(buckets, sums, counts)


def test_a_sum_line_in_another_label_order_is_found_by_histograms():
    buckets = [({"a": "1", "b": "2", "le": "+Inf"}, 4.0)]
    sums = [({"b": "2", "a": "1"}, 8.0)]
    assert _buckets.series(buckets, sums, [], hist._LE, hist._le) == [
        ({"a": "1", "b": "2"}, ((math.inf, 4.0),), None, 4.0)
    ]
    result = ParseResult(samples={"h_bucket": buckets, "h_sum": sums})
    assert hist.histograms(result, "h") == [({"a": "1", "b": "2"}, Histogram(((math.inf, 4.0),), 8.0, 4.0))]
    read_alike(buckets, sums, [])


def test_series_with_colliding_hashes_find_their_own_sums():
    labels = [{"a": _Colliding(v)} for v in "123"]
    buckets = [({**x, "le": "+Inf"}, float(n)) for n, x in enumerate(labels)]
    sums = [(x, 10.0 + n) for n, x in reversed(list(enumerate(labels)))]
    got = _buckets.series(buckets, sums, [], hist._LE, hist._le)
    assert [(row[0]["a"], row[2]) for row in got] == [("1", 10.0), ("2", 11.0), ("3", 12.0)]


def test_series_bad_input_raises():
    with pytest.raises(TypeError):
        _buckets.series([({"le": "1"}, 1.0)], [({"a": "1"},)], [], {}, hist._le)
    with pytest.raises(TypeError):
        _buckets.series([({"le": "1"}, 1.0)], [], [(["a"], 1.0)], {}, hist._le)
    with pytest.raises(TypeError):
        _buckets.series((), [], [], {}, hist._le)


def _page_of(series: int, tag: str) -> tuple[list, list, list]:
    """`series` two-bucket series of exact-str labels (bucket, sum and count lines)."""
    buckets, sums, counts = [], [], []
    for n in range(series):
        labels = {"model_name": f"m{tag}", "engine": str(n)}
        buckets += [({**labels, "le": "0.5"}, 1.0 + n), ({**labels, "le": "+Inf"}, 2.0 + n)]
        sums.append((labels, 3.0 + n))
        counts.append((dict(labels), 2.0 + n))
    return buckets, sums, counts


def test_lines_read_before_are_not_worked_out_again_and_share_their_series_dict():
    """A bucket line's dict seen on an earlier call (the parser hands out the same dict for a
    label set read before) is one lookup: its bound is not asked for again, and its series'
    labels are the same dict every time (read-only, as the parser's are)."""
    buckets, sums, counts = _page_of(3, "shared")
    asked: list[str] = []

    def le_of(raw: str) -> float | None:
        asked.append(raw)
        return hist._le(raw)

    first = _buckets.series(buckets, sums, counts, {}, le_of)
    assert len(asked) == 6
    again = _buckets.series(buckets, sums, counts, {}, le_of)
    assert len(asked) == 6  # nothing asked the second time
    assert again == first
    assert [row[0] for row in again] == [{"model_name": "mshared", "engine": str(n)} for n in range(3)]
    assert all(a[0] is b[0] for a, b in zip(first, again, strict=True))
    # another dict with the same items (a page read before its heads were kept) is grouped alike
    copies = [(dict(labels), value) for labels, value in buckets]
    assert _buckets.series(copies, sums, counts, {}, le_of) == first
    read_alike(buckets, sums, counts)


def test_past_the_kept_lines_bound_the_reading_starts_over_and_stays_right():
    """More lines than the C side keeps (16,384): it forgets them all and goes on; every call
    reads as the Python reference does, including a page whose lines straddle the reset."""
    for tag in ("a", "b"):
        buckets, sums, counts = _page_of(9000, tag)  # 18,000 bucket lines
        for _ in range(2):
            read_alike(buckets, sums, counts)


def test_two_threads_reading_while_the_kept_lines_start_over_read_right():
    """The exporter's round and a large page's parse in a worker read histograms at once; pages
    of 18,000 lines make the kept lines start over again and again under both."""
    import threading

    failures: list[BaseException] = []

    def reader(tag: str) -> None:
        try:
            for round_ in range(3):
                read_alike(*_page_of(9000, f"{tag}{round_}"))
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=reader, args=(tag,)) for tag in "xy"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures[0]
