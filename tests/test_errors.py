"""One line of an error, as logs, metrics and status lines show it."""

from __future__ import annotations

from kvops.errors import one_line


def test_first_line_only_and_bounded():
    assert one_line(OSError("refused\n  at line 2")) == "refused"
    assert one_line(ValueError("x" * 500)) == "x" * 300
    assert one_line(ValueError("x" * 500), limit=10) == "x" * 10


def test_no_text_gives_the_type_and_typed_puts_it_first():
    assert one_line(TimeoutError()) == "TimeoutError"
    assert one_line(RuntimeError("  \n ")) == "RuntimeError"
    assert one_line(RuntimeError("CUDA error: out of memory\nmore"), typed=True) == (
        "RuntimeError: CUDA error: out of memory"
    )
