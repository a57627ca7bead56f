"""Fuzzing (hypothesis): exposition text, config.json, serve command lines, logs, exporter
configs. Zero crashes; every rejection is one UsageError line, or exit 2 with one stderr
line through the CLI. Bounded in CI (tests/reliability/fuzzing.py); a long run:

    KVOPS_FUZZ_PROFILE=long python -m pytest tests/reliability/test_fuzz.py -q
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math

from hypothesis import assume, example, given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from kvops.cli import main
from kvops.doctor.judging import catalog, logs
from kvops.doctor.reading import cmdline, modelcfg
from kvops.engines import registry
from kvops.errors import UsageError
from kvops.exporter.command import configure as configure_exporter
from kvops.exporter.config import load_config
from kvops.exporter.encode import encode
from kvops.exporter.families import render
from kvops.exporter.server import parse_listen
from kvops.exporter.webconfig import load as load_web_config
from kvops.exposition.parser import parse
from kvops.snapshot import Snapshot
from kvops.transport.http import normalise_target

from .fuzzing import FUZZ


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text and "\r" not in text, repr(text)
    assert "Traceback" not in text
    return text


# --- exposition text ----------------------------------------------------------------------

NAMES = [*sorted(registry.WANTED), "vllm:other_total", "process_cpu_seconds_total", "up", "a_b:c"]
LABEL_NAMES = [
    "model_name",
    "engine",
    "transfer_type",
    "cpu_kv_cache_size_bytes",
    "kv_offloading_size",
    "worker_id",
    "served_model_name",
    "le",
    "x",
]
# Label values: anything printable (escapes, quotes, backslashes, newlines, non-ASCII).
label_value = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20) | st.sampled_from(
    ["0", "1", "GPU_to_CPU", "CPU_to_GPU", "None", "8.0", "-1", "1e400", "nan", "x_to_GPU"]
)
sample_value = st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(2**70), 2**70)


def render_value(v: float | int) -> str:
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


def escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


@st.composite
def sample_lines(draw: st.DrawFn) -> tuple[str, tuple[str, dict[str, str], float]]:
    name = draw(st.sampled_from(NAMES) | st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,20}", fullmatch=True))
    labels = draw(st.dictionaries(st.sampled_from(LABEL_NAMES), label_value, max_size=4))
    value = draw(sample_value)
    inner = ",".join(f'{k}="{escape(v)}"' for k, v in labels.items())
    line = name + (f"{{{inner}}}" if labels else "") + " " + render_value(value)
    if draw(st.booleans()):
        line += f" {draw(st.integers(0, 2**41))}"
    return line, (name, labels, float(value))


def same_value(a: float, b: float) -> bool:
    # prometheus_client keeps an integer literal as int; Prometheus (and kvops) store float64
    a, b = float(a), float(b)
    return (math.isnan(a) and math.isnan(b)) or a == b


@FUZZ
@given(st.lists(sample_lines(), max_size=12))
@example(
    [
        (
            f'vllm:num_requests_running{{model_name="{c}"}} 1',
            ("vllm:num_requests_running", {"model_name": c}, 1.0),
        )
        for c in ("a\x85b", "\u2028", "\x0c", "\x1c", "\r")
    ]
)  # splitlines() cut these lines
def test_valid_exposition_parses_as_prometheus_client_reads_it(lines):
    text = "\n".join(line for line, _ in lines) + "\n"
    try:
        theirs = [
            (s.name, s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples
        ]
    except Exception:
        theirs = None  # prometheus_client rejects it (e.g. a name it reads as a histogram part)
    result = parse(text)
    ours = [(name, labels, v) for name, items in result.samples.items() for labels, v in items]
    assert not result.errors, result.errors
    # each written sample is read back exactly, whatever its label values hold
    expected = [want for _, want in lines]
    assert len(ours) == len(expected)
    for name, labels, v in expected:
        assert any(n == name and lb == labels and same_value(x, v) for n, lb, x in ours), (name, labels, v)
    if theirs is not None:
        assert len(theirs) == len(ours)
        for name, labels, v in theirs:
            assert any(n == name and lb == labels and same_value(x, v) for n, lb, x in ours), (name, labels)


@FUZZ
@given(st.lists(sample_lines(), max_size=12))
def test_any_vllm_exposition_normalises_and_the_exporter_serves_valid_text(lines):
    """Whatever a target serves (odd model names, engine labels, NaN, huge values), kvops
    produces a TargetSample and an exposition Prometheus can parse."""
    text = "\n".join(line for line, _ in lines) + "\n"
    result = parse(text, registry.WANTED)
    sample = registry.normalise(result, "http://t:8000")
    # up (docs/DESIGN.md): a vllm:/lmcache: sample, or a sample of a family kvops reads for
    # another engine (SGLang, KVBM, TensorRT-LLM)
    assert sample.up == any(
        n.startswith(("vllm:", "lmcache:")) or n in registry.OTHER_ENGINE_NAMES for _, (n, _, _) in lines
    )
    exposition = encode(render(Snapshot(time=0.0, targets=[sample]))).decode()
    families = list(text_string_to_metric_families(exposition))
    served = {
        (s.labels.get("model_name"), s.labels.get("engine"))
        for f in families
        for s in f.samples
        if "engine" in s.labels
    }
    assert served == {(e.model_name, e.engine) for e in sample.engines}


@FUZZ
@given(st.text(max_size=400) | st.binary(max_size=400).map(lambda b: b.decode("utf-8", "replace")))
def test_arbitrary_text_never_crashes_the_parser(text):
    for wanted in (None, registry.WANTED):
        result = parse(text, wanted)
        for line_no, message in result.errors:
            assert line_no >= 1 and "\n" not in message
        registry.normalise(result, "http://t:8000")


GOOD_LINES = ['vllm:num_requests_running{model_name="m",engine="0"} 1', "vllm:num_requests_running 2"]
BAD_LINES = [
    'vllm:num_requests_running{model_name="m" 1',
    "vllm:kv_cache_usage_perc{",
    "# TYPE x",
    'vllm:kv_cache_usage_perc{engine="0"} one',
    "vllm:kv_cache_usage_perc",
    '{a="b"} 1',
    'vllm:prefix_cache_hits_total{model_name="m",engine="0"} 1 2 3',
    "\x00",
    "\ufeffvllm:x 1",
]


@FUZZ
@given(st.lists(st.sampled_from(GOOD_LINES + BAD_LINES + ["#", " \t", "\r", ""]), max_size=15))
def test_malformed_lines_cost_only_themselves(lines):
    result = parse("\n".join(lines), registry.WANTED)
    good = [i + 1 for i, line in enumerate(lines) if line in GOOD_LINES]
    assert len(result.get("vllm:num_requests_running")) == len(good)
    bad = [i + 1 for i, line in enumerate(lines) if line in BAD_LINES and line.startswith("vllm:")]
    assert {n for n, _ in result.errors} <= set(bad) | {
        i + 1 for i, line in enumerate(lines) if line in BAD_LINES
    }
    assert not {n for n, _ in result.errors} & set(good)


# --- config.json --------------------------------------------------------------------------

json_scalar = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
CONFIG_KEYS = [
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "hidden_size",
    "torch_dtype",
    "model_type",
    "architectures",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "layer_types",
    "sliding_window",
    "use_sliding_window",
    "num_experts",
    "n_routed_experts",
    "max_position_embeddings",
    "index_topk",
    "full_attention_interval",
    "layers_block_type",
    "hybrid_override_pattern",
]
config_value = (
    st.integers(-4, 300)
    | st.sampled_from(["deepseek_v3", "bfloat16", "fp8", "mamba", "attention"])
    | json_value
)


@st.composite
def model_configs(draw: st.DrawFn) -> object:
    cfg = draw(st.dictionaries(st.sampled_from(CONFIG_KEYS), config_value, max_size=12))
    if draw(st.booleans()):
        cfg["text_config"] = draw(st.dictionaries(st.sampled_from(CONFIG_KEYS), config_value, max_size=8))
    return draw(st.sampled_from([cfg, cfg, cfg, [cfg], "config", None]))


@FUZZ
@given(model_configs())
@example({"num_hidden_layers": 2, "num_attention_heads": 0, "hidden_size": 64})  # was ZeroDivisionError
def test_any_config_json_loads_or_is_one_usage_error(tmp_path_factory, cfg):
    path = tmp_path_factory.mktemp("cfg") / "config.json"
    path.write_text(json.dumps(cfg))
    try:
        info = modelcfg.load(path)
    except UsageError as exc:
        one_line(exc)
        return
    assert info.num_layers is not None and info.num_attention_heads is not None


@FUZZ
@given(st.binary(max_size=200))
def test_config_json_of_any_bytes(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("cfg") / "config.json"
    path.write_bytes(raw)
    try:
        modelcfg.load(path)
    except UsageError as exc:
        one_line(exc)


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """kvops's own main() in this process (a fresh capture per example, unlike capsys)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)  # an uncaught exception fails the test: that would be a traceback
    return code, out.getvalue(), err.getvalue()


