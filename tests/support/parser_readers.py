"""Switches that make kvops.exposition.parser use one of its readers, for tests that compare them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from kvops.exposition import parser


@contextlib.contextmanager
def match_by_match() -> Iterator[None]:
    """The wanted-set reader that numbers lines and watches the clock (_read_matches), which
    parse() uses where the C reader and the one-findall reader give up or the page is long."""
    saved = parser._FOUND_MAX_CHARS, parser._KNOWN_MAX_CHARS
    parser._FOUND_MAX_CHARS = parser._KNOWN_MAX_CHARS = -1
    try:
        yield
    finally:
        parser._FOUND_MAX_CHARS, parser._KNOWN_MAX_CHARS = saved


@contextlib.contextmanager
def regex_only() -> Iterator[None]:
    """The parser as it runs where the C line finder was not built."""
    saved = parser.Finder, parser._FOUND_PATTERNS
    parser.Finder, parser._FOUND_PATTERNS = None, {}
    try:
        yield
    finally:
        parser.Finder, parser._FOUND_PATTERNS = saved
