"""Issue 42's vLLM figures of the previous round's held-out set, and the shape guard of item 7:
SimpleCPUOffloadConnector's save outcomes and pool use, vLLM's share of prompt tokens from all
caches, and a load count split by phase (vllm-project/vllm#57251) read once, not twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kvops.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SIMPLE = FIXTURES / "vllm-simple-offload"
PHASE = FIXTURES / "vllm-simple-offload-phase"
REAL = FIXTURES / "vllm-real" / "0.32.0"


def _row(capsys: pytest.CaptureFixture[str], *pages: Path) -> dict:
    assert main(["top", "--once", "--json", "--replay", *map(str, pages)]) == 0
    [row] = json.loads(capsys.readouterr().out)["targets"]
    return row


def _dumps(folder: Path) -> tuple[dict, dict]:
    truth = json.loads((folder / "truth.json").read_text())
    return truth["dumps"][0], truth["dumps"][1]


def test_simple_offload_every_save_outcome_and_the_pools_use_at_the_end(capsys) -> None:
    t1, t2 = _dumps(SIMPLE)
    row = _row(capsys, SIMPLE / t1["file"], SIMPLE / t2["file"])
    before, after = t1["fed"]["save_outcomes"], t2["fed"]["save_outcomes"]
    shown = row["simple_save_outcomes_blocks"]
    for outcome in ("skipped_already_cached", "skipped_in_flight", "stored", "dropped_cpu_full"):
        assert shown[outcome] == after[outcome] - before[outcome] > 0, outcome
    capacity = float(json.loads((SIMPLE / "truth.json").read_text())["info"]["capacity_blocks"])
    assert row["tiers"]["host"]["usage_ratio"] == t2["gauges"]["used_blocks"] / capacity


def _page_sums(page: Path, family: str) -> float:
    text = page.read_text()
    return sum(
        s.value for fam in text_string_to_metric_families(text) for s in fam.samples if s.name == family
    )


def test_share_of_prompt_tokens_from_all_caches_on_a_real_vllm_page(capsys) -> None:
    """A real vLLM 0.32.0 server's pages (tests/fixtures/vllm-real): tokens any cache served
    (device and host) over the prompt tokens, both from the pages, over the interval."""
    mid, after = REAL / "offload-mid.prom", REAL / "offload-after.prom"
    row = _row(capsys, mid, after)

    def delta(family: str) -> float:
        return _page_sums(after, family) - _page_sums(mid, family)

    cached = delta("vllm:prompt_tokens_cached_by_source_total")
    prompt = delta("vllm:prompt_tokens_by_source_total")
    assert cached > 0 and row["cached_prompt_share"] == pytest.approx(cached / prompt)
    assert row["cached_prompt_share"] > row["tiers"]["host"]["prompt_share"]  # the device's hits too


def test_a_load_count_split_by_phase_is_read_once_and_named_partly_read(capsys) -> None:
    t1, t2 = _dumps(PHASE)
    row = _row(capsys, PHASE / t1["file"], PHASE / t2["file"])
    completed = t2["fed"]["completed"] - t1["fed"]["completed"]
    issued = t2["fed"]["issued"] - t1["fed"]["issued"]
    assert issued > completed  # summed over phase, today's reader would have shown their sum
    assert row["tiers"]["host"]["load_blocks"] == completed
    assert row["partly_read_families"] == {"vllm:simple_kv_offload_load_blocks_total": "phase"}


def test_labels_a_scraper_adds_are_identity_not_a_split(capsys, tmp_path: Path) -> None:
    """The same 0.33 pages with instance, job, namespace, pod and container on every series (as
    a Prometheus federation or a store serves them) read as before, nothing partly read."""
    t1, t2 = _dumps(SIMPLE)
    extra = 'instance="10.0.0.7:8000",job="vllm",namespace="ai",pod="vllm-0",container="vllm",'
    pages = []
    for dump in (t1, t2):
        text = (SIMPLE / dump["file"]).read_text().replace('{engine="0"', "{" + extra + 'engine="0"')
        page = tmp_path / dump["file"]
        page.write_text(text)
        pages.append(page)
    row = _row(capsys, *pages)
    assert row["partly_read_families"] == {}
    assert row["tiers"]["host"]["load_blocks"] == t2["fed"]["load_blocks"] - t1["fed"]["load_blocks"]
