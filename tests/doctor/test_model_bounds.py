"""A model config and `kvops size`'s flags are read within bounds (issue 41, low items): a huge file
is refused unread, numbers no model has, non-positive sizes and deep nesting are one line, exit 2."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from kvops.doctor.reading import modelcfg

Run = Callable[..., tuple[int, str, str]]
LLAMA = {
    "model_type": "llama",
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "max_position_embeddings": 8192,
}
BIG = int("9" * 400)


def _config(tmp_path: Path, text: str) -> str:
    (tmp_path / "config.json").write_text(text)
    return str(tmp_path)


def _one_line_exit_2(result: tuple[int, str, str]) -> str:
    code, out, err = result
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"num_hidden_layers": BIG}, "num_hidden_layers is a 400-digit number"),
        ({"head_dim": BIG}, "head_dim is a 400-digit number"),
        ({"num_key_value_heads": -8}, "num_key_value_heads is -8"),
        ({"num_key_value_heads": 0}, "num_key_value_heads is 0"),
        ({"hidden_size": -4096}, "hidden_size is -4096"),
        ({"max_position_embeddings": -1}, "max_position_embeddings is -1"),
        ({"max_position_embeddings": 1e300}, "max_position_embeddings is a 301-digit number"),
    ],
)
def test_a_config_size_out_of_range_names_its_key(
    kvops: Run, tmp_path: Path, change: dict[str, object], said: str
) -> None:
    model = _config(tmp_path, json.dumps({**LLAMA, **change}))
    for command in ("size", "doctor"):
        err = _one_line_exit_2(kvops(command, "--model", model))
        assert said in err
    assert "KV bytes" not in err


def test_a_positive_config_is_unchanged(kvops: Run, tmp_path: Path) -> None:
    code, out, _err = kvops("size", "--model", _config(tmp_path, json.dumps(LLAMA)), "--json")
    assert code == 0 and json.loads(out)["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2


@pytest.mark.parametrize("flag", ["--max-model-len", "--concurrency", "--tensor-parallel-size"])
def test_a_400_digit_flag_is_one_line(kvops: Run, tmp_path: Path, flag: str) -> None:
    model = _config(tmp_path, json.dumps(LLAMA))
    err = _one_line_exit_2(kvops("size", "--model", model, flag, str(BIG)))
    assert "expected a positive integer up to 2^31-1" in err and "9" * 30 not in err


def test_sizes_that_multiply_past_any_host_are_refused(kvops: Run, tmp_path: Path) -> None:
    """Each value within an int32, the product no host holds: no 30-digit GiB answer."""
    big = {"num_hidden_layers": 2**31 - 1, "num_attention_heads": 2**31 - 1, "head_dim": 2**31 - 1}
    model = _config(tmp_path, json.dumps({**LLAMA, **big, "num_key_value_heads": 2**31 - 1}))
    err = _one_line_exit_2(kvops("size", "--model", model, "--max-model-len", str(2**31 - 1)))
    assert "more than any host holds" in err


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"a":' * 100_000 + "1" + "}" * 100_000, "nested too deeply"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"num_hidden_layers": ' + "9" * 5000 + "}", "has a number too long to read"),
    ],
    ids=["deep-object", "deep-list", "5000-digits"],
)
def test_an_unreadable_config_is_one_line(kvops: Run, tmp_path: Path, text: str, said: str) -> None:
    model = _config(tmp_path, text)
    for command in ("size", "doctor"):
        assert said in _one_line_exit_2(kvops(command, "--model", model))


def test_a_huge_config_is_refused_unread(kvops: Run, tmp_path: Path) -> None:
    """A 3 GB file named config.json (sparse: no disk used) costs at most the cap to refuse."""
    path = tmp_path / "config.json"
    with path.open("wb") as fh:
        fh.truncate(3 << 30)
    tracemalloc.start()
    try:
        result = kvops("doctor", "--model", str(tmp_path))
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    err = _one_line_exit_2(result)
    assert f"larger than {modelcfg.MAX_CONFIG_BYTES >> 20} MiB (kvops reads at most that)" in err
    assert peak < 4 * modelcfg.MAX_CONFIG_BYTES
