"""A model named only on the serve line is judged by the config kvops ships for it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvops.doctor.reading.known_models import shipped_config_for

MODELS = Path(__file__).parent / "models"


@pytest.mark.parametrize(
    ("served", "attention"),
    [
        ("deepseek-ai/DeepSeek-V3.2", "dsa"),
        ("/models/DeepSeek-V3.2-Exp/", "dsa"),
        ("deepseek-ai/DeepSeek-R1-0528", "mla"),
        ("cortecs/DeepSeek-V3.1-Terminus-FP8", "mla"),
        ("Qwen/Qwen3-Next-80B-A3B-Instruct", "hybrid"),
    ],
)
def test_known_names_read_the_shipped_config(served: str, attention: str) -> None:
    model = shipped_config_for(served)
    assert model is not None
    assert model.attention == attention


@pytest.mark.parametrize("served", [None, "", "meta-llama/Llama-3.1-8B-Instruct", "deepseek-v3.2-distill-7b"])
def test_other_names_are_not_guessed(served: str | None) -> None:
    assert shipped_config_for(served) is None


def _doctor(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "kvops.cli", "doctor", "--json", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return json.loads(out.stdout)


def test_dsa_model_by_name_with_offloading_on_an_affected_release_is_the_indexer_keyerror() -> None:
    cmd = "vllm serve deepseek-ai/DeepSeek-V3.2 --kv-offloading-backend native --kv-offloading-size 64"
    doc = _doctor("--cmd", cmd, "--vllm-version", "0.14.0")
    ids = {f["id"]: f["severity"] for f in doc["findings"]}
    assert ids.get("mla-indexer-keyerror") == "error"
    assert any("model read from its name" in n for n in doc["notes"])
    # the first fixed release: no KeyError claimed
    assert "mla-indexer-keyerror" not in {
        f["id"] for f in _doctor("--cmd", cmd, "--vllm-version", "0.18.0")["findings"]
    }


def test_a_given_model_wins_over_the_name() -> None:
    cmd = "vllm serve deepseek-ai/DeepSeek-V3.2 --kv-offloading-backend native --kv-offloading-size 64"
    doc = _doctor("--model", str(MODELS / "llama-3.1-8b.json"), "--cmd", cmd, "--vllm-version", "0.14.0")
    assert "mla-indexer-keyerror" not in {f["id"] for f in doc["findings"]}
    assert not any("model read from its name" in n for n in doc["notes"])
