"""Regenerate docs/images/kvops-demo.svg, the README's screenshot of `kvops demo`.

    python docs/gen_screenshot.py [--out docs/images/kvops-demo.svg] [--seconds 20]

The same simulated vLLM and the same dashboard `kvops demo` runs (kvops.demo.simulated), driven
by Textual's own test pilot in a 120x40 virtual terminal and saved with Textual's screenshot (SVG):
the figures are live, so each run draws slightly different ones.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "docs" / "images" / "kvops-demo.svg"
SIZE = (120, 40)


async def shoot(out: Path, seconds: float) -> None:
    from kvops import demo
    from kvops.top.app import TopApp
    from kvops.top.command import quiet_logs

    quiet_logs()  # as `kvops demo`: a slow first scrape is shown in the frame, not logged over it
    with demo.simulated("0.33.0", demo.DEMO_WORKLOAD, interval=1.0) as source:
        app = TopApp(source, 1.0)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause(seconds)  # the charts fill with a few seconds of history
            svg = app.export_screenshot(title="kvops demo")
        source.close()
    # The simulator listens on a random port; the picture shows a fixed one, as a user's would.
    svg = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:8000", svg)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(svg)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the SVG")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the demo runs before the shot")
    args = parser.parse_args(argv)
    if not args.seconds > 0:
        parser.error("--seconds must be above 0")
    asyncio.run(shoot(args.out, args.seconds))
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
