"""The baseline for benchmarks/exporter_scrape.py: the exporter one writes first.

    python benchmarks/naive_exporter.py PORT URL [URL ...]

On each scrape it fetches every target in turn with requests, parses the whole body with
prometheus_client.parser.text_string_to_metric_families, picks the vLLM samples kvops
serves, collects the GPUs, and renders the same kvops_* families as `kvops exporter`
(kvops.exporter.families), so only the fetch and parse strategy differ.
"""

from __future__ import annotations

import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kvops.collectors.nvidia import NvidiaCollector
from kvops.engines import registry
from kvops.exporter.families import gpu_families, target_families
from kvops.exposition.parser import ParseResult
from kvops.snapshot import TargetSample
from kvops.transport.http import normalise_target


def scrape(url: str) -> TargetSample:
    target = normalise_target(url)
    try:
        text = requests.get(target + "/metrics", timeout=5).text
        result = ParseResult()
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if s.name.startswith(("vllm:", "lmcache:")):
                    result.has_prefixed_sample = True
                if s.name in registry.WANTED:
                    result.samples.setdefault(s.name, []).append((dict(s.labels), s.value))
        return registry.normalise(result, target)
    except Exception as exc:
        return TargetSample(target, up=False, error=str(exc))


def main() -> int:
    port, urls = int(sys.argv[1]), sys.argv[2:]
    gpus = NvidiaCollector()

    class Families:
        def collect(self):
            targets = [scrape(u) for u in urls]
            try:
                gpu_samples = gpus.collect()
            except Exception:
                gpu_samples = []
            return target_families(targets) + gpu_families(gpu_samples)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            body = generate_latest(Families())  # type: ignore[arg-type]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