@FUZZ
@given(model_configs())
def test_doctor_model_cli_exit_2_with_one_line(tmp_path_factory, cfg):
    path = tmp_path_factory.mktemp("cfg") / "config.json"
    path.write_text(json.dumps(cfg))
    code, out, err = run_cli(["doctor", "--model", str(path), "--json"])
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("kvops doctor: error: "), err
        assert out == ""
    else:
        assert code in (0, 1), (code, err)
        json.loads(out)


# --- serve command lines ------------------------------------------------------------------

TOKENS = [
    "vllm",
    "serve",
    "python",
    "python3",
    "-m",
    "vllm.entrypoints.openai.api_server",
    "docker",
    "run",
    "--gpus",
    "all",
    "-e",
    "--env",
    "vllm/vllm-openai:latest",
    "meta-llama/Llama-3.1-8B",
    "--kv-offloading-size",
    "64",
    "--kv-offloading-backend",
    "native",
    "--kv-transfer-config",
    '{"kv_connector":"OffloadingConnector"}',
    "{",
    "'",
    '"',
    "\\",
    "\\\n",
    "#",
    "--shm-size",
    "16g",
    "--tensor-parallel-size",
    "0",
    "-tp",
    "2",
    "sudo",
    "env",
    "--",
    "=",
    "--api-key",
    "--hf-token",
    "--no-enable-prefix-caching",
    "VLLM_USE_V1=1",
    "$HF_TOKEN",
    "`x`",
    ";",
    "|",
]
command_text = st.lists(st.sampled_from(TOKENS) | st.text(max_size=10), max_size=16).map(" ".join)
secret = st.from_regex(r"[A-Za-z0-9]{12,32}", fullmatch=True)


