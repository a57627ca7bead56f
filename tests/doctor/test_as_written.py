"""Inputs as pasted, fixes as written, fixed commands judged by doctor itself (issue 29, items 1,
2 and 5).

The property: for every command (the real reports' commands in tests/doctor/real/, and the pastes
below, each the shape a real report used), every fixed command doctor prints (a) leaves every
byte outside the vLLM serve segment as the user wrote it, and (b) draws no error or warning when
doctor judges it alone with the same release, unless it says what is needed first.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kvops.doctor.reading import cmdline
from kvops.doctor.reading.shell_words import Word
from kvops.errors import UsageError

from .conftest import MODELS

REAL = Path(__file__).parent / "real"
DSV32 = str(MODELS / "deepseek-v3.2.json")

SHELL = """\
export LD_LIBRARY_PATH=/opt/rocm/lib:$LD_LIBRARY_PATH
source /opt/venv/bin/activate && \\
CUDA_VISIBLE_DEVICES=0,1 vllm serve "$MODEL_DIR" \\
    --tensor-parallel-size 2 \\
    --kv-offloading-backend native \\
    --kv-offloading-size 64 \\
    --max-model-len ${MAX_LEN} 2>&1 | tee serve.log"""
JSON_QUOTED = """\
vllm serve deepseek-ai/DeepSeek-V3.2 --tensor-parallel-size 8 --kv-transfer-config '{
  "kv_connector": "OffloadingConnector",
  "kv_role": "kv_both",
  "kv_connector_extra_config": {"cpu_bytes_to_use": 68719476736}
}'"""
DOCKER_ELIDED = (
    "docker run --gpus all ... vllm/vllm-openai:v0.14.0 --model /models/DeepSeek-V3.2 --kv-offloading-size 64"
)
DOCKER_ELIDED_2 = """\
docker run --gpus all ... \\
  vllm/vllm-openai:v0.14.0 /models/DeepSeek-V3.2 --kv-offloading-size 64 ..."""
BASH_C = (
    "docker run --gpus all --ipc=host vllm/vllm-openai:v0.14.0 bash -c "
    "'pip install lmcache && vllm serve deepseek-ai/DeepSeek-V3.2 --kv-offloading-size 64 "
    "--kv-offloading-backend native'"
)
COMPOSE_FOLDED = """\
services:
  vllm:
    image: vllm/vllm-openai:v0.14.0
    ipc: host
    command: >
      --model deepseek-ai/DeepSeek-V3.2
      --tensor-parallel-size 8
      --kv-offloading-backend native
      --kv-offloading-size 64
"""
COMPOSE_LITERAL = """\
services:
  vllm:
    image: vllm/vllm-openai:v0.14.0
    entrypoint: ["/bin/bash", "-c"]
    command: |
      export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
      vllm serve deepseek-ai/DeepSeek-V3.2 \\
        --tensor-parallel-size 8 \\
        --kv-offloading-size 64
"""
K8S_ARGS = """\
containers:
- name: vllm
  image: vllm/vllm-openai:v0.14.0
  command: ["vllm", "serve"]
  args:
  - deepseek-ai/DeepSeek-V3.2
  - --tensor-parallel-size=8
  - "--kv-offloading-size"
  - "64"
"""
OLD_RELEASE_CPU_OFFLOAD = "CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen3-8B --cpu-offload-gb 64"
PASTES = {
    "shell": (SHELL, "0.14.0"),
    "json": (JSON_QUOTED, "0.14.0"),
    "docker-elided": (DOCKER_ELIDED, "0.14.0"),
    "docker-elided-2": (DOCKER_ELIDED_2, "0.14.0"),
    "bash-c": (BASH_C, "0.14.0"),
    "compose-folded": (COMPOSE_FOLDED, "0.14.0"),
    "compose-literal": (COMPOSE_LITERAL, "0.14.0"),
    "k8s-args": (K8S_ARGS, "0.14.0"),
    "old-release": (OLD_RELEASE_CPU_OFFLOAD, "0.10.1"),
}


