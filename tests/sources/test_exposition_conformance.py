"""The peers' own parser tests, ported (tests/sources/conformance/, one file per suite, each
case with its source), checked on both of kvops's readers.

Every case says what each reader must give: the samples (a valid line read exactly), the
line numbers reported (an invalid line skipped and numbered, never turned into another
value), the TYPEs read, and "up" (whether one sample parsed) decided alike by both.
Where a suite stops at its first error, kvops reads on: the expected samples are then the
other lines'. Where kvops reads a case differently from the suite, the case says so and why
in its "note" (upstream's verdict is kept beside, in "upstream_error").
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kvops.exposition.parser import ParseResult, parse

CONFORMANCE = Path(__file__).parent / "conformance"
SUITES = ["expfmt", "promparse", "client_python", "names_and_decoder"]


def _cases(suite: str) -> list[dict]:
    doc = json.loads((CONFORMANCE / f"{suite}.json").read_text(encoding="utf-8"))
    assert doc["source"]["commit"] and doc["source"]["repo"] and doc["source"]["path"]
    return doc["cases"]


def _key(value: float) -> str:
    return "NaN" if math.isnan(value) else repr(float(value))


def _samples(case: dict) -> list:
    if case.get("samples_by"):  # a benchmark page: upstream wrote no values, a peer reads them
        text = (CONFORMANCE / case["input_file"]).read_text(encoding="utf-8")
        families = text_string_to_metric_families(text)
        return [(s.name, s.labels, s.value) for f in families for s in f.samples]
    return case["samples"]


def _expected(case: dict) -> list[tuple]:
    samples = _samples(case)
    return sorted((name, tuple(sorted(labels.items())), _key(float(v))) for name, labels, v in samples)


def _read(result: ParseResult) -> list[tuple]:
    return sorted(
        (name, tuple(sorted(labels.items())), _key(value))
        for name, samples in result.samples.items()
        for labels, value in samples
    )


def _check(case: dict) -> None:
    if "input_file" in case:  # a peer's benchmark page, kept whole in conformance/pages/
        text = (CONFORMANCE / case["input_file"]).read_text(encoding="utf-8")
    elif case["input"] is None:  # bytes that are not UTF-8: the page never reaches the parser
        with pytest.raises(UnicodeDecodeError):
            bytes.fromhex(case["input_bytes_hex"]).decode("utf-8")  # as transport/http.py decodes
        return
    else:
        text = case["input"]
    full = parse(text)
    assert _read(full) == _expected(case), "full reader: samples"
    assert [line for line, _ in full.errors] == case["errors"], f"full reader: errors {full.errors}"
    if "types" in case:
        assert full.types == case["types"]

    wanted = {name for name, _, _ in _samples(case)} | set(case.get("wanted", []))
    fast = parse(text, wanted)
    assert _read(fast) == _expected(case), "fast path: samples"
    fast_errors = case.get("fast_errors", case["errors"])
    assert [line for line, _ in fast.errors] == fast_errors, f"fast path: errors {fast.errors}"
    assert fast.types.items() <= full.types.items()

    # "up" with every name counted: true exactly when one sample line parses, on both readers
    # ("up" says the page is an exposition: a line whose le or quantile is not a number still
    # counts, as lines of families kvops does not read are only parsed, never typed).
    every, up = ("",), case.get("up", bool(_samples(case)))
    assert parse(text, count_prefixes=every).has_prefixed_sample == up
    assert parse(text, set(), count_prefixes=every).has_prefixed_sample == up
    assert parse(text, wanted.__contains__, count_prefixes=every).has_prefixed_sample == up


@pytest.mark.parametrize("suite", SUITES)
def test_suite_is_ported_with_its_source(suite: str):
    cases = _cases(suite)
    assert len(cases) >= 20
    assert len({c["id"] for c in cases}) == len(cases)
    accepted = [c for c in cases if c["upstream_error"] and not c["errors"] and c["input"] is not None]
    assert all((CONFORMANCE / c["input_file"]).is_file() for c in cases if "input_file" in c)
    for c in accepted:  # upstream rejects, kvops reads it: said so, with a reason
        assert c.get("note", "").startswith(("differs", "valid under")), c["id"]


@pytest.mark.parametrize("case", _cases("expfmt"), ids=lambda c: c["id"])
def test_expfmt_text_parse(case: dict):
    _check(case)


@pytest.mark.parametrize("case", _cases("promparse"), ids=lambda c: c["id"])
def test_prometheus_promparse(case: dict):
    _check(case)


@pytest.mark.parametrize("case", _cases("client_python"), ids=lambda c: c["id"])
def test_client_python_parser(case: dict):
    _check(case)


@pytest.mark.parametrize("case", _cases("names_and_decoder"), ids=lambda c: c["id"])
def test_prometheus_common_names_and_decoder(case: dict):
    _check(case)
