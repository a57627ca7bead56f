"""The C line joiner (kvops/exporter/_lines.c) writes what the Python join writes."""

from __future__ import annotations

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
    return _lines.join(heads, values, tail, floatToGoString)


@settings(max_examples=400, deadline=None)
@given(lines=st.lists(st.tuples(_TEXT, _VALUES), max_size=30), tail=_TEXT)
def test_the_c_join_is_the_python_join(lines, tail):
    heads = [h for h, _ in lines]
    values = [v for _, v in lines]
    assert c_join(heads, values, tail) == line_text.python_join(heads, values, tail)


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
