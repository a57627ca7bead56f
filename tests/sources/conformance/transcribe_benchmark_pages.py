"""Adds the peers' benchmark pages (pages/) to promparse.json and names_and_decoder.json.

Kept to regenerate the cases after a correction; nothing runs it at test time. Run it after the
other transcribe_*.py scripts (they rewrite those files):
    python tests/sources/conformance/transcribe_benchmark_pages.py

Upstream's benchmarks read these pages and fail on any parse error: their verdict is "accepted",
with no expected values written down. The expected samples are therefore read by a peer, not by
kvops, when the test runs: prometheus_client's text parser (client_python), one sample per sample
line ("samples_by"; a page's samples are not copied here, the pages are 150-190 kB).
"""

import json
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

HERE = Path(__file__).parent
PAGES = [
    # (suite file, case id, upstream path, page file)
    (
        "promparse.json",
        "BenchmarkParsePromText",
        "model/textparse/testdata/alltypes.237mfs.prom.txt",
        "prometheus-alltypes.237mfs.prom.txt",
    ),
    (
        "promparse.json",
        "BenchmarkParsePromText_NoMeta",
        "model/textparse/testdata/alltypes.237mfs.nometa.prom.txt",
        "prometheus-alltypes.237mfs.nometa.prom.txt",
    ),
    (
        "names_and_decoder.json",
        "BenchmarkParseText",
        "expfmt/testdata/text",
        "common-expfmt-testdata-text.prom.txt",
    ),
]


for suite, case_id, path, page in PAGES:
    text = (HERE / "pages" / page).read_text(encoding="utf-8")
    n = sum(len(f.samples) for f in text_string_to_metric_families(text))  # upstream's verdict: no error
    case = {
        "id": case_id,
        "path": path,
        "input": None,
        "input_file": "pages/" + page,
        "samples": None,
        "samples_by": "prometheus_client.parser.text_string_to_metric_families",
        "errors": [],
        "upstream_error": None,
    }
    doc = json.loads((HERE / suite).read_text(encoding="utf-8"))
    doc["cases"] = [c for c in doc["cases"] if c["id"] != case_id] + [case]
    (HERE / suite).write_text(json.dumps(doc, indent=1, ensure_ascii=False), encoding="utf-8")
    print(suite, case_id, n, "samples")
