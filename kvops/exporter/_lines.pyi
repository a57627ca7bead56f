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
def gather(
    samples: list[Any], fields: tuple[str, ...], heads: list[str], out_heads: list[str], out_values: list[Any]
) -> int: ...
def buckets(
    buckets: tuple[tuple[float, float], ...],
    bounds: tuple[float, ...],
    heads: list[str],
    out_heads: list[str],
    out_values: list[Any],
) -> bool: ...
def keyed(
    values_by_key: dict[Any, Any],
    keys: tuple[Any, ...],
    heads: list[str],
    out_heads: list[str],
    out_values: list[Any],
) -> bool: ...
def keyed_all(
    samples: list[Any],
    field: str,
    plans: list[tuple[tuple[Any, ...], list[str]] | None],
    start: int,
    out_heads: list[str],
    out_values: list[Any],
) -> int: ...
