"""playbooks/ is doctor's knowledge base: one readable, parseable file per catalogued failure."""

from __future__ import annotations

import re

import pytest

from kvops.doctor.judging import catalog
from kvops.playbooks_path import playbooks_dir


@pytest.fixture(scope="module")
def cat() -> catalog.Catalog:
    return catalog.load()


def expected_id(source_id: str) -> str:
    renamed = {
        "VLLM-OFFLOAD-DSA-INDEXER-KEYERROR": "mla-indexer-keyerror",
        "ROCM-AITER-CK-MOE-GEMM-UNSUPPORTED": "aiter-gemm-unsupported",
    }
    return renamed.get(source_id, source_id.lower())


def test_every_playbook_in_the_folder_loads(cat) -> None:
    assert cat.problems == ()
    assert len(cat.failures) + len(cat.alerts) == len(
        [p for p in playbooks_dir().glob("*.md") if p.name.lower() != "readme.md"]
    )


def test_every_catalogued_failure_has_its_playbook(cat, failures) -> None:
    for entry in failures:
        pb = cat.get(expected_id(entry["id"]))
        assert pb is not None, entry["id"]
        assert pb.path.name == f"{pb.id}.md" and pb.source_id == entry["id"]
        assert pb.confidence == entry["confidence"]
        # silent misconfigurations (no log line, a config_rule only) carry no signature
        wanted = [entry["signature_regex"]] if entry["signature_regex"] else []
        assert [s.pattern for s in pb.signatures] == wanted
        if not wanted:  # a silent misconfiguration, or the fallback that quotes unknown failures
            assert (entry["config_rule"] and pb.conditions) or entry.get("fallback"), pb.id
        if entry.get("context_regex"):
            assert [c.pattern for c in pb.context] == [entry["context_regex"]]
        for section in catalog.SECTIONS:
            assert pb.section(section), f"{pb.id}: empty {section}"
        for url in entry["sources"]:
            assert url.split(" ")[0] in pb.section("Sources")
        assert pb.fix is not None and (pb.fix.note or not pb.fix.is_empty())
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", pb.id)


def test_aiter_playbook_puts_the_unsourced_seed_claim_last(cat) -> None:
    pb = cat.get("aiter-gemm-unsupported")
    assert pb.fix.env == {"VLLM_ROCM_USE_AITER_MOE": "0"} and pb.fix.confidence == "sourced"
    claim = pb.alternatives[-1]
    assert claim.confidence == "reported by the AMD guide, unverified"
    assert set(claim.add) == {
        "--kv-offloading-backend=native",
        "--kv-offloading-size=64",
        "--disable-hybrid-kv-cache-manager",
    }
    assert all(a.confidence == "sourced" for a in pb.alternatives[:-1])
    assert "unverified" in pb.section("Mitigation")


def test_dsa_playbook_drops_offloading_and_suggests_fp8(cat) -> None:
    pb = cat.get("mla-indexer-keyerror")
    assert {"--kv-offloading-size", "--kv-offloading-backend", "--kv-transfer-config"} <= set(pb.fix.remove)
    assert "--kv-cache-dtype=fp8" in pb.fix.add
    assert pb.conditions["vllm_version"] == ">=0.12.0,<0.18.0"


def test_fix_add_tokens_are_flag_equals_value(cat) -> None:
    for pb in cat.failures:
        for fix in (pb.fix, *pb.alternatives):
            assert fix is not None
            assert all(t.startswith("--") for t in fix.add), pb.id
