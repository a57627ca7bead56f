"""Reading an installed vLLM's source for the PR #37090 fix (fixture trees, written here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvops.doctor.judging import catalog, diagnose
from kvops.doctor.judging.inputs import Inputs
from kvops.doctor.reading import cmdline, modelcfg, vllm_source

from .conftest import MODELS

# Constructed stand-ins with the shape of the two versions of register_kv_caches.
AFFECTED = """
class Worker:
    def register_kv_caches(self, kv_caches):
        names = list(kv_caches)
        layers = get_layers_from_vllm_config(
            self.spec.vllm_config, Attention, names
        )
        return {n: layers[n].get_attn_backend() for n in names}

    def other(self):
        return get_layers_from_vllm_config(self.cfg, AttentionLayerBase)
"""
FIXED = AFFECTED.replace(
    "self.spec.vllm_config, Attention, names", "self.spec.vllm_config, AttentionLayerBase, names"
)


def tree(tmp_path: Path, rel: str, text: str) -> Path:
    path = tmp_path / "vllm" / rel
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return tmp_path / "vllm"


@pytest.mark.parametrize("rel", vllm_source.OFFLOADING_FILES)
def test_filter_class_is_read_from_register_kv_caches(tmp_path, rel: str) -> None:
    assert vllm_source.offloading_layer_filter(tree(tmp_path / "a", rel, AFFECTED)) == "Attention"
    assert vllm_source.offloading_layer_filter(tree(tmp_path / "b", rel, FIXED)) == "AttentionLayerBase"


def test_unreadable_source_tells_nothing(tmp_path) -> None:
    assert vllm_source.offloading_layer_filter(tmp_path) is None


def test_installed_source_overrides_an_in_range_version(tmp_path) -> None:
    cat = catalog.load()
    model = modelcfg.load(MODELS / "deepseek-v3.2.json")
    cmd = cmdline.parse("vllm serve m --kv-offloading-size 64")
    rel = vllm_source.OFFLOADING_FILES[1]
    fixed_build = diagnose.diagnose(
        cat,
        Inputs(
            model,
            cmd,
            version="0.17.0",
            version_source="installed vllm",
            vllm_root=tree(tmp_path / "f", rel, FIXED),
        ),
    )
    assert "mla-indexer-keyerror" not in {f.id for f in fixed_build.findings}
    affected = diagnose.diagnose(
        cat,
        Inputs(
            model,
            cmd,
            version="0.17.0",
            version_source="installed vllm",
            vllm_root=tree(tmp_path / "a", rel, AFFECTED),
        ),
    )
    f = next(f for f in affected.findings if f.id == "mla-indexer-keyerror")
    assert f.severity == "error" and any("looks layers up by Attention" in e for e in f.evidence)


def test_repro_with_vllm_but_no_gpu_reads_the_installed_source(tmp_path) -> None:
    from kvops.doctor.reproducing import repro

    pb = catalog.load().get("mla-indexer-keyerror")
    root = tree(tmp_path, vllm_source.OFFLOADING_FILES[0], AFFECTED)
    result = repro.attempt(pb, "m", None, timeout=1, gpu=False, vllm=True, vllm_root=root)
    assert result["reproduced"] is None
    assert (
        "looks offloaded layers up by Attention: this build has the failing lookup"
        in result["installed_source"]
    )
    assert any("no GPU" in c for c in result["could_not"])
    assert "this build has the failing lookup" in repro.to_text(result, None)
