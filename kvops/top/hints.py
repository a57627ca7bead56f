"""What `kvops top` tells a user whose targets are all down: the first-run hint, and each
down row's reason cut short for the table (the detail view, Enter, has it whole)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from kvops.termsafe import visible

if TYPE_CHECKING:
    from kvops.top.board import Board

SIM_COMMAND = "kvops sim --listen 127.0.0.1:8000 &"


def first_run_hint(board: Board, source: Any) -> list[str]:
    """With live URLs and nothing answering: how to get something to look at, in lines (the
    screen shows them as lines, `--once` joined on stderr). None where a target is up, or the
    source is a store or a replay (their own errors say more)."""
    if getattr(source, "scrapers", None) is None or board.frames == 0:
        return []
    if any(row.up for row in board.rows.values()):
        return []
    targets = ", ".join(sorted({visible(row.target) for row in board.rows.values()}))
    return [
        f"nothing answers at {targets}",
        f"start a simulated vLLM: {SIM_COMMAND}",
        "or give the URL of a vLLM's /metrics: kvops top http://HOST:PORT",
    ]


# A fetch error's usual phrasings, said in a few words (kvops.transport.http writes them).
_SHORT = (
    (re.compile(r"refused", re.I), "connection refused"),
    (re.compile(r"name lookup|resolve", re.I), "name not found"),
    (re.compile(r"TLS|certificate", re.I), "TLS error"),
    (re.compile(r"timed out", re.I), "timed out"),
    (re.compile(r"(HTTP \d{3}[^:;(]*)"), r"\1"),
    (re.compile(r"over the limit", re.I), "page too large"),
    (re.compile(r"not valid UTF-8", re.I), "not UTF-8"),
)


def short_reason(error: str | None, width: int) -> str:
    """A down target's reason in at most `width` cells, sanitised: the usual fetch errors in
    their few words, anything else cut with "…"."""
    text = visible(error or "unknown reason")
    for pattern, words in _SHORT:
        found = pattern.search(text)
        if found:
            text = found.expand(words).strip()
            break
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"
