"""The scan's split of the usual wanted line (name, label set, one blank, value) reads what
parse_sample_line reads: same samples, same errors at the same lines, on both readers.

The wanted-set reader splits `name{labels} value` in its regular expression; the predicate
reader (every line in turn) never does, so the two are compared line by line, each line
twice in a row (the second read comes from the kept label sets and line heads)."""

from __future__ import annotations

import math

import pytest

from kvops.exposition.parser import parse

NAMES = ("m_total", "h_bucket", "g")
LINES = [
    'm_total{a="1"} 3',
    'm_total{a="}"} 4',  # a "}" inside a value: the set runs to the line's last "}"
    'm_total{a="x\\"}\\n"} 5',  # escapes
    'm_total{a="1",} 6',  # trailing comma
    'm_total{a="1"} 1e400',  # out of range: an error, not +Inf
    'm_total{a="1"} +Inf',
    'm_total{a="1"} -infinity',
    'm_total{a="1"} NaN',
    'm_total{a="1"} 1_000',  # not Go's grammar
    'm_total{a="1"} ٣',  # not an ASCII digit
    'm_total{a="1"} 0x1p3',
    'm_total{a="1"} 7 1700000000000',  # a timestamp: parse_sample_line's path
    'm_total{a="1"} 8 ',  # a trailing blank
    'm_total{a="1"}\t9',
    'm_total {a="1"} 10',
    'm_total{a="1",a="2"} 11',  # duplicate label name
    'm_total{__name__="x"} 12',
    'm_total{"q",a="1"} 13',  # a quoted name beside a bare one
    'm_total{a="1"} 14}',
    'm_total{a="1" 15',  # cut inside the label set
    "g 16",
    "g  17",
    "g -0.0",
    "g .5e-3",
    'h_bucket{le="0.5",a="1"} 18',
    'h_bucket{le="bla",a="1"} 19',  # not a bound: an error once the TYPE says histogram
]


def _read(result):
    return {
        name: [(labels, "nan" if math.isnan(v) else v) for labels, v in samples]
        for name, samples in result.samples.items()
    }


@pytest.mark.parametrize("line", LINES)
def test_split_lines_read_as_every_line_reads_them(line: str):
    text = f"# TYPE h histogram\n{line}\n{line}\ng 1\n"
    for _ in range(2):  # the second time from what was kept
        fast = parse(text, NAMES)
        full = parse(text, lambda name: name in NAMES)
        assert _read(fast) == _read(full)
        assert fast.errors == full.errors
        assert fast.read == full.read