# ---- item 5: inputs as pasted ------------------------------------------------------------------
@pytest.mark.parametrize(
    "text,model,flags",
    [
        (COMPOSE_FOLDED, None, {"--model", "--tensor-parallel-size", "--kv-offloading-size"}),
        (COMPOSE_LITERAL, "deepseek-ai/DeepSeek-V3.2", {"--tensor-parallel-size", "--kv-offloading-size"}),
        (K8S_ARGS, "deepseek-ai/DeepSeek-V3.2", {"--tensor-parallel-size", "--kv-offloading-size"}),
        (JSON_QUOTED, "deepseek-ai/DeepSeek-V3.2", {"--tensor-parallel-size", "--kv-transfer-config"}),
    ],
)
def test_pasted_shapes_are_read(text: str, model: str | None, flags: set[str]) -> None:
    cmd = cmdline.parse(text, "0.14.0")
    assert cmd.model == model and flags <= {a.flag for a in cmd.args}
    assert cmd.problems == () and cmd.extra == ()


def test_multi_line_single_quoted_json_is_one_value_as_shlex_reads_it() -> None:
    cmd = cmdline.parse(JSON_QUOTED, "0.14.0")
    assert cmd.kv_transfer_config() == {
        "kv_connector": "OffloadingConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"cpu_bytes_to_use": 68719476736},
    }


@pytest.mark.parametrize("text", [DOCKER_ELIDED, DOCKER_ELIDED_2])
def test_an_elided_docker_command_keeps_its_image_and_model(text: str) -> None:
    cmd = cmdline.parse(text, "0.14.0")
    assert cmd.image == "vllm/vllm-openai:v0.14.0" and cmd.served_model() in (
        "/models/DSv32",
        "/models/DeepSeek-V3.2",
    )
    assert cmd.elided and cmd.extra == () and cmd.problems == ()


def test_elided_docker_options_are_not_docker_defaults(kvops: Callable[..., tuple[int, str, str]]) -> None:
    # `...` may hold --shm-size or --ipc=host: /dev/shm is unknown, not Docker's 64 MiB
    _code, out, _ = kvops("doctor", "--cmd", DOCKER_ELIDED, "--vllm-version", "0.20.0", "--json")
    found = {f["id"]: f for f in json.loads(out)["findings"]}
    assert (
        "vllm-offload-shm-insufficient" not in found
        or found["vllm-offload-shm-insufficient"]["severity"] == "info"
    )
    assert "vllm-serve-flags-invalid" not in found


# ---- item 2 and item 1: the property ------------------------------------------------------------
def _segment(text: str, version: str) -> tuple[int, int] | None:
    """[start, end) of the serve segment in serve_line.clean(text): from its first word (an env
    assignment, docker run, or the launch) to its last; None when its words have no place (YAML)."""
    try:
        cmd = cmdline.parse(text, version)
    except UsageError:  # doctor could not read it either (and printed no fixed command)
        return None
    words = [*cmd.launch, *cmd.tokens, *(w for _, src in cmd.env_src for w in src)]
    words += [w for o in cmd.docker_opts for w in o.src] + ([cmd.image] if cmd.image else [])
    placed = [w for w in words if isinstance(w, Word)]
    if not placed:
        return None
    return min(w.start for w in placed), max(w.end for w in placed)


def _printed(result: dict) -> list[tuple[str, str, str | None]]:
    out = []
    for f in result["findings"]:
        if f["fixed_command"]:
            out.append((f["id"], f["fixed_command"], f.get("fixed_command_needs")))
        for alt in f["alternatives"]:
            if alt.get("fixed_command"):
                out.append((f["id"], alt["fixed_command"], alt.get("fixed_command_needs")))
    return out


def _cases() -> list[tuple[str, str, str, list[str]]]:
    """(name, command, release, extra argv): the real reports with a command, then the pastes."""
    cases = []
    for path in sorted(REAL.glob("*.json")):
        meta = json.loads(path.read_text())
        if meta.get("cmd"):
            version = meta.get("vllm_version") or "0.14.0"
            cases.append((meta["id"], meta["cmd"], version, ["--log", str(REAL / f"{meta['id']}.txt")]))
    for name, (text, version) in PASTES.items():
        with_model = "DeepSeek" in text or name == "shell"  # the shell case serves "$MODEL_DIR"
        cases.append((name, text, version, ["--model", DSV32] if with_model else []))
    return cases


CASES = _cases()


