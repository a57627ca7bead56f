# The C line joiner (kvops/exporter/_lines.c); built by setup.py where a compiler is at hand.
from collections.abc import Callable

def join(heads: list[str], values: list[float], tail: str, fallback: Callable[[float], str]) -> bytes: ...
