"""Every page of the test suite, for checks that must hold on all of them (the C parts against
their Python references: tests/sources/test_linescan.py, test_buckets.py)."""

from __future__ import annotations

import json
from pathlib import Path

from kvops.engines.registry import WANTED
from support.paths import FIXTURES

CONFORMANCE = Path(__file__).parent.parent / "sources" / "conformance"


def _pages() -> list[tuple[str, str, frozenset[str]]]:
    """(id, page, wanted): every engine's fixture pages with the registry's names, and every
    conformance case with the names its samples carry."""
    pages = [
        (str(path.relative_to(FIXTURES)), path.read_text(encoding="utf-8"), frozenset(WANTED))
        for path in sorted(FIXTURES.rglob("*"))
        if path.suffix in (".prom", ".txt")
    ]
    for suite in ("expfmt", "promparse", "client_python", "names_and_decoder"):
        cases = json.loads((CONFORMANCE / f"{suite}.json").read_text(encoding="utf-8"))["cases"]
        for number, case in enumerate(cases):
            if "input_file" in case:
                text = (CONFORMANCE / case["input_file"]).read_text(encoding="utf-8")
            elif case.get("input") is not None:
                text = case["input"]
            else:
                continue
            names = {name for name, _, _ in case.get("samples") or []} | set(case.get("wanted", []))
            pages.append((f"{suite}#{number}", text, frozenset(names | {"vllm:num_requests_running"})))
    return pages


PAGES = _pages()