@FUZZ
@given(command_text)
def test_any_command_line_parses_or_is_one_usage_error(text):
    try:
        cmd = cmdline.parse(text)
    except UsageError as exc:
        one_line(exc)
        return
    assert cmd.launcher in ("vllm-serve", "api-server", "docker")


@FUZZ
@given(command_text, secret, secret, st.sampled_from(["HF_TOKEN", "VLLM_API_KEY", "AWS_SECRET_ACCESS_KEY"]))
def test_secrets_in_a_command_line_never_reach_doctor_output(rest, env_secret, flag_secret, env_name):
    """Doctor redacts secrets in env and flags in every output (text and JSON)."""
    text = f"{env_name}={env_secret} vllm serve m --api-key {flag_secret} {rest}"
    try:
        cmdline.parse(text)
    except UsageError:
        assume(False)  # the rest made it unparseable (an open quote): nothing is printed back
    for extra in ([], ["--json"]):
        code, out, err = run_cli(["doctor", "--cmd", text, *extra])
        assert code in (0, 1, 2)
        for s in (env_secret, flag_secret):
            assert s not in out and s not in err


# --- logs ---------------------------------------------------------------------------------

LOG_LINES = [
    "INFO 11-21 10:00:00 [api_server.py:1] vLLM API server version 0.11.2",
    "ERROR torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "non-default args: {'model': 'm', 'api_key': ['sk-abcdefghijklmnopqrstuv']}",
    "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz",
    "\x00",
    "\xff\xfe",
    "\r",
    "x" * 300,
]


