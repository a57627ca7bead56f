"""The C line joiner (kvops/exporter/_lines.c) writes what the Python join writes."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.utils import floatToGoString

from kvops.exporter import line_text

_lines = pytest.importorskip("kvops.exporter._lines", reason="not built; test_text_sink.py fails for that")

_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e6, 999999.9999999999, -1e300, 5e-324, 1e22, 0.1 + 0.2]),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.booleans(),
)
_TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)


def c_join(heads, values, tail=""):
    return _lines.join(heads, values, tail, floatToGoString, line_text.exponent_style())


def float_to_go_0_20(d):
    """prometheus_client 0.20.0's floatToGoString (prometheus_client/utils.py), as released:
    its exponent is "e+0" and the number, so 1.5e+010 where 0.21 and later write 1.5e+10."""
    d = float(d)
    if d == math.inf:
        return "+Inf"
    elif d == -math.inf:
        return "-Inf"
    elif math.isnan(d):
        return "NaN"
    else:
        s = repr(d)
        dot = s.find(".")
        if d > 0 and dot > 6:
            mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1 :]}".rstrip("0.")
            return f"{mantissa}e+0{dot - 1}"
        return s


_LARGE = st.one_of(
    st.floats(min_value=1e6, max_value=2e16),
    st.integers(min_value=10**6, max_value=2**54).map(float),
    st.sampled_from([1e6, 1e7, 10000000.000001, 2.0**53, 2.0**53 - 1, 9999999999999998.0, 1e16, 1e15]),
)


@settings(max_examples=400, deadline=None)
@given(lines=st.lists(st.tuples(_TEXT, st.one_of(_VALUES, st.none())), max_size=30), tail=_TEXT)
def test_the_c_join_is_the_python_join(lines, tail):
    heads = [h for h, _ in lines]
    values = [v for _, v in lines]
    assert c_join(heads, values, tail) == line_text.python_join(heads, values, tail)


@pytest.mark.parametrize("float_to_go", [floatToGoString, float_to_go_0_20], ids=["installed", "0.20"])
@settings(max_examples=300, deadline=None)
@given(values=st.lists(_LARGE, min_size=1, max_size=40))
def test_the_c_join_writes_each_release_s_exponent_form(float_to_go, values):
    """Values from 1e6 up are written in C in the form the installed prometheus_client writes
    (its exponent's width changed after 0.20), not asked of floatToGoString one by one."""
    style = line_text.exponent_style(float_to_go)
    assert style in (1, 2)

    def refuse(value):
        raise AssertionError(f"asked the fallback for {value!r}")

    heads = ["x "] * len(values)
    expected = "".join(f"x {float_to_go(v)}\n" for v in values).encode()
    assert _lines.join(heads, values, "", refuse, style) == expected


def test_an_unknown_exponent_form_is_asked_of_the_fallback():
    assert line_text.exponent_style(repr) == 0
    assert _lines.join(["x "], [12345678.5], "", lambda v: "asked", 0) == b"x asked\n"


def test_a_none_value_writes_its_head_alone():
    help_type = "# HELP a b\n# TYPE a gauge\n"
    assert c_join([help_type, "a "], [None, 1.0]) == f"{help_type}a 1.0\n".encode()
    assert line_text.python_join([help_type, "a "], [None, 1.0], "") == f"{help_type}a 1.0\n".encode()


def test_a_large_exposition_grows_the_buffer():
    heads = [f'kvops_x{{i="{i}"}} ' for i in range(50_000)]
    values = [i / 7 for i in range(50_000)]
    assert c_join(heads, values, "# end\n") == line_text.python_join(heads, values, "# end\n")


@pytest.mark.parametrize("join", [c_join, line_text.python_join])
def test_bad_input_raises_as_python_does(join):
    with pytest.raises(ValueError):
        join(["a "], [1.0, 2.0], "")
    with pytest.raises(UnicodeEncodeError):  # a lone surrogate has no UTF-8
        join(["a\udc80 "], [1.0], "")
    with pytest.raises(TypeError):
        join(["a "], [object()], "")  # float() of it fails in floatToGoString


def test_a_head_that_is_not_text_is_refused():
    with pytest.raises(TypeError, match="expected str"):
        c_join([b"a "], [1.0])


def test_a_fallback_that_empties_the_lists_ends_the_join_without_a_crash():
    heads, values = ["a ", "b ", "c "], [1.0, 1e300, 3.0]

    def shrinking(value):
        heads.clear()
        values.clear()
        return "x"

    assert _lines.join(heads, values, "", shrinking) == b"a 1.0\nb x\n"


def test_a_fallback_longer_than_the_estimate_grows_the_output():
    """The output is sized at 32 bytes a value; a fallback's longer text grows it in place."""
    heads, values = ["a ", "b ", "c "], [1.0, 1e300, 3.5]
    long = "9" * 5000
    assert _lines.join(heads, values, "end\n", lambda v: long) == f"a 1.0\nb {long}\nc 3.5\nend\n".encode()


class _Sample:
    def __init__(self, **values):
        self.__dict__.update(values)


_FIELD_VALUES = st.one_of(st.none(), st.floats(allow_nan=False), st.integers(-5, 5))


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(_FIELD_VALUES, _FIELD_VALUES), max_size=6),
    fields=st.sampled_from([("a",), ("b",), ("a", "b"), ("b", "a")]),
)
def test_the_c_gather_is_the_python_gather(rows, fields):
    samples = [_Sample(a=a, b=b) for a, b in rows]
    heads = [f"h{i} " for i in range(len(samples) * len(fields))]
    out = {}
    for name, gather in (("c", _lines.gather), ("python", line_text.python_gather)):
        out_heads, out_values = ["first "], [0.0]
        added = gather(samples, fields, heads, out_heads, out_values)
        out[name] = (added, out_heads, out_values)
    assert out["c"] == out["python"]
    assert out["c"][0] == sum(getattr(s, f) is not None for s in samples for f in fields)


