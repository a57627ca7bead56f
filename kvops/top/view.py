"""What the user asked `kvops top` to show: read from the command line (command.py), changed
by keys in the app (app.py), applied by the text frame (text.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class View:
    """What the user asked to see: sort, filter, how many rows, grouping, chart smoothing."""

    sort: int = 0
    text_filter: str = ""
    top: int | None = None
    group_by: str | None = None
    window: float = 10.0
