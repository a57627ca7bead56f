"""`kvops exporter`: serve one normalised kvops_* exposition for Prometheus."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from kvops.collectors import registry as collectors

if TYPE_CHECKING:
    from kvops.exporter.config import ExporterConfig
    from kvops.scrape.runner import ScrapeRunner, TargetDiscovery

DEFAULT_LISTEN = "0.0.0.0:19435"


EXAMPLES = """\
examples:
  kvops exporter --target http://10.0.0.5:8000 --target http://10.0.0.6:8000
  kvops exporter --config targets.yml --web-config web.yml --listen 127.0.0.1:19435
"""


def user_defaults() -> dict[str, Any]:
    """$XDG_CONFIG_HOME/kvops/exporter.yml is the --config when none is given."""
    from kvops.userconfig import exporter_defaults

    return exporter_defaults()


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="URL",
        help="vLLM or LMCache base URL or its /metrics URL (repeatable); none: host and GPU only",
    )
    parser.add_argument(
        "--listen",
        default=None,
        metavar="HOST:PORT",
        help=f"address to serve /metrics on (default {DEFAULT_LISTEN})",
    )
    parser.add_argument(
        "--config", metavar="FILE", help="YAML: targets (url, bearer_token_file, ca_file), ..."
    )
    parser.add_argument("--web-config", metavar="FILE", help="exporter-toolkit web config: TLS, basic auth")
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=None,
        metavar="N",
        help="largest /metrics page read from a target, in bytes (default 16 MiB)",
    )
    parser.add_argument(
        "--max-samples-per-target",
        type=int,
        default=None,
        metavar="N",
        help="a page with more samples of the families kvops reads is down (default 50000)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds to wait for each target (default 5; always under the scrape's timeout header)",
    )
    parser.add_argument(
        "--no-collector",
        action="append",
        default=[],
        choices=collectors.NAMES,
        help="turn a hardware/host collector off (repeatable)",
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="least severe log lines shown on stderr (default info)",
    )
    k8s = parser.add_argument_group("in-cluster discovery (docs/deploy.md)")
    k8s.add_argument(
        "--kubernetes-pod-selector",
        metavar="SELECTOR",
        help="also scrape ready pods on this node matching this label selector, e.g. app=vllm",
    )
    k8s.add_argument("--kubernetes-node-name", metavar="NODE", help="this node's name (default $NODE_NAME)")
    k8s.add_argument(
        "--kubernetes-port",
        type=int,
        default=8000,
        metavar="N",
        help="port of a pod without a port annotation (default 8000)",
    )
    k8s.add_argument(
        "--kubernetes-namespace",
        metavar="NS",
        help="namespace to list pods in (default: all the RBAC allows)",
    )
    k8s.add_argument(
        "--kubernetes-refresh",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds between pod lists (default 30)",
    )


def run(args: argparse.Namespace) -> int:
    import logging
    import signal
    import sys
    import threading

    from kvops import gcsettle, heap
    from kvops.exporter.config import load_config
    from kvops.exporter.round_exposition import RoundExpositions
    from kvops.exporter.server import ExporterServer, parse_listen
    from kvops.exporter.webconfig import load as load_web_config

    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    heap.keep_freed_memory()  # each round's memory kept for the next (kvops/heap.py)
    config = load_config(args)
    host, port = parse_listen(config.listen or DEFAULT_LISTEN)
    web = load_web_config(args.web_config) if args.web_config else None
    from kvops.transport.kubernetes import discovery_from_args

    runner = build_runner(config, discovery_from_args(args, config.timeout))
    server = ExporterServer((host, port), RoundExpositions(runner.snapshot, after_first=gcsettle.settle), web)
    stop = threading.Event()

    def _shutdown(_signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _shutdown)
    signal.signal(signal.SIGINT, _shutdown)
    server.serve_in_thread()
    logging.getLogger("kvops.exporter").info(
        "serving %s/metrics for %d target(s)", server.url, len(config.targets)
    )
    stop.wait()
    server.shutdown()
    server.server_close()
    runner.close()
    return 0


# Scrapes within this long of a round's start share it (an HA Prometheus pair, retries, a
# flood of clients): upstream targets see at most 1 / ROUND_REUSE_SECONDS fetches a second.
ROUND_REUSE_SECONDS = 0.5


def build_runner(config: ExporterConfig, discovery: TargetDiscovery | None = None) -> ScrapeRunner:
    from kvops.collectors.procs import ProcessTracker
    from kvops.collectors.registry import default_collectors
    from kvops.scrape.runner import ScrapeRunner
    from kvops.scrape.target import TargetScraper
    from kvops.transport.http import FetchOptions

    scrapers = [TargetScraper(t.url, t.options) for t in config.targets]
    sources = default_collectors(disabled=config.disabled_collectors)
    # Process memory of local targets comes with the host collector.
    tracker = ProcessTracker() if "host" not in config.disabled_collectors else None
    return ScrapeRunner(
        scrapers,
        sources,
        timeout=config.timeout,
        process_tracker=tracker,
        discovery=discovery,  # kvops/transport/kubernetes.py, with --kubernetes-pod-selector
        discovered_options=FetchOptions(max_body_bytes=config.max_body_bytes, max_samples=config.max_samples),
        min_interval=ROUND_REUSE_SECONDS,
    )