def test_gather_refuses_too_few_heads_and_passes_on_a_failing_attribute():
    with pytest.raises(ValueError, match="fewer heads"):
        _lines.gather([_Sample(a=1.0)], ("a",), [], [], [])
    with pytest.raises(AttributeError):
        _lines.gather([_Sample(a=1.0)], ("missing",), ["h "], [], [])


_BOUNDS = st.lists(st.floats(-10, 10, allow_nan=False), max_size=4, unique=True).map(sorted)


@settings(max_examples=300, deadline=None)
@given(bounds=_BOUNDS, kept=_BOUNDS, counts=st.lists(st.floats(0, 100), min_size=5, max_size=5))
def test_the_c_buckets_is_the_python_buckets(bounds, kept, counts):
    pairs = tuple(zip(bounds, counts, strict=False))
    heads = [f"b{le} " for le in kept]
    out = {}
    for name, put in (("c", _lines.buckets), ("python", line_text.python_buckets)):
        out_heads, out_values = [], []
        out[name] = (put(pairs, tuple(kept), heads, out_heads, out_values), out_heads, out_values)
    assert out["c"] == out["python"]
    assert out["c"][0] == (list(bounds) == list(kept))
    assert out["c"][1:] == ((heads, list(counts[: len(bounds)])) if out["c"][0] else ([], []))


_KEYS = st.lists(st.sampled_from(["a", "b", "c", "1", 2]), max_size=4, unique=True)


@settings(max_examples=300, deadline=None)
@given(by_key=st.dictionaries(st.sampled_from(["a", "b", "c", "1", 2]), _FIELD_VALUES), keys=_KEYS)
def test_the_c_keyed_is_the_python_keyed(by_key, keys):
    heads = [f"k{key} " for key in keys]
    out = {}
    for name, put in (("c", _lines.keyed), ("python", line_text.python_keyed)):
        out_heads, out_values = [], []
        out[name] = (put(by_key, tuple(keys), heads, out_heads, out_values), out_heads, out_values)
    assert out["c"] == out["python"]
    assert out["c"][0] == (set(by_key) == set(keys))
    if out["c"][0]:
        assert out["c"][2] == [by_key[k] for k in keys if by_key[k] is not None]


@settings(max_examples=300, deadline=None)
@given(
    dicts=st.lists(st.dictionaries(st.sampled_from(["a", "b", "c"]), _FIELD_VALUES, max_size=3), max_size=5),
    planned=st.lists(st.booleans(), min_size=5, max_size=5),
    start=st.integers(-1, 5),
)
def test_the_c_keyed_all_is_the_python_keyed_all(dicts, planned, start):
    samples = [_Sample(d=d) for d in dicts]
    plans = [
        (tuple(d), [f"{i}{k} " for k in d]) if made and d else (("zz",), ["zz "]) if made else None
        for i, (d, made) in enumerate(zip(dicts, planned, strict=False))
    ]
    out = {}
    for name, put in (("c", _lines.keyed_all), ("python", line_text.python_keyed_all)):
        out_heads, out_values = [], []
        out[name] = (put(samples, "d", plans, start, out_heads, out_values), out_heads, out_values)
    assert out["c"] == out["python"]


def test_keyed_all_hands_back_a_field_that_is_not_a_dict():
    samples = [_Sample(d={}), _Sample(d=[1]), _Sample(d={"a": 1.0})]
    assert _lines.keyed_all(samples, "d", [None, None, None], 0, [], []) == 1
    assert line_text.python_keyed_all(samples, "d", [None, None, None], 0, [], []) == 1