@pytest.mark.parametrize("name,text,version,extra", CASES, ids=[c[0] for c in CASES])
def test_every_fixed_command_keeps_the_shell_and_passes_doctor_itself(
    kvops: Callable[..., tuple[int, str, str]],
    tmp_path: Path,
    name: str,
    text: str,
    version: str,
    extra: list[str],
) -> None:
    from kvops.doctor.reading import serve_line

    if name == "old-release":  # the user's own words: they meant KV offloading (doctor needs them)
        words = tmp_path / "report.txt"
        words.write_text("I want to offload the KV cache to CPU RAM with --cpu-offload-gb\n")
        extra = [*extra, "--log", str(words)]

    code, out, err = kvops("doctor", "--cmd", text, "--vllm-version", version, *extra, "--json")
    assert code in (0, 1), err
    printed = _printed(json.loads(out))
    cleaned = serve_line.clean(text).strip("\n")
    span = _segment(text, version)
    for fid, fixed, needs in printed:
        if span is not None:  # (a) every byte outside the serve segment as written
            start, end = span
            assert fixed.startswith(cleaned[:start]), (fid, fixed)
            assert fixed.endswith(cleaned[end:]), (fid, fixed)
        # (b) judged alone by doctor with the same release (or the one it says is needed first)
        judged_on = needs.rsplit(" ", 1)[-1] if needs else version
        model = ["--model", DSV32] if "--model" in extra else []
        code, again, err = kvops("doctor", "--cmd", fixed, "--vllm-version", judged_on, *model, "--json")
        worst = [(f["id"], f["severity"]) for f in json.loads(again)["findings"] if f["severity"] != "info"]
        assert code == 0 and worst == [], (name, fid, fixed, worst)
    if name in ("shell", "bash-c", "old-release", "docker-elided"):
        assert printed, f"{name}: doctor printed no fixed command to check"


def test_the_shell_around_the_serve_line_comes_back_byte_for_byte(
    kvops: Callable[..., tuple[int, str, str]],
) -> None:
    _code, out, _ = kvops("doctor", "--cmd", SHELL, "--vllm-version", "0.14.0", "--model", DSV32, "--json")
    fixed = next(f for f in json.loads(out)["findings"] if f["id"] == "mla-indexer-keyerror")["fixed_command"]
    assert fixed == (
        "export LD_LIBRARY_PATH=/opt/rocm/lib:$LD_LIBRARY_PATH\n"
        "source /opt/venv/bin/activate && \\\n"
        'CUDA_VISIBLE_DEVICES=0,1 vllm serve "$MODEL_DIR" \\\n'
        "    --tensor-parallel-size 2 \\\n"
        "    --max-model-len ${MAX_LEN} \\\n"
        "    --kv-cache-dtype=fp8 2>&1 | tee serve.log"
    )


def test_offloading_flags_are_never_proposed_to_a_release_without_them(
    kvops: Callable[..., tuple[int, str, str]],
) -> None:
    _code, out, _ = kvops("doctor", "--cmd", OLD_RELEASE_CPU_OFFLOAD, "--vllm-version", "0.10.1", "--json")
    f = next(f for f in json.loads(out)["findings"] if f["id"] == "cpu-offload-gb-is-weights")
    if f["fixed_command"] is not None:
        assert (
            "--kv-offloading" not in f["fixed_command"]
            or f["fixed_command_needs"] == "upgrade to vLLM >= 0.11.1"
        )


# ---- YAML pastes: the fix written into the YAML as pasted --------------------------------------
def _fixed(kvops: Callable[..., tuple[int, str, str]], text: str, fid: str, *extra: str) -> str:
    _code, out, _err = kvops(
        "doctor", "--cmd", text, "--vllm-version", "0.14.0", "--model", DSV32, *extra, "--json"
    )
    return next(f for f in json.loads(out)["findings"] if f["id"] == fid)["fixed_command"]


def test_a_compose_folded_command_is_fixed_in_its_yaml(kvops: Callable[..., tuple[int, str, str]]) -> None:
    fixed = _fixed(kvops, COMPOSE_FOLDED, "mla-indexer-keyerror")
    assert fixed == (
        "services:\n"
        "  vllm:\n"
        "    image: vllm/vllm-openai:v0.14.0\n"
        "    ipc: host\n"
        "    command: >\n"
        "      --model deepseek-ai/DeepSeek-V3.2\n"
        "      --tensor-parallel-size 8 --kv-cache-dtype=fp8"
    )
    service = yaml.safe_load(fixed)["services"]["vllm"]
    assert service["image"] == "vllm/vllm-openai:v0.14.0" and service["ipc"] == "host"


