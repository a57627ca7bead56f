"""The text of exposition lines (format 0.0.4), as prometheus_client's generate_latest writes it.

A line is its head (`name{sorted, escaped labels} `, the same from one scrape to the next,
so callers keep it) and its value's text. join() writes many lines at once: in C where
setup.py could build kvops/exporter/_lines.c, else in Python (the reference; both are
compared in tests/exporter/test_line_text.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from prometheus_client.utils import floatToGoString

from kvops.exporter.histogram_family import has_count_and_sum, le_text
from kvops.snapshot import Histogram

try:  # the C line joiner, built by setup.py where a compiler was at hand
    from kvops.exporter._lines import buckets as _c_buckets
    from kvops.exporter._lines import gather as _c_gather
    from kvops.exporter._lines import join as _c_join
    from kvops.exporter._lines import keyed as _c_keyed
    from kvops.exporter._lines import keyed_all as _c_keyed_all
except ImportError:  # pragma: no cover - python_join and python_gather below do the same
    _c_join = None  # type: ignore[assignment]
    _c_gather = None  # type: ignore[assignment]
    _c_buckets = None  # type: ignore[assignment]
    _c_keyed = None  # type: ignore[assignment]
    _c_keyed_all = None  # type: ignore[assignment]

_NEG_INF = float("-inf")


def escape_value(value: str) -> str:
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


def head(name: str, items: Iterable[tuple[str, str]]) -> str:
    """'name{sorted, escaped labels} ': a line's text before its value. kvops's own names
    are fixed and valid (kvops/names.py), so only label values need escaping."""
    labels = ",".join(f'{k}="{escape_value(v)}"' for k, v in sorted(items))
    return f"{name}{{{labels}}} " if labels else f"{name} "


def histogram_heads(name: str, items: list[tuple[str, str]], value: Histogram) -> tuple[list[str], str, str]:
    """A histogram series' heads: each bucket's, then _count's and _sum's ("" for both where
    prometheus_client writes neither)."""
    buckets = [head(name + "_bucket", [*items, ("le", le_text(le))]) for le, _ in value.buckets]
    if not has_count_and_sum(value):
        return buckets, "", ""
    return buckets, head(name + "_count", items), head(name + "_sum", items)


def header(name: str, documentation: str, kind: str) -> str:
    """A family's HELP and TYPE lines (`name` as exposed: a counter's with _total)."""
    doc = documentation.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {name} {doc}\n# TYPE {name} {kind}\n"


def value_text(value: float) -> str:
    # floatToGoString differs from repr() only for infinities, NaN and positive numbers of 7+
    # integer digits (Go's exponent form): a finite float below 1e6 is its repr.
    if type(value) is float and _NEG_INF < value < 1e6:
        return repr(value)
    return floatToGoString(value)


def python_join(heads: list[str], values: list[Any], tail: str) -> bytes:
    text = "".join([h if v is None else f"{h}{value_text(v)}\n" for h, v in zip(heads, values, strict=True)])
    return (text + tail).encode("utf-8")


def _go_exponent_form(d: float, exponent: str) -> str:
    """floatToGoString's text of a positive float from 1e6 up, its exponent `exponent`-formatted."""
    s = repr(d)
    dot = s.find(".")
    mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1 :]}".rstrip("0.")
    return f"{mantissa}e+{exponent.format(dot - 1)}"


def exponent_style(float_to_go: Callable[[float], str] = floatToGoString) -> int:
    """Which exponent form `float_to_go` writes for a float from 1e6 up, for the C join: 1 for
    prometheus_client 0.21 and later ("1.5e+10"), 2 for 0.20's ("1.5e+010"), 0 for neither
    (the C join then asks float_to_go for every such value)."""
    probes = (1234567.0, 1e6, 12345678901.5, 999999999999999.9, 10000000.000001)
    for style, exponent in ((1, "{:02d}"), (2, "0{}")):
        if all(float_to_go(d) == _go_exponent_form(d, exponent) for d in probes):
            return style
    return 0


_STYLE = exponent_style()


def join(heads: list[str], values: list[Any], tail: str = "") -> bytes:
    """UTF-8 of each head followed by its value's text and a newline, then `tail`. A None
    value writes its head alone: a text of whole lines (a family's HELP and TYPE)."""
    if _c_join is not None:
        return _c_join(heads, values, tail, floatToGoString, _STYLE)
    return python_join(heads, values, tail)


def python_gather(
    samples: Sequence[Any],
    fields: tuple[str, ...],
    heads: list[str],
    out_heads: list[str],
    out_values: list[Any],
) -> int:
    """For each sample and each of `fields`, in order, the attribute's value where it is not
    None, appended to out_values and its head (heads[sample * len(fields) + field]) to
    out_heads; the number appended."""
    added = 0
    width = len(fields)
    for i, sample in enumerate(samples):
        for j, field in enumerate(fields):
            value = getattr(sample, field)
            if value is not None:
                out_heads.append(heads[i * width + j])
                out_values.append(value)
                added += 1
    return added


def python_buckets(
    pairs: tuple[tuple[float, float], ...],
    bounds: tuple[float, ...],
    heads: list[str],
    out_heads: list[str],
    out_values: list[Any],
) -> bool:
    """Where `pairs` (a histogram's (upper bound, count) buckets) has exactly the upper bounds
    `bounds` (a head each in `heads`): each count appended to out_values, its head to out_heads,
    and True; else nothing appended and False."""
    if len(pairs) != len(bounds) or len(heads) != len(bounds):
        return False
    if any(le != bound for (le, _), bound in zip(pairs, bounds, strict=True)):
        return False
    out_heads += heads
    out_values += [count for _, count in pairs]
    return True


def python_keyed(
    by_key: dict[Any, Any],
    keys: tuple[Any, ...],
    heads: list[str],
    out_heads: list[str],
    out_values: list[Any],
) -> bool:
    """Where `by_key` has exactly the keys `keys` (a head each in `heads`, in order): each value
    that is not None appended to out_values, its head to out_heads, and True; else nothing
    appended and False."""
    if len(by_key) != len(keys) or len(heads) != len(keys) or any(key not in by_key for key in keys):
        return False
    for key, text in zip(keys, heads, strict=True):
        value = by_key[key]
        if value is not None:
            out_heads.append(text)
            out_values.append(value)
    return True


def python_keyed_all(
    samples: Sequence[Any],
    field: str,
    plans: list[tuple[tuple[Any, ...], list[str]] | None],
    start: int,
    out_heads: list[str],
    out_values: list[Any],
) -> int:
    """From samples[start] on, each sample whose `field` is a dict that is not empty written
    with its plan (keys, heads) by python_keyed: -1 when all are, else the index of the first
    sample whose plan is None or no longer matches its keys (or whose field is not a dict)."""
    for i in range(max(start, 0), len(samples)):
        by_key = getattr(samples[i], field)
        if not by_key:
            continue
        plan = plans[i] if i < len(plans) else None
        if not isinstance(by_key, dict) or plan is None:
            return i
        if not python_keyed(by_key, plan[0], plan[1], out_heads, out_values):
            return i
    return -1


# In C where it was built: one call per family, histogram series or dict, not a Python loop.
gather = python_gather if _c_gather is None else _c_gather
put_buckets = python_buckets if _c_buckets is None else _c_buckets
put_keyed = python_keyed if _c_keyed is None else _c_keyed
put_keyed_all = python_keyed_all if _c_keyed_all is None else _c_keyed_all
