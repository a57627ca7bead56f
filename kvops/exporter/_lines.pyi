# The C line joiner (kvops/exporter/_lines.c); built by setup.py where a compiler is at hand.
from collections.abc import Callable
from typing import Any

def join(
    heads: list[str],
    values: list[Any],
    tail: str,
    fallback: Callable[[Any], str],
    style: int = 0,
) -> bytes: ...
