"""Serve lines wherever people hide them (issue 16 item 3): shell chains, bash -c, docker run,
python -m, Kubernetes / compose YAML, `\\` continuations, colours and prompts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvops.doctor.reading import cmdline
from kvops.errors import UsageError


def flags(c: cmdline.ServeCommand) -> list[tuple[str, tuple[str, ...]]]:
    return [(a.flag, a.values) for a in c.args]


@pytest.mark.parametrize(
    "text",
    [
        "cd /srv && source venv/bin/activate && vllm serve org/m --max-model-len 4096 | tee log.txt",
        "pip install vllm; CUDA_VISIBLE_DEVICES=0,1 vllm serve org/m --max-model-len 4096",
        "export HF_HOME=/data; exec vllm serve org/m --max-model-len 4096 2>&1",
        'bash -c "nvidia-smi && vllm serve org/m --max-model-len 4096"',
        "sh -lc 'env VLLM_USE_V1=1 vllm serve org/m --max-model-len 4096 || sleep 10'",
        "nohup vllm serve org/m \\\n    --max-model-len 4096 \\\n  > out.log &",
        "\x1b[32muser@box\x1b[0m:~$ vllm serve org/m --max-model-len 4096",
        "(venv) $ sudo -E vllm serve org/m --max-model-len=4096",
        "timeout 600 vllm serve org/m --max-model-len 4096",
    ],
)
def test_the_vllm_command_is_found_in_a_shell_chain(text: str) -> None:
    c = cmdline.parse(text, "0.14.0")
    assert c.launcher == "vllm-serve" and c.model == "org/m"
    assert c.get("--max-model-len") == "4096" and c.problems == ()


def test_env_set_by_the_chain_is_kept() -> None:
    c = cmdline.parse("export VLLM_ROCM_USE_AITER=1 && HF_TOKEN=hf_x env FOO=2 vllm serve m", "0.14.0")
    assert c.env_dict() == {"VLLM_ROCM_USE_AITER": "1", "HF_TOKEN": "hf_x", "FOO": "2"}
    assert "HF_TOKEN=$HF_TOKEN" in c.render()


def test_python_module_forms() -> None:
    c = cmdline.parse("python3.12 -m vllm.entrypoints.openai.api_server --model m --port 8000", "0.14.0")
    assert c.launcher == "api-server" and c.served_model() == "m"
    c = cmdline.parse("python -m vllm.entrypoints.cli.main serve m --port 8000", "0.14.0")
    assert c.launch == ("python", "-m", "vllm.entrypoints.cli.main", "serve") and c.model == "m"


def test_docker_run_with_bash_c_after_the_image() -> None:
    c = cmdline.parse(
        "docker run --gpus all --ipc=host -e HF_TOKEN=hf_abc --entrypoint bash vllm/vllm-openai:v0.14.0 "
        "-c 'pip list && VLLM_USE_V1=1 vllm serve org/m --kv-offloading-size 16'",
        "0.14.0",
    )
    assert c.launcher == "docker" and c.image == "vllm/vllm-openai:v0.14.0"
    assert c.model == "org/m" and c.offloading_size_gib() == 16.0 and c.platform_hint() == "cuda"
    assert c.env_dict() == {"VLLM_USE_V1": "1", "HF_TOKEN": "hf_abc"}  # the inner env becomes -e


K8S = """
apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.14.0
        command: ["/bin/sh", "-c"]
        args:
        - >-
          vllm serve deepseek-ai/DeepSeek-V3.2 --tensor-parallel-size 8
          --kv-offloading-size 64 --kv-offloading-backend native
        env:
        - name: HF_TOKEN
          value: hf_secretsecret
"""

K8S_ARGS = """
containers:
  - name: server
    image: vllm/vllm-openai:latest
    args:
      - --model=org/m
      - --max-model-len=4096
      - "--enforce-eager"
"""

COMPOSE = """
services:
  vllm:
    image: vllm/vllm-openai:v0.14.0
    environment:
      - VLLM_USE_V1=1
    command: ["vllm", "serve", "org/m", "--max-model-len", "4096"]
"""

COMPOSE_STRING = """
services:
  vllm:
    image: vllm/vllm-openai
    command: vllm serve org/m --max-model-len 4096 --api-key sk-1234
