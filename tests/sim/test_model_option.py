"""--model sizes the simulated KV blocks from a config.json (kvops size's code)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvops.cli import build_parser
from kvops.errors import UsageError
from kvops.sim.command import model_options
from kvops.sim.render import Renderer, parse_version
from kvops.sim.server import build_engine

LLAMA_8B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "head_dim": 128,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 131072,
}


def write(tmp_path: Path, **changes: object) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA_8B, **changes}))
    return str(path)


def options(*argv: str) -> dict[str, object]:
    return model_options(build_parser().parse_args(["sim", *argv]))


def test_llama_8b_gives_2_mib_blocks(tmp_path: Path) -> None:
    opts = options("--model", write(tmp_path))
    assert opts["kv_bytes_per_token"] == 131072
    assert opts["max_model_len"] == 131072


def test_block_size_follows_the_model_into_the_exposition(tmp_path: Path) -> None:
    # 2 KV heads instead of 8: a quarter of the bytes, so four times the blocks per GiB.
    opts = options("--model", write(tmp_path, num_key_value_heads=2), "--kv-offloading-size", "1")
    engine = build_engine(**opts)
    engine.advance_to(1.0)
    text = Renderer(engine, parse_version("0.33.0"), 1.8e9, {}).render().decode()
    assert 'cpu_num_chunks="2048"' in text  # 1 GiB / (32768 B/token x 16 tokens)
    assert 'cpu_kv_cache_size_tokens="32768"' in text


def test_bad_config_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(UsageError):
        options("--model", str(bad))
    with pytest.raises(UsageError):
        options("--model", str(tmp_path / "missing"))


def test_what_if_with_a_model_is_one_json_document(tmp_path: Path) -> None:
    cmd = ["sim", "--what-if", "--model", write(tmp_path), "--sizes", "0,8", "--duration", "5", "--json"]
    out = subprocess.run(
        [sys.executable, "-m", "kvops.cli", *cmd], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["kv_bytes_per_token"] == 131072