@FUZZ
@given(st.lists(st.sampled_from(LOG_LINES) | st.text(max_size=40), max_size=30), st.binary(max_size=64))
def test_any_log_scans_or_is_one_usage_error(lines, noise):
    raw = "\n".join(lines).encode("utf-8", "surrogatepass") + noise
    books = catalog.load().failures
    try:
        scan = logs.scan(logs.decoded_lines(io.BytesIO(raw), "<fuzz>"), books)
    except UsageError as exc:
        one_line(exc)
        assert b"\x00" in raw
        return
    assert scan.lines >= 0


SECRET_FORMS = [
    "HF_TOKEN={s}",
    "VLLM_API_KEY={s}",
    "--api-key {s}",
    "--hf-token={s}",
    "token: {s}",
    "'api_key': ['{s}']",
    '"hf_token": "{s}"',
    "password={s}",
]


@FUZZ
@given(secret, st.sampled_from(SECRET_FORMS), st.text(max_size=30), st.text(max_size=30), st.booleans())
def test_secrets_in_a_log_never_reach_doctor_output(tmp_path_factory, value, form, before, after, as_json):
    """A failure line that also carries a secret is shown as evidence, with the secret hidden."""
    oom = "ERROR torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    line = f"{oom} {before} {form.format(s=value)} {after}"
    assume("\n" not in line and "\r" not in line and "\x00" not in line)
    path = tmp_path_factory.mktemp("log") / "vllm.log"
    path.write_text(f"INFO vLLM API server version 0.11.2\n{line}\n", encoding="utf-8", errors="replace")
    code, out, err = run_cli(["doctor", "--log", str(path), *(["--json"] if as_json else [])])
    assert code in (0, 1), err
    assert "out of memory" in out.lower()  # the evidence line is there...
    assert value not in out and value not in err  # ...without the secret


# --- exporter configuration and target URLs -------------------------------------------------

yaml_text = st.lists(
    st.sampled_from(
        [
            "targets:",
            "  - url: http://10.0.0.5:8000",
            "  - http://h:1",
            "  - 42",
            "  - url: ftp://x",
            "    bearer_token_file: /nonexistent",
            "    ca_file: /nonexistent.pem",
            "listen: :19435",
            "timeout: 0",
            "timeout: soon",
            "timeout: 1e9",
            "max_body_bytes: 10",
            "max_body_bytes: [1]",
            "bogus: 1",
            "- x",
            "{",
            "targets: 3",
            "  - url: http://[::1]:99999",
            "\t",
            ": :",
            "&a *a",
            "tls_server_config:",
            "  cert_file: /nonexistent.crt",
            "  key_file: k",
            "basic_auth_users:",
            "  alice: $2y$10$abcdefghijklmnopqrstuuO9Kq0E9r0Cq1wqz8v7lH2t8l1aQW1pm",
            "  bob: plain",
            "  client_auth_type: Bogus",
            "  min_version: TLS10",
        ]
    )
    | st.text(max_size=20),
    max_size=10,
).map("\n".join)


@FUZZ
@given(yaml_text.map(str.encode) | st.binary(max_size=80).map(lambda b: b"basic_auth_users:\n  a: " + b))
@example(b"targets: 3")  # was a TypeError
@example(b"basic_auth_users:\n  a: \xff\xfe\n")  # was a UnicodeDecodeError traceback
def test_any_exporter_config_loads_or_is_one_usage_error(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("cfg") / "kvops.yml"
    path.write_bytes(raw)
    parser = argparse.ArgumentParser()
    configure_exporter(parser)
    for load in (
        lambda: load_config(parser.parse_args(["--config", str(path)])),
        lambda: load_web_config(str(path)),
    ):
        try:
            load()
        except UsageError as exc:
            one_line(exc)


@FUZZ
@given(st.text(max_size=40) | st.from_regex(r"(https?|ftp)://[\w.\[\]:@-]{0,20}(:\d{0,6})?(/[\w/]*)?"))
@example("[")  # was a ValueError traceback from urlsplit
@example("http://[::1")
def test_any_target_url_or_listen_address_is_accepted_or_one_usage_error(text):
    for check in (normalise_target, parse_listen):
        try:
            check(text)
        except UsageError as exc:
            one_line(exc)
