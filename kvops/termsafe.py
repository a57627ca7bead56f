"""Make untrusted text safe to show in a terminal: visible, never interpreted.

Labels, log lines, versions and error messages come from outside (a target's `model_name`, a pasted
log). Printed raw, an escape sequence in them can set the window title, write the clipboard (OSC 52),
move the cursor or recolour the screen. `visible()` turns every control character (C0, DEL, C1) and
every Unicode format or separator character (they reorder or hide text: bidi overrides, zero-width
marks, tag characters) into a printable `\\xNN` / `\\uNNNN` / `\\UNNNNNNNN` escape, so what the
peer sent is shown, not executed.
It does not escape Rich markup: callers put the result in a `rich.text.Text` (never parsed as
markup) or pass it through `rich.markup.escape` themselves.
"""

from __future__ import annotations

import re

# Every character of Unicode's categories Cc (C0, DEL, C1), Cf (format: soft hyphen, the Arabic
# letter mark U+061C, zero-width and bidi marks, the tag block U+E0000-E007F, ...), Zl and Zp
# (line and paragraph separators): the union of what Unicode 14.0, 15.0 and 15.1 (Python 3.11-3.13)
# put in them. Spelt out rather than built from unicodedata at import (that walk costs 0.27 s);
# tests/test_termsafe.py checks every code point against the running Python's unicodedata.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: object, keep_newlines: bool = False) -> str:
    """`text` as str with every unsafe character shown as an escape.

    With `keep_newlines`, `\\n` (and a tab) stay as they are: for multi-line output such as a
    traceback excerpt, where each line is still cleaned.
    """
    s = text if isinstance(text, str) else str(text)
    if keep_newlines:
        return "\n".join(_UNSAFE.sub(_escape, line.replace("\t", "    ")) for line in s.split("\n"))
    return _UNSAFE.sub(_escape, s)