"""


def test_kubernetes_command_and_args() -> None:
    c = cmdline.parse(K8S, "0.14.0")
    assert c.model == "deepseek-ai/DeepSeek-V3.2" and c.tensor_parallel_size() == 8
    assert c.offloading() == "native" and c.env_dict()["HF_TOKEN"] == "hf_secretsecret"
    assert "hf_secretsecret" not in c.render()


def test_kubernetes_args_only_runs_the_images_vllm_serve() -> None:
    c = cmdline.parse(K8S_ARGS, "0.14.0")
    assert c.launch == ("vllm", "serve") and c.served_model() == "org/m"
    assert c.get("--max-model-len") == "4096" and c.flag_bool("--enforce-eager") is True


@pytest.mark.parametrize("text", [COMPOSE, COMPOSE_STRING])
def test_compose_command_list_or_string(text: str) -> None:
    c = cmdline.parse(text, "0.14.0")
    assert c.model == "org/m" and c.get("--max-model-len") == "4096"


def test_bare_yaml_list_of_args() -> None:
    c = cmdline.parse("- vllm\n- serve\n- org/m\n- --max-model-len=4096\n", "0.14.0")
    assert c.model == "org/m" and flags(c) == [("--max-model-len", ("4096",))]


@pytest.mark.parametrize(
    "text", ["", "ls -la", "echo vllm serve", "docker run --rm", "vllm serve 'unterminated"]
)
def test_no_command_inside_is_one_usage_error(text: str) -> None:
    with pytest.raises(UsageError) as info:
        cmdline.parse(text)
    assert "\n" not in str(info.value)


def test_hostile_yaml_is_walked_once() -> None:
    looped = "a: &x\n  command: [echo]\n  b: *x\nargs: &y [*y, vllm]\n"
    with pytest.raises(UsageError):
        cmdline.parse(looped)
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    with pytest.raises(UsageError):
        cmdline.parse(bomb + "command: [echo]\n")


@given(st.text(max_size=300))
@settings(max_examples=300, deadline=None)
def test_any_text_is_a_command_or_one_usage_error(text: str) -> None:
    try:
        c = cmdline.parse(text)
    except UsageError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(c.render(), str)


@given(
    st.lists(
        st.sampled_from(
            [
                "vllm",
                "serve",
                "-c",
                "bash",
                "&&",
                ";",
                "'",
                '"',
                "\\",
                "=",
                "--x",
                "-O",
                "|",
                "docker",
                "run",
                "img",
                "- ",
                "args:",
                "\n",
                "2>&1",
                "$",
                "#",
                "--api-key",
                "m",
            ]
        ),
        max_size=30,
    )
)
@settings(max_examples=300, deadline=None)
def test_shell_like_fragments_never_crash(parts: list[str]) -> None:
    text = " ".join(parts)
    try:
        c = cmdline.parse(text)
    except UsageError:
        return
    cmdline.parse(c.render())  # what doctor prints parses again


@pytest.mark.parametrize(
    "text",
    [
        "`vllm serve  org/m \\\n  --dtype float16 \\\n  --max-model-len 512`",  # inline code in an issue
        "```bash\nvllm serve org/m \\\n--dtype float16 \\\n--max-model-len 512\n```",
        "'''\nvllm serve org/m --dtype float16 --max-model-len 512 \\\n'''",  # cut after a continuation
        "> $ vllm serve org/m --dtype float16 --max-model-len 512",
    ],
)
def test_commands_as_pasted_in_issue_trackers(text: str) -> None:
    c = cmdline.parse(text, "0.14.0")
    assert c.model == "org/m" and c.get("--dtype") == "float16" and c.get("--max-model-len") == "512"
    assert c.problems == ()


def test_comments_are_not_prompts() -> None:
    script = "# vllm serve old/model --max-model-len 1\nroot@box:~# vllm serve org/m --max-model-len 512\n"
    assert cmdline.parse(script, "0.14.0").model == "org/m"
    yaml_text = "# the server\ncommand: [vllm, serve, org/m]\n  # indented comment\n"
    assert cmdline.parse(yaml_text, "0.14.0").model == "org/m"


def test_option_lines_of_a_paste_that_lost_its_backslashes_continue_the_command() -> None:
    c = cmdline.parse("vllm serve org/m\n  --port 8087\n--tensor-parallel-size 8\necho done", "0.14.0")
    assert c.get("--port") == "8087" and c.tensor_parallel_size() == 8 and c.extra == ()


def test_docker_entrypoint_is_the_start_of_the_launch() -> None:
    line = (
        "docker run --entrypoint python3 vllm/vllm-openai:v0.14.0 "
        "-m vllm.entrypoints.openai.api_server --model org/m --port 8000"
    )
    c = cmdline.parse(line, "0.14.0")
    assert c.launch == ("-m", "vllm.entrypoints.openai.api_server") and c.problems == ()
    assert c.served_model() == "org/m" and c.render() == line
    c = cmdline.parse("docker run --entrypoint vllm vllm/vllm-openai serve org/m --port 1", "0.14.0")
    assert c.launch == ("serve",) and c.model == "org/m" and c.problems == ()


K8S_ARGS_MODEL_FIRST = """
containers:
  - args:
    - /models/weights
    - --served-model-name
    - glm-5.2
    - --kv-transfer-config
    - '{"kv_connector":"OffloadingConnector","kv_role":"kv_both"}'
    image: vllm/vllm-openai-rocm:v0.20.1
    name: vllm
"""


def test_kubernetes_args_may_begin_with_the_served_model() -> None:
    """vllm serve's model is a positional: a manifest (vllm#52656) gives it first in `args:`."""
    c = cmdline.parse(K8S_ARGS_MODEL_FIRST, "0.20.1")
    assert c.launch == ("vllm", "serve") and c.model == "/models/weights"
    assert c.get("--served-model-name") == "glm-5.2" and c.connector() == "OffloadingConnector"


@pytest.mark.parametrize(
    "text",
    [
        # Kubernetes `command:` replaces the image's entrypoint: its args are another program's
        'containers:\n- image: vllm/vllm-openai:v0.20.1\n  command: ["python3"]\n'
        '  args: ["/app/x.py", "--port", "1"]\n',
        # a program named by path, a shell: not arguments to vllm serve
        'services:\n  v:\n    image: vllm/vllm-openai:v0.20.1\n    command: ["/bin/run", "--port", "1"]\n',
        'services:\n  v:\n    image: vllm/vllm-openai:v0.20.1\n    entrypoint: ["x"]\n'
        '    command: ["m", "--port", "1"]\n',
    ],
)
def test_words_that_replace_the_images_entrypoint_are_not_vllm_serve(text: str) -> None:
    with pytest.raises(UsageError):
        cmdline.parse(text, "0.20.1")
