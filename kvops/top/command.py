"""`kvops top [URL ...] [--prometheus URL] [--replay FILE ...] [--interval S] [--once] [--json]`."""

from __future__ import annotations

import argparse
import math
from typing import Any

DEFAULT_URL = "http://localhost:8000"  # vllm serve's default port
MAX_SCRAPE_TIMEOUT = 5.0


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "urls", nargs="*", metavar="URL",
        help=f"vLLM, LMCache or kvops exporter base or /metrics URL (default {DEFAULT_URL})",
    )  # fmt: skip
    parser.add_argument(
        "--prometheus", metavar="URL", help="fleet view: every vLLM a Prometheus server knows"
    )
    parser.add_argument("--replay", nargs="+", metavar="FILE", help="saved expositions, one interval apart")
    parser.add_argument("--interval", default="1", metavar="S", help="seconds between frames (default 1)")
    parser.add_argument("--once", action="store_true", help="print one frame from two samples and exit")
    parser.add_argument("--json", action="store_true", help="with --once: the frame as JSON on stdout")


def parse_interval(raw: str) -> float:
    from kvops.errors import UsageError

    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"--interval {raw!r}: not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"--interval {raw!r}: must be a positive number of seconds")
    return value


def build_source(args: argparse.Namespace, interval: float) -> Any:
    """The one source the flags ask for (UsageError for a bad or ambiguous choice)."""
    from kvops.errors import UsageError

    chosen = [name for name, given in (("URL", args.urls), ("--prometheus", args.prometheus),
                                       ("--replay", args.replay)) if given]  # fmt: skip
    if len(chosen) > 1:
        raise UsageError(f"give one source, not {' and '.join(chosen)}")
    timeout = min(MAX_SCRAPE_TIMEOUT, max(1.0, interval))
    if args.replay:
        from kvops.sources.replay import ReplaySource

        return ReplaySource(args.replay, interval)
    if args.prometheus:
        from kvops.sources.prometheus import PrometheusSource

        return PrometheusSource(args.prometheus, timeout)
    from kvops.top.live import LiveSource

    return LiveSource(args.urls or [DEFAULT_URL], timeout)


def run(args: argparse.Namespace) -> int:
    from kvops.errors import UsageError

    interval = parse_interval(args.interval)
    if args.json and not args.once:
        raise UsageError("--json goes with --once (the live view is for people)")
    if args.once and args.replay is not None and len(args.replay) < 2:
        raise UsageError("--once --replay needs two files: rates come from an interval")
    quiet_logs()
    source = build_source(args, interval)  # bad input is named before the terminal is
    if args.once:
        try:
            return print_once(source, interval, args.json)
        finally:
            source.close()
    try:
        require_terminal()
    except UsageError:
        source.close()
        raise
    return run_app(source, interval)


def print_once(source: Any, interval: float, as_json: bool) -> int:
    import json
    import sys
    import time

    from kvops.rates import interval as rates_interval
    from kvops.top.board import Board

    try:
        first = _frame(source, interval)
        if source.live:
            time.sleep(interval)
        second = _frame(source, interval)
    except TimeoutError as exc:
        print(f"kvops top: {exc}", file=sys.stderr)
        return 1
    if as_json:
        doc = rates_interval(first, second).to_json()
        sys.stdout.write(json.dumps(_finite(doc), allow_nan=False) + "\n")
        return 0
    from kvops.top.text import render

    board = Board()
    board.update(first)
    board.update(second)
    sys.stdout.write(render(board) + "\n")
    return 0


ONCE_WAIT_SECONDS = 120.0  # how long --once waits for a Prometheus to scrape something new


def _frame(source: Any, interval: float) -> Any:
    """The next new frame; a Prometheus source has one only after its next scrape."""
    import time

    end = time.monotonic() + ONCE_WAIT_SECONDS
    while True:
        snap = source.next()
        if snap is not None:
            return snap
        if time.monotonic() > end:
            raise TimeoutError(f"no new sample in {ONCE_WAIT_SECONDS:g} s")
        time.sleep(min(interval, 1.0))


def _finite(value: Any) -> Any:
    """NaN and ±Inf (a broken exposition can carry them) become null: JSON has no NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def require_terminal() -> None:
    """The live view draws on a terminal and reads keys from it; in a pipe it would hang."""
    import sys

    from kvops.errors import UsageError

    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("the live view needs a terminal; for scripts use --once (with --json)")


def quiet_logs() -> None:
    """Every failure is shown in the frame (down targets, failing collectors); log lines on
    the terminal would tear the live display and repeat the frame in --once."""
    import logging

    logging.getLogger("kvops").setLevel(logging.CRITICAL)


def run_app(source: Any, interval: float) -> int:
    from kvops.top.app import TopApp

    app = TopApp(source, interval)
    app.run()
    return app.return_code or 0
