"""`kvops exporter` that finds each page's wanted lines and does nothing with them: a floor.

    python benchmarks/floor_exporter.py [kvops exporter options]

For benchmarks/exporter_scrape.py's `--floor`. Everything a scrape does that does not grow
with the wanted lines is kept as shipped: the fetch of every target on one libcurl multi
handle, the pages' decoding, the scan that finds the wanted lines (kvops.exposition.parser._find_lines,
as _read_found runs it: the C finder where it was built, else the regular expression), the
hardware collectors, the HTTP server and the encoding of what is left. What is removed is
the work per wanted line: splitting and checking it, normalising the samples into engines,
and rendering and encoding them (each page reads as an "up" target with no engine). The CPU
this exporter spends per scrape is what any kvops built this way spends before it has read
a single figure; naive / floor is the most `kvops exporter` could gain on the naive
exporter without making those steps cheaper.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from kvops import cli
from kvops.exposition import parser


def _scan_only(text: str, wanted: frozenset[str], *args: object) -> parser.ParseResult:
    parser._find_lines(text, wanted)
    return parser.ParseResult(has_prefixed_sample=True)


def main() -> int:
    # parse() looks _parse_wanted up at each call; were it renamed, setting it would measure
    # the whole parse under the floor's name.
    if not callable(getattr(parser, "_parse_wanted", None)):
        raise SystemExit("floor_exporter: kvops.exposition.parser has no _parse_wanted to replace")
    replace: Callable[..., parser.ParseResult | None] = _scan_only
    parser._parse_wanted = replace
    return cli.main(["exporter", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
