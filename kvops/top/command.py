"""`kvops top [URL ...] [--target URL ...] [--prometheus URL] [--replay FILE ...] [--once] [--json]`."""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, Any

from kvops.top.view import View

if TYPE_CHECKING:
    from kvops.top.board import Board

DEFAULT_URL = "http://localhost:8000"  # vllm serve's default port
MAX_SCRAPE_TIMEOUT = 5.0
MAX_INTERVAL = 3600.0  # seconds between frames
# --sort KEY -> the board's sort (kvops.top.board.SORTS)
SORT_KEYS = ("target", "local-hit", "external-hit", "store", "load", "kv", "requests", "preemptions")
WINDOWS = {"1s": 1.0, "10s": 10.0, "1m": 60.0}  # chart smoothing


EXAMPLES = """\
examples:
  kvops top                                     # the vLLM on this host (localhost:8000)
  kvops top http://10.0.0.5:8000 http://10.0.0.6:19435
  kvops top --target http://10.0.0.5:8000 --target http://10.0.0.6:19435   # as the exporter takes them
  kvops top --prometheus http://prometheus:9090
  kvops top --once --json --replay t1.prom t2.prom
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "urls", nargs="*", metavar="URL",
        help=f"vLLM, LMCache or kvops exporter base or /metrics URL (default {DEFAULT_URL})",
    )  # fmt: skip
    parser.add_argument(
        "--target", action="append", default=[], dest="targets", metavar="URL",
        help="a URL as the exporter and doctor take it (repeatable; joins the URLs given without it)",
    )  # fmt: skip
    parser.add_argument(
        "--prometheus",
        metavar="URL",
        help="fleet view: every vLLM a Prometheus (or a store with its query API) knows",
    )
    parser.add_argument("--replay", nargs="+", metavar="FILE", help="saved expositions, one interval apart")
    parser.add_argument("--interval", default="1", metavar="S", help="seconds between frames (default 1)")
    parser.add_argument("--once", action="store_true", help="print one frame from two samples and exit")
    parser.add_argument("--json", action="store_true", help="with --once: the frame as JSON on stdout")
    view = parser.add_argument_group("what to show")
    view.add_argument(
        "--sort",
        choices=SORT_KEYS,
        default="target",
        help="row order; hit rates worst first, the rest highest first (default target)",
    )
    view.add_argument(
        "--filter", default="", metavar="TEXT", help="only engines whose URL or model contains TEXT"
    )
    view.add_argument(
        "--top", type=int, metavar="N", help="show at most N engines and count the rest (never cuts --json)"
    )
    view.add_argument(
        "--group-by",
        choices=("model", "instance", "kind"),
        help="fleet aggregates per model, per instance (host:port) or per engine kind",
    )
    view.add_argument(
        "--window",
        choices=tuple(WINDOWS),
        default="10s",
        help="charts' smoothing window (default 10s; `w` cycles it)",
    )
    auth = parser.add_argument_group("--prometheus access")
    auth.add_argument(
        "--prometheus-bearer-token-file",
        metavar="FILE",
        help="send the token in this file as Authorization: Bearer",
    )
    auth.add_argument(
        "--prometheus-basic-auth",
        metavar="USER:PASSWORD_FILE",
        help="HTTP basic auth; the password is read from PASSWORD_FILE",
    )
    auth.add_argument(
        "--prometheus-ca-file", metavar="FILE", help="verify the store's TLS certificate against this CA"
    )
    auth.add_argument(
        "--prometheus-header",
        action="append",
        metavar="'NAME: VALUE'",
        help="an extra request header, e.g. 'X-Scope-OrgID: tenant1' for Mimir (repeatable)",
    )


def user_defaults() -> dict[str, Any]:
    """$XDG_CONFIG_HOME/kvops/top.yml (kvops/userconfig.py); flags given win."""
    from kvops.userconfig import top_defaults

    return top_defaults(SORT_KEYS, tuple(WINDOWS))


def view_of(args: argparse.Namespace) -> View:
    from kvops.errors import UsageError

    top = getattr(args, "top", None)
    if top is not None and top < 1:
        raise UsageError(f"--top {top}: give at least 1")
    return View(
        sort=SORT_KEYS.index(getattr(args, "sort", "target")),
        text_filter=getattr(args, "filter", "") or "",
        top=top,
        group_by=getattr(args, "group_by", None),
        window=WINDOWS[getattr(args, "window", "10s")],
    )


def parse_interval(raw: str) -> float:
    from kvops.errors import UsageError

    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"--interval {raw!r}: not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"--interval {raw!r}: must be a positive number of seconds")
    if value > MAX_INTERVAL:  # time.sleep(1e10) overflowed; a frame an hour is no dashboard
        raise UsageError(f"--interval {raw!r}: at most {MAX_INTERVAL:g} seconds (one hour)")
    return value


def build_source(args: argparse.Namespace, interval: float) -> Any:
    """The one source the flags ask for (UsageError for a bad or ambiguous choice)."""
    from kvops.errors import UsageError

    urls = [*args.urls, *getattr(args, "targets", [])]  # `top URL` and `top --target URL` are one list
    chosen = [name for name, given in (("URL", urls), ("--prometheus", args.prometheus),
                                       ("--replay", args.replay)) if given]  # fmt: skip
    if len(chosen) > 1:
        raise UsageError(f"give one source, not {' and '.join(chosen)}")
    prometheus = args.prometheus
    if not chosen:  # none on the command line: top.yml's, if it names one
        prometheus = getattr(args, "config_prometheus", None)
        urls = getattr(args, "config_targets", None) or []
    timeout = min(MAX_SCRAPE_TIMEOUT, max(1.0, interval))
    if args.replay:
        from kvops.frames.replay import ReplaySource

        return ReplaySource(args.replay, interval)
    auth = (args.prometheus_bearer_token_file, args.prometheus_basic_auth, args.prometheus_ca_file,
            args.prometheus_header)  # fmt: skip
    if any(auth) and not prometheus:
        raise UsageError("the --prometheus-* access options go with --prometheus")
    if prometheus:
        from kvops.frames.prometheus import PrometheusSource, auth_options

        return PrometheusSource(prometheus, timeout, auth_options(*auth))
    from kvops.top.live_source import LiveSource

    return LiveSource(urls or [DEFAULT_URL], timeout, one_shot=bool(getattr(args, "once", False)))


def run(args: argparse.Namespace) -> int:
    from kvops.errors import UsageError

    interval = parse_interval(args.interval)
    if args.json and not args.once:
        raise UsageError("--json goes with --once (the live view is for people)")
    if args.once and args.replay is not None and len(args.replay) < 2:
        raise UsageError("--once --replay needs two files: rates come from an interval")
    quiet_logs()
    view = view_of(args)
    source = build_source(args, interval)  # bad input is named before the terminal is
    if args.once:
        try:
            return print_once(source, interval, args.json, view)
        finally:
            source.close()
    try:
        require_terminal()
    except UsageError:
        source.close()
        raise
    return run_app(source, interval, view)


def print_once(source: Any, interval: float, as_json: bool, view: View | None = None) -> int:
    import json
    import sys

    from kvops.top.board import Board

    view = view or View()
    try:
        first, second = _two_frames(source, interval)
    except TimeoutError as exc:
        print(f"kvops top: {exc}", file=sys.stderr)
        return 1
    board = Board(max_rows=None)  # --once is never cut
    board.update(second, before=first)
    if as_json:
        sys.stdout.write(json.dumps(_finite(once_json(board, view)), allow_nan=False) + "\n")
    else:
        from kvops.top.text import render

        simulated = bool(getattr(source, "simulated_hardware", False))
        sim_targets: frozenset[str] = getattr(source, "simulated_targets", frozenset())
        sys.stdout.write(render(board, simulated, view, sim_targets) + "\n")
    return once_status(board, source)


def once_status(board: Board, source: Any) -> int:
    """`--once`'s exit status (docs/DESIGN.md): 0 when at least one target is up, 1 when every
    one is down (with the first-run hint on stderr for live URLs). A frame of no target at all
    (an exporter that watches GPUs only) is 0: nothing is down."""
    import sys

    from kvops.top.hints import first_run_hint

    targets = board.interval.targets if board.interval is not None else []
    if not targets or any(t.up for t in targets):
        return 0
    hint = "; ".join(first_run_hint(board, source))
    print(f"kvops top: every target is down{': ' + hint if hint else ''}", file=sys.stderr)
    return 1


def once_json(board: Board, view: View) -> dict[str, Any]:
    """The frame as `--once --json` writes it (schema_version first): the one place top turns
    its typed frames into JSON. Every engine (no --top cut), in the --sort order, less what
    --filter leaves out; with --group-by, the groups of those engines."""
    from dataclasses import asdict

    from kvops.rates import Interval
    from kvops.top import fleet

    frame = board.interval
    assert frame is not None  # print_once updated the board
    order = {row.key: i for i, row in enumerate(board.visible(view.text_filter, view.sort))}

    def key(entry: fleet.Entry) -> tuple[str, str, str]:
        return (entry.target, entry.model_name or "", entry.engine or "")

    shown = sorted((e for e in frame.targets if key(e) in order), key=lambda e: order[key(e)])
    doc = Interval(frame.interval_seconds, shown, frame.gpus, frame.host).to_json()
    if view.group_by:
        doc["groups"] = [asdict(g) for g in fleet.group(shown, view.group_by, frame.interval_seconds)]
    return doc


def _two_frames(source: Any, interval: float) -> tuple[Any, Any]:
    """(before, after): from a store, one frame of its history; else two samples."""
    import time

    if hasattr(source, "once"):  # the Prometheus fleet view: the store has the interval
        from kvops.termsafe import visible
        from kvops.transport.http import FetchError

        try:
            return source.once()
        except FetchError as exc:  # unreachable, refused, timed out, a wrong answer: exit 1
            raise TimeoutError(f"--prometheus {source.base}: {visible(exc)}") from None
    first = _frame(source, interval)
    if source.live:
        time.sleep(interval)
    return first, _frame(source, interval)


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


def run_app(source: Any, interval: float, view: View | None = None) -> int:
    import os
    import sys

    from kvops.top.app import TopApp

    app = TopApp(source, interval, view)
    app.settle_gc = True
    try:
        app.run()
        code = app.return_code or 0
    except KeyboardInterrupt:  # a SIGINT from outside (kill -INT): quitting is what was asked
        code = 0
    # The terminal is restored. Leave now rather than at interpreter exit, which joins the
    # scrape pool's worker threads: one busy parsing a huge page would hold `q` for seconds
    # (issue 17: `q` within 1 s). Nothing is left to save; the simulator of `kvops demo` is a
    # thread of this process.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
