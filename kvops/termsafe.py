"""Make untrusted text safe to show in a terminal: visible, never interpreted.

Labels, log lines, versions and error messages come from outside (a target's `model_name`, a pasted
log). Printed raw, an escape sequence in them can set the window title, write the clipboard (OSC 52),
move the cursor or recolour the screen. `visible()` turns every control character (C0, DEL, C1) and
the Unicode formatting characters that reorder or hide text (bidi overrides, zero-width marks) into
a printable `\\xNN` / `\\uNNNN` escape, so what the peer sent is shown, not executed.
It does not escape Rich markup: callers put the result in a `rich.text.Text` (never parsed as
markup) or pass it through `rich.markup.escape` themselves.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls; then the format characters that can disguise text:
# zero-width space/joiners, LRM/RLM, bidi embeddings/overrides/isolates, BOM, line/paragraph separators.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object, keep_newlines: bool = False) -> str:
    """`text` as str with every unsafe character shown as an escape.

    With `keep_newlines`, `\\n` (and a tab) stay as they are: for multi-line output such as a
    traceback excerpt, where each line is still cleaned.
    """
    s = text if isinstance(text, str) else str(text)
    if keep_newlines:
        return "\n".join(_UNSAFE.sub(_escape, line.replace("\t", "    ")) for line in s.split("\n"))
    return _UNSAFE.sub(_escape, s)
