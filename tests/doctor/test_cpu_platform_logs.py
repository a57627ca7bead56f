"""doctor --log on vLLM's CPU build (issue 26, docs/dev/real-vllm-harness.md): offloading refused on
a platform without it, and MLA refused by the CPU platform (which rules out the MLA offloading KeyError)."""

from __future__ import annotations

import json
from pathlib import Path

from doctor.conftest import LOGS

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-real" / "0.32.0"


def test_a_real_servers_refused_offloading_is_its_catalog_entry_with_a_fix(kvops) -> None:
    code, out, _ = kvops("doctor", "--log", str(REAL / "native-refused.log"), "--json")
    doc = json.loads(out)
    ids = [f["id"] for f in doc["findings"]]
    assert ids == ["vllm-cpu-offloading-unsupported-platform"] and code == 1
    (finding,) = doc["findings"]
    assert any("CUDA-alike and XPU GPUs" in e for e in finding["evidence"])
    assert "--kv-offloading-size" in finding["fix"]["remove"]
    assert doc["vllm_version"] == {"source": "log", "version": "0.32.0"}


def test_mla_refused_by_the_cpu_platform_is_not_the_mla_offloading_keyerror(kvops) -> None:
    # The log's serve line has an MLA model, offloading and a release the KeyError entry covers
    # (0.17.0): from the configuration alone doctor would predict the KeyError, but the server
    # died building the model, before register_kv_caches.
    code, out, _ = kvops("doctor", "--log", str(LOGS / "vllm-cpu-mla-unsupported.log"), "--json")
    findings = json.loads(out)["findings"]
    claims = [f["id"] for f in findings if f["severity"] in ("error", "warning")]
    assert claims == ["vllm-cpu-mla-unsupported"] and code == 1
    for f in findings:  # what the serve line alone predicts stays, as info without a fix
        if f["id"] != "vllm-cpu-mla-unsupported":
            assert not any(f["fix"].values()) and "explained by vllm-cpu-mla-unsupported" in " ".join(
                f["notes"]
            )
