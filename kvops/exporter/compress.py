"""The gzip form of an exposition, for the scrapes that ask for it (Prometheus always does).

ISA-L's deflate (python-isal) where it is installed: on a 357 KB exposition of 16 simulated
vLLMs, level 1 took 0.16 ms against zlib's 1.05 ms at its level 1 and wrote 1.5 % fewer bytes
(best of 30, 2026-11-27; zlib-ng's level 1 took 0.27 ms for 21 % more bytes). zlib, as the
standard library has it, where isal has no wheel for the machine (see pyproject.toml).
"""

from __future__ import annotations

import re
import zlib
from typing import Any

_deflate: Any
try:
    from isal import isal_zlib as _deflate
except ImportError:  # a machine without isal's wheel: the standard library's zlib
    _deflate = zlib

# Level 1 of either: the scrape's CPU matters more than the last bytes. zlib's level 6 (gzip's
# default) saved 18 % more bytes for 3.6× the CPU on a page that crosses a rack.
LEVEL = 1
_GZIP_WBITS = 31  # deflate in a gzip member (header with mtime 0, CRC-32 and size trailer)


def gzip_bytes(data: bytes) -> bytes:
    """`data` as one gzip member, which every gzip reader (Go's compress/gzip too) reads."""
    compressor = _deflate.compressobj(LEVEL, _deflate.DEFLATED, _GZIP_WBITS)
    return bytes(compressor.compress(data) + compressor.flush())


def backend() -> str:
    """Which deflate writes the gzip form: "isal" or "zlib"."""
    return "zlib" if _deflate is zlib else "isal"


# RFC 9110 §12.4.2: qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
_QVALUE = re.compile(r"(?:0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?)")


def accepts_gzip(header: str | None) -> bool:
    """Whether an Accept-Encoding value (RFC 9110 §12.5.3) prefers gzip to no coding at all.

    Weights are honoured: `gzip;q=0` refuses gzip, `*` stands for codings not named, x-gzip is
    gzip. Identity is the fallback whatever is refused, and wins when it is given a higher weight
    than gzip; on a tie gzip is sent (Prometheus asks for plain `gzip`). An entry with a malformed
    weight is ignored.
    """
    if not header:
        return False
    weights: dict[str, float] = {}
    for entry in header.split(","):
        coding, *params = (part.strip() for part in entry.split(";"))
        coding = coding.lower()
        if not coding:
            continue
        weight = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                value = value.strip()
                weight = float(value) if _QVALUE.fullmatch(value) else -1.0
        if weight < 0:
            continue
        coding = "gzip" if coding == "x-gzip" else coding
        weights[coding] = max(weight, weights.get(coding, weight))  # named twice: the kinder weight
    star = weights.get("*")
    gzip_weight = weights.get("gzip", star if star is not None else 0.0)
    # Identity unnamed is acceptable but asked for by nobody: any weight on gzip goes first.
    identity = weights.get("identity", star if star is not None else 0.0)
    return gzip_weight > 0 and gzip_weight >= identity