def test_a_kubernetes_bash_script_is_fixed_in_its_block(kvops: Callable[..., tuple[int, str, str]]) -> None:
    pod = """\
apiVersion: v1
kind: Pod
spec:
  containers:
  - name: vllm
    image: nvidia/cuda:12.8.0-devel-ubuntu22.04
    command: ["/bin/bash", "-c"]
    args:
      - |
        pip install vllm==0.14.0 lmcache && \\
        vllm serve deepseek-ai/DeepSeek-V3.2 --tensor-parallel-size 8 \\
          --kv-offloading-backend native --kv-offloading-size 64
"""
    fixed = _fixed(kvops, pod, "mla-indexer-keyerror")
    head, _, _ = pod.partition("        vllm serve")
    assert (
        fixed
        == head + "        vllm serve deepseek-ai/DeepSeek-V3.2 --tensor-parallel-size 8 --kv-cache-dtype=fp8"
    )
    script = yaml.safe_load(fixed)["spec"]["containers"][0]["args"][0]
    assert script.startswith("pip install vllm==0.14.0 lmcache && \\\nvllm serve")


def test_a_kubernetes_args_list_is_printed_rebuilt(kvops: Callable[..., tuple[int, str, str]]) -> None:
    # a flag cut from a list would leave its `- ` item: the command comes back rebuilt
    assert _fixed(kvops, K8S_ARGS, "mla-indexer-keyerror").startswith("vllm serve deepseek-ai/DeepSeek-V3.2")


def test_an_edit_that_would_not_read_back_is_printed_rebuilt(
    kvops: Callable[..., tuple[int, str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from kvops.doctor.reading import serve_line

    real = serve_line._scalar_places

    def off_by_one(value: object, text: str) -> list[int] | None:  # a placement gone wrong
        places = real(value, text)
        return None if places is None else [p + 1 for p in places]

    monkeypatch.setattr(serve_line, "_scalar_places", off_by_one)
    monkeypatch.setattr(serve_line, "_placed_words", _trusting(serve_line))
    fixed = _fixed(kvops, COMPOSE_FOLDED, "mla-indexer-keyerror")
    assert fixed.startswith("vllm serve --model deepseek-ai/DeepSeek-V3.2")  # not a broken YAML


def _trusting(serve_line):
    def placed(words, value, text):
        if words is None:
            return None
        places = serve_line._scalar_places(value, text)
        if places is None:
            return [str(w) for w in words]
        return [
            Word(str(w), places[w.start], places[w.end - 1] + 1, w.op)
            if isinstance(w, Word) and w.end <= len(places)
            else str(w)
            for w in words
        ]

    return placed


@pytest.mark.parametrize(
    ("yaml_text", "placed"),
    [
        ("command: --model x --kv-offloading-size 8\n", True),
        ("command: '--model x --kv-offloading-size 8'\n", True),
        ('command: "--model x --kv-offloading-size 8"\n', True),
        ('command: "--model x\\t--kv-offloading-size 8"\n', False),  # an escape
        ("command: >\n  --model x\n  --kv-offloading-size 8\n", True),
        ("command: >-\n  --model x\n\n  --kv-offloading-size 8\n", False),  # a blank line folds to \n
        ("command: |\n  vllm serve x \\\n      --kv-offloading-size 8\n", True),  # more indented: literal
        ("command: |2\n    vllm serve x --kv-offloading-size 8\n", False),  # an indentation indicator
        ("command: --model x\n  --kv-offloading-size 8\n", False),  # a plain scalar over two lines
    ],
)
def test_where_a_yaml_strings_characters_are_written(yaml_text: str, placed: bool) -> None:
    from kvops.doctor.reading import serve_line, yaml_bounded

    value = yaml_bounded.load_all(yaml_text, keep_nodes=True)[0]["command"]
    places = serve_line._scalar_places(value, yaml_text)
    assert (places is not None) == placed
    if places is not None:
        body = value.rstrip("\n")  # the chomping's newlines are placed at the last line's end
        shown = "".join(yaml_text[p] for p in places[: len(body)])
        assert shown.replace("\n", "\n" if "|" in yaml_text else " ") == body


def test_a_flag_on_its_own_line_is_cut_with_its_line_break() -> None:
    from kvops.doctor.judging import as_written

    text = "vllm serve x\n  --kv-offloading-size 8\n  --max-model-len 100"
    assert as_written._cut_start(text, text.index("--kv")) == text.index("\n")
    before = cmdline.parse(text, "0.14.0")
    after = before.with_fix(("--kv-offloading-size",), (), {}, ())
    assert as_written.render(before, after) == "vllm serve x\n  --max-model-len 100"
