"""A widget's content size, kept until its outer size or its styles change.

Widget.size works the content size out from the region and the CSS gutter on every call;
asked on every line of every frame (the table's rows, the charts' lines) it was a twentieth of
`kvops top`'s UI thread each. The outer size is a kept attribute: the content size is worked
out again only when it, or the widget's styles (its padding), change.
"""

from __future__ import annotations

from textual.geometry import Size
from textual.widget import Widget


class ContentSize:
    """`of(widget)` is `widget.size`; call `forget()` from the widget's notify_style_update."""

    def __init__(self) -> None:
        self._for: Size | None = None  # the outer size `_size` was worked out for
        self._size = Size(0, 0)

    def of(self, widget: Widget) -> Size:
        outer = widget.outer_size
        if outer != self._for:
            self._for, self._size = outer, widget.size
        return self._size

    def forget(self) -> None:
        self._for = None
