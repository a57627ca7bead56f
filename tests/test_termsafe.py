"""kvops.termsafe: what a hostile peer puts in a label is shown, never run by the terminal."""

import pytest

from kvops.termsafe import visible


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B"),
        ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),  # window title
        ("\x1b]52;c;ZXZpbA==\x07", "\\x1b]52;c;ZXZpbA==\\x07"),  # OSC 52 clipboard write
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        ("a\x9b2Jb", "a\\x9b2Jb"),  # C1 CSI
        ("up\rdown\nx", "up\\x0ddown\\x0ax"),
        ("abc\u202edcba", "abc\\u202edcba"),  # right-to-left override
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("\x7f", "\\x7f"),
        ("日本語 model", "日本語 model"),
    ],
)
def test_visible_escapes_controls(raw: str, shown: str) -> None:
    assert visible(raw) == shown


def test_keep_newlines_cleans_each_line() -> None:
    assert visible("one\x1b[2J\ntwo\tx", keep_newlines=True) == "one\\x1b[2J\ntwo    x"


def test_non_str_is_converted() -> None:
    assert visible(3.5) == "3.5"
