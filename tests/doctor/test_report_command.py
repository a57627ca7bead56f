"""Without --cmd, the launch command a report carries (an issue's code block, a terminal capture)
is read as --cmd would be: the model named in it, the fix written into it, the release its image
names (kvops/doctor/judging/logs.py LAUNCH_HINTS, kvops/doctor/command.py _cmd_from_log)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from kvops.doctor.judging import logs

TRACEBACK = """\
```
(EngineCore_DP0 pid=2911) ERROR 11-20 10:01:02 [core.py:708] EngineCore failed to start.
(EngineCore_DP0 pid=2911) ERROR 11-20 10:01:02 [core.py:708] Traceback (most recent call last):
(EngineCore_DP0 pid=2911) ERROR 11-20 10:01:02 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/\
vllm/distributed/kv_transfer/kv_connector/v1/offloading_connector.py", line 120, in register_kv_caches
(EngineCore_DP0 pid=2911) ERROR 11-20 10:01:02 [core.py:708] KeyError: \
'model.layers.0.self_attn.indexer.k_cache'
```
"""
REPORT = (
    """\
### 🐛 Describe the bug
When I start DeepSeek-V3.2 with CPU offloading (I ran vllm serve with the flags below) it dies.

```bash
vllm serve deepseek-ai/DeepSeek-V3.2 --tensor-parallel-size 8 \\
    --kv-offloading-backend native --kv-offloading-size 64
```

"""
    + TRACEBACK
)


Run = Callable[..., tuple[int, str, str]]


def _report(tmp_path: Path, text: str) -> str:
    path = tmp_path / "report.md"
    path.write_text(text)
    return str(path)


def test_a_reports_code_block_is_the_command(kvops: Run, tmp_path: Path) -> None:
    code, out, err = kvops("doctor", "--log", _report(tmp_path, REPORT), "--vllm-version", "0.14.0", "--json")
    result = json.loads(out)
    assert "no --cmd: the serve command was read from the log's line 5" in result["notes"], err
    found = {f["id"]: f for f in result["findings"]}
    fixed = found["mla-indexer-keyerror"]["fixed_command"]  # the model came from the command's name
    assert fixed == "vllm serve deepseek-ai/DeepSeek-V3.2 --tensor-parallel-size 8 --kv-cache-dtype=fp8"
    assert code == 1


def test_a_reports_docker_line_names_the_release(kvops: Run, tmp_path: Path) -> None:
    report = (
        "$ docker run --gpus all --ipc=host vllm/vllm-openai:v0.11.0 \\\n"
        "    --model deepseek-ai/DeepSeek-V3.2 --kv-offloading-size 64 --kv-offloading-backend native\n"
    )
    _code, out, _err = kvops("doctor", "--log", _report(tmp_path, report), "--json")
    result = json.loads(out)
    assert result["vllm_version"] == {
        "version": "0.11.0",
        "source": "the command's image vllm/vllm-openai:v0.11.0",
    }
    assert "vllm-offload-flags-unsupported-release" in {f["id"] for f in result["findings"]}


def test_prose_naming_vllm_serve_is_not_read_as_a_command(kvops: Run, tmp_path: Path) -> None:
    report = (
        "I ran vllm serve deepseek-ai/DeepSeek-V3.2 with --kv-offloading-size 64 and it crashed\n" + TRACEBACK
    )
    code, out, err = kvops("doctor", "--log", _report(tmp_path, report), "--vllm-version", "0.14.0", "--json")
    result = json.loads(out)
    assert not any("serve command was" in n for n in result["notes"]), err
    assert result["findings"][0]["id"] == "mla-indexer-keyerror" and code == 1  # the log alone still tells


def test_the_non_default_args_line_comes_before_a_code_block(tmp_path: Path) -> None:
    from kvops.doctor.command import _cmd_from_log
    from kvops.doctor.judging import catalog

    args = "(APIServer pid=1) INFO 11-20 [utils.py:233] non-default args: {'model': 'Qwen/Qwen3-8B'}"
    scan = logs.scan_file(_report(tmp_path, REPORT + args + "\n"), catalog.load().failures)
    found = _cmd_from_log(scan)
    assert found.cmd is not None and found.cmd.served_model() == "Qwen/Qwen3-8B"
    assert found.source == "rebuilt from the log's non-default args line"


def test_a_launch_continued_across_the_scanners_blocks_is_read_whole(tmp_path: Path) -> None:
    from kvops.doctor.judging import catalog

    filler = "".join(f"INFO line {i}\n" for i in range(logs.BLOCK - 1))  # the launch ends one block
    launch = "vllm serve m \\\n  --max-num-seqs 8 \\\n  --max-model-len 100"  # nothing else sought
    scan = logs.scan_file(_report(tmp_path, filler + launch + "\n" + filler), catalog.load().failures)
    assert scan.launches == ((logs.BLOCK, launch),)
