"""kvops.termsafe: what a hostile peer puts in a label is shown, never run by the terminal."""

import sys
import unicodedata

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


UNSAFE_CATEGORIES = ("Cc", "Cf", "Zl", "Zp")


def _shown(code: int) -> str:
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def test_every_control_format_and_separator_character_is_escaped() -> None:
    """Exhaustive over every code point, against the running Python's unicodedata (issue 41:
    U+061C, the soft hyphen, the tag block and 140 more format characters went through)."""
    missed, extra = [], []
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        category = unicodedata.category(char)
        shown = visible(char)
        if category in UNSAFE_CATEGORIES and shown != _shown(code):
            missed.append(hex(code))
        # An escaped character unassigned here (Cn) is one a newer Unicode made a format one.
        elif category not in UNSAFE_CATEGORIES and category != "Cn" and shown != char:
            extra.append(hex(code))
    # A newer Unicode may add format characters: add them to termsafe._UNSAFE.
    assert not missed and not extra, (unicodedata.unidata_version, missed[:20], extra[:20])


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("a\u061cb", "a\\u061cb"),  # Arabic letter mark
        ("soft\xadhyphen", "soft\\xadhyphen"),
        ("tag\U000e0041\U000e007f", "tag\\U000e0041\\U000e007f"),  # invisible tag characters
        ("\u2028\u2029", "\\u2028\\u2029"),
        ("nbsp\xa0ok", "nbsp\xa0ok"),  # a space separator (Zs) is shown as it is
    ],
)
def test_format_characters_named_in_the_report(raw: str, shown: str) -> None:
    assert visible(raw) == shown
