from __future__ import annotations

import pytest

from kvops.doctor.reading import modelcfg
from kvops.errors import UsageError

from .conftest import MODELS


def test_llama_405b_bytes_per_token_is_the_gqa_formula() -> None:
    m = modelcfg.load(MODELS / "llama-3.1-405b.json")
    assert m.attention == "gqa"
    assert m.kv_bytes_per_token() == 2 * 126 * 8 * 128 * 2 == 516096
    assert m.kv_bytes_per_token("fp8") == 516096 // 2


def test_directory_is_read_through_its_config_json(tmp_path) -> None:
    (tmp_path / "config.json").write_text((MODELS / "llama-3.1-8b.json").read_text())
    m = modelcfg.load(tmp_path)
    assert (m.num_layers, m.num_kv_heads, m.head_dim) == (32, 8, 128)


def test_deepseek_v32_is_dsa_with_latent_plus_indexer_cache() -> None:
    m = modelcfg.load(MODELS / "deepseek-v3.2.json")
    assert m.attention == "dsa" and m.is_mla and m.is_dsa
    # (kv_lora_rank 512 + rope 64) x 2 B + indexer 128 fp8 + 4 B scale, for 61 layers
    assert m.kv_bytes_per_token() == 61 * (576 * 2 + 132)
    # fp8: vLLM's DSv3.2 layout is 656 B/token/layer, the indexer stays 132
    assert m.kv_bytes_per_token("fp8") == 61 * (656 + 132)


def test_mla_is_far_below_the_naive_mha_formula() -> None:
    m = modelcfg.load(MODELS / "deepseek-v3.json")
    assert m.attention == "mla"
    assert m.kv_bytes_per_token() == 61 * 576 * 2
    # decompressed K (qk_nope 128 + rope 64) and V (128) for 128 heads: what MLA avoids caching
    assert m.naive_mha_bytes_per_token() == 61 * 128 * (192 + 128) * 2 == 4_997_120
    assert m.naive_mha_bytes_per_token() > 70 * m.kv_bytes_per_token()


def test_mla_needs_kv_lora_rank_not_just_the_model_type(tmp_path) -> None:
    cfg = (MODELS / "deepseek-v3.json").read_text().replace('"kv_lora_rank": 512', '"kv_lora_rank": null')
    (tmp_path / "config.json").write_text(cfg)
    assert modelcfg.load(tmp_path).attention in ("mha", "gqa")


def test_multimodal_config_uses_text_config() -> None:
    m = modelcfg.load(MODELS / "qwen3-vl-235b-a22b.json")
    assert m.model_type == "qwen3_vl_moe_text"
    assert (m.num_layers, m.num_kv_heads, m.head_dim) == (94, 4, 128)
    assert m.is_moe and m.moe_intermediate_size == 1536
    assert m.kv_bytes_per_token() == 2 * 94 * 4 * 128 * 2


def test_hybrid_counts_only_attention_layers() -> None:
    m = modelcfg.load(MODELS / "qwen3-next-80b-a3b.json")
    assert m.attention == "hybrid" and m.attention_layers == 12
    assert m.kv_bytes_per_token() == 12 * 2 * 2 * 256 * 2


def test_sliding_window_is_recognised() -> None:
    m = modelcfg.load(MODELS / "gemma-3-27b.json")
    assert "sliding_window" in m.kinds and m.sliding_window == 1024


def test_tensor_parallel_shards_gqa_heads_but_not_mla_latent() -> None:
    llama = modelcfg.load(MODELS / "llama-3.1-405b.json")
    assert llama.kv_bytes_per_token_per_gpu(8) == 516096 // 8
    assert llama.kv_bytes_per_token_per_gpu(16) == 516096 // 8  # 8 heads: replicated past TP8
    ds = modelcfg.load(MODELS / "deepseek-v3.json")
    assert ds.kv_bytes_per_token_per_gpu(8) == ds.kv_bytes_per_token()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"model_type": "x"}', "num_hidden_layers"),
    ],
)
def test_bad_config_is_one_usage_error(tmp_path, content: str, message: str) -> None:
    (tmp_path / "config.json").write_text(content)
    with pytest.raises(UsageError, match=message) as info:
        modelcfg.load(tmp_path)
    assert "\n" not in str(info.value)


def test_missing_config_is_a_usage_error(tmp_path) -> None:
    with pytest.raises(UsageError, match="not found"):
        modelcfg.load(tmp_path / "nope")
