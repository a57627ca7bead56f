# The C line finder (kvops/exposition/_linescan.c); built by setup.py where a compiler is at hand.

class Finder:
    def __init__(self, wanted: frozenset[str] | set[str], families: frozenset[str] | set[str]) -> None: ...
    def findall(self, text: str) -> list[tuple[str, str, str, str, str, str]] | None: ...
    def read_known(
        self,
        text: str,
        heads: dict[str, tuple[str, dict[str, str]]],
        samples: dict[str, list[tuple[dict[str, str], float]]],
        max_found: int = -1,
        max_read: int = -1,
        known_types: dict[str, tuple[str, str]] = ...,
        types: dict[str, str] = ...,
    ) -> tuple[int, bool, list[str]] | None: ...
