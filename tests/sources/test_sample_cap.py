"""A page with a label explosion is cut, reported, and the scrape keeps its time budget
(issue 17 item 6: a 13 MB page of 200k label sets took 2.8 s and ignored a 2 s header)."""

from __future__ import annotations

import argparse
import time

import pytest

from kvops.engines.registry import WANTED
from kvops.errors import UsageError
from kvops.exporter.command import configure
from kvops.exporter.config import load_config
from kvops.exposition.parser import parse
from kvops.transport.http import DEFAULT_MAX_SAMPLES
from support.exporter_harness import parse_exposition, value
from support.paths import VLLM_FIXTURES
from support.upstream import body

GOOD = (VLLM_FIXTURES / "0.33.0" / "offload-t2.prom").read_bytes()


def explosion(series: int = 200_000) -> str:
    """One wanted family with `series` label sets: ~13 MB at 200k, as in the issue."""
    lines = ["# TYPE vllm:num_requests_running gauge"]
    lines += [
        f'vllm:num_requests_running{{model_name="org/m-{i:07d}",engine="{i % 8}"}} 1' for i in range(series)
    ]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("indent", ["", " "])  # " ": the line-by-line reader
def test_cap_is_exact_on_both_readers(indent: str):
    page = indent + explosion(100)
    at = parse(page, WANTED, max_samples=100)
    assert not at.over_limit and len(at.get("vllm:num_requests_running")) == 100
    over = parse(page, WANTED, max_samples=99)
    assert over.over_limit
    assert not parse(page, WANTED.__contains__, max_samples=100).over_limit
    assert parse(page, WANTED.__contains__, max_samples=99).over_limit
    assert parse(page).samples == parse(page, max_samples=None).samples  # no cap unless asked


def test_broken_wanted_lines_count_toward_the_cap():
    page = "vllm:num_requests_running{a=} 1\n" * 5 + "vllm:num_requests_running 2\n"
    assert parse(page, WANTED, max_samples=5).over_limit
    assert parse(" " + page, WANTED, max_samples=5).over_limit
    assert not parse(page, WANTED, max_samples=6).over_limit


@pytest.mark.parametrize("separator", [" ", "{", "\t"])
def test_a_page_of_the_shortest_counted_lines_is_counted_not_skipped_by_its_length(separator: str):
    # The shortest line the cap's count sees: the shortest wanted name and a separator, and a
    # newline for each (the count asks for more newlines than the cap). A page of limit + 1 of
    # them is exactly as long as the length bound lets through.
    wanted = {"ab", "abcdef"}
    page = ("ab" + separator + "\n") * 6
    over = parse(page, wanted, max_samples=5)
    assert over.over_limit and over.errors == [] and over.read == 5  # the count's answer, before any read
    read = parse(page, wanted, max_samples=6)
    assert not read.over_limit and len(read.errors) == 6


def test_default_cap_is_far_above_real_pages():
    for path in sorted(VLLM_FIXTURES.glob("*/*.prom")):
        assert parse(path.read_text(), WANTED).read * 100 < DEFAULT_MAX_SAMPLES, path


def test_200k_series_page_answers_within_a_2s_scrape_timeout(upstream, make_exporter):
    page = explosion().encode()
    assert len(page) > 12_000_000
    exploded = upstream.route("exploded", body(page))
    good = upstream.route("good", body(GOOD))
    exp = make_exporter([exploded, good], timeout=5.0)
    for _ in range(2):  # the second scrape too: nothing left over from the first
        start = time.monotonic()
        resp = exp.scrape(headers={"X-Prometheus-Scrape-Timeout-Seconds": "2"})
        elapsed = time.monotonic() - start
        assert resp.status_code == 200
        assert elapsed < 2.0, f"{elapsed:.2f} s: the answer must come before Prometheus gives up"
        samples = parse_exposition(resp.text)
        assert value(samples, "kvops_target_up", target=exploded) == 0.0
        assert value(samples, "kvops_target_up", target=good) == 1.0
    (cut, kept) = exp.runner.snapshot(2.0).targets  # the reason, as the log and kvops top say it
    assert not cut.up and cut.error == "more than 50000 samples (--max-samples-per-target)"
    assert kept.up


def _args(**kw) -> argparse.Namespace:
    base = {
        "config": None,
        "listen": None,
        "timeout": None,
        "max_body_bytes": None,
        "target": ["http://127.0.0.1:9"],
    }
    return argparse.Namespace(**{**base, **kw})


def test_flag_and_config_key(tmp_path):
    parser = argparse.ArgumentParser()
    configure(parser)
    args = parser.parse_args(["--target", "http://127.0.0.1:9", "--max-samples-per-target", "7"])
    assert load_config(args).targets[0].options.max_samples == 7
    assert load_config(_args()).targets[0].options.max_samples == DEFAULT_MAX_SAMPLES
    assert load_config(_args(max_samples_per_target=10)).targets[0].options.max_samples == 10
    cfg = tmp_path / "c.yaml"
    cfg.write_text("max_samples_per_target: 20\n")
    assert load_config(_args(config=str(cfg))).targets[0].options.max_samples == 20
    assert load_config(_args(config=str(cfg), max_samples_per_target=30)).targets[0].options.max_samples == 30
    for bad in ("0", "-1", "x", "1.5", "true", "[1]"):
        cfg.write_text(f"max_samples_per_target: {bad}\n")
        with pytest.raises(UsageError, match="max_samples_per_target"):
            load_config(_args(config=str(cfg)))
