"""How `kvops top` writes numbers: the units people read, and the thresholds that colour them.

GB/s are decimal (1e9 bytes per second, like PCIe and NIC specs); memory is GiB (2**30, like
free -g and nvidia-smi); ratios are percent. An unknown value is "-", never 0.
"""

from __future__ import annotations

import math
import os

from rich.text import Text

from kvops.units import GIB

GB = 1e9

# What stands out (issue 4): a hit rate under half, a link more than 90 % busy, a resource
# about to run out.
LOW_HIT_RATE = 0.5
BUSY_LINK = 0.9
FULL_KV = 0.95

SPARK_CHARS = "▁▂▃▄▅▆▇█"
UNKNOWN = "-"


def known(value: float | None) -> float | None:
    """None for unknown, NaN and ±Inf (the decoders already drop them: this is the last guard
    before a terminal); -0 as 0, so that no "-0.0 %" is shown."""
    return value + 0.0 if value is not None and math.isfinite(value) else None


def pct(value: float | None, digits: int = 1) -> str:
    value = known(value)
    return UNKNOWN if value is None else f"{value * 100 + 0.0:.{digits}f} %"


def gbps(value: float | None) -> str:
    value = known(value)
    return UNKNOWN if value is None else f"{value / GB:.2f} GB/s"


def gb(value: float | None) -> str:
    value = known(value)
    return UNKNOWN if value is None else f"{value / GB:.2f} GB"


def gib(value: float | None) -> str:
    value = known(value)
    return UNKNOWN if value is None else f"{value / GIB:.1f} GiB"


def ms(value: float | None) -> str:
    value = known(value)
    return UNKNOWN if value is None else f"{value * 1000:.0f} ms"


def ratio(value: float | None) -> str:
    value = known(value)
    return UNKNOWN if value is None else f"{value:.2f}"


def count(value: float | None) -> str:
    value = known(value)
    return UNKNOWN if value is None else f"{value:.0f}"


def sparkline(values: list[float | None], width: int) -> str:
    """The last `width` values as block characters, scaled to their own maximum; a gap
    (unknown, or the target down) is a space so an outage shows as one."""
    tail = [known(v) for v in values[-width:]]
    top = max((v for v in tail if v is not None), default=0.0)
    out = []
    for v in tail:
        if v is None:
            out.append(" ")
        elif top <= 0:
            out.append(SPARK_CHARS[0])
        else:
            out.append(SPARK_CHARS[min(len(SPARK_CHARS) - 1, int(v / top * (len(SPARK_CHARS) - 1) + 0.5))])
    return "".join(out).rjust(width)


BAR_CHARS = " ▏▎▍▌▋▊▉█"


def bar(fraction: float, width: int) -> str:
    """`fraction` (0-1) of `width` cells filled, in eighths of a cell, on a dotted track."""
    eighths = round(max(0.0, min(1.0, known(fraction) or 0.0)) * width * 8)
    full, part = divmod(eighths, 8)
    return ("█" * full + (BAR_CHARS[part] if part else "")).ljust(width, "·")


ALARM_MARK = "!"  # after a figure whose colour is an alarm: NO_COLOR (or a colour-blind eye) still sees it


def flagged(text: str, style: str) -> str:
    """`text` with the alarm mark when `style` (one of the *_style() below) is an alarm: what
    the live table shows, as plain text (`--once`)."""
    return text + ALARM_MARK if style else text


def marked(text: str, style: str) -> Text:
    """`text` in `style`, with the alarm mark when the style is an alarm (red or yellow)."""
    return Text(flagged(text, style), style=style)


def alarm(colour: str = "red") -> str:
    """An alarm's style: bold in `colour`; with NO_COLOR (no-color.org: set and not empty)
    bold reverse video, since Textual then turns colours into greys by their brightness, and a
    red figure became dark grey on grey."""
    return "bold reverse" if os.environ.get("NO_COLOR") else f"bold {colour}"


def hit_rate_style(value: float | None) -> str:
    value = known(value)
    return alarm() if value is not None and value < LOW_HIT_RATE else ""


def link_style(fraction: float | None) -> str:
    fraction = known(fraction)
    return alarm() if fraction is not None and fraction > BUSY_LINK else ""


def usage_style(fraction: float | None) -> str:
    fraction = known(fraction)
    return alarm("yellow") if fraction is not None and fraction >= FULL_KV else ""


def room_style(free: float | None, tier: float | None) -> str:
    """Host RAM or /dev/shm smaller than the offload tier it must hold (vLLM maps it there)."""
    free, tier = known(free), known(tier)
    return alarm() if tier is not None and free is not None and free < tier else ""
