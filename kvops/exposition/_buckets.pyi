# The C grouping of bucket samples (kvops/exposition/_buckets.c); setup.py builds it where it can.
from collections.abc import Callable

def group(
    samples: list[tuple[dict[str, str], float]],
    les: dict[str, float | None],
    le_of: Callable[[str], float | None],
) -> dict[tuple[tuple[str, str], ...], tuple[dict[str, str], list[tuple[float, float]]]]: ...
def series(
    samples: list[tuple[dict[str, str], float]],
    sums: list[tuple[dict[str, str], float]],
    counts: list[tuple[dict[str, str], float]],
    les: dict[str, float | None],
    le_of: Callable[[str], float | None],
) -> list[tuple[dict[str, str], tuple[tuple[float, float], ...], float | None, float]]: ...
