"""A `vllm serve` / `python -m vllm.entrypoints.openai.api_server` / `docker run ... vllm/vllm-openai`
line, parsed with vLLM's flag semantics, changed by a fix, and printed back ready to paste.

vLLM's FlexibleArgumentParser accepts `--flag=value` and `--flag value`, and treats `--a_b` as
`--a-b`; boolean flags (store_true / BooleanOptionalAction, which adds `--no-<flag>`) take no value.
Secrets (env names with TOKEN/KEY/SECRET/PASSWORD, --api-key/--hf-token values) print as `$NAME`.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kvops.errors import UsageError

# vLLM serve flags that take no value (vllm/engine/arg_utils.py, entrypoints/openai/cli_args.py).
BOOLEAN_FLAGS = frozenset(
    [
        "--disable-hybrid-kv-cache-manager",
        "--enable-prefix-caching",
        "--trust-remote-code",
        "--enforce-eager",
        "--enable-chunked-prefill",
        "--disable-log-requests",
        "--enable-log-requests",
        "--disable-log-stats",
        "--enable-expert-parallel",
        "--enable-auto-tool-choice",
        "--async-scheduling",
        "--disable-custom-all-reduce",
        "--enable-lora",
        "--enable-prompt-tokens-details",
        "--disable-fastapi-docs",
        "--enable-sleep-mode",
        "--headless",
        "--data-parallel-hybrid-lb",
        "--data-parallel-external-lb",
        "--enable-eplb",
        "--disable-sliding-window",
        "--disable-cascade-attn",
        "--skip-tokenizer-init",
        "--enable-reasoning",
        "--disable-frontend-multiprocessing",
        "--enable-request-id-headers",
        "--enable-server-load-tracking",
        "--enable-force-include-usage",
        "--enable-tokenizer-info-endpoint",
        "--enable-log-outputs",
        "--enable-dbo",
        "--disable-uvicorn-access-log",
        "--return-tokens-as-token-ids",
        "--enable-lora-bias",
        "--fully-sharded-loras",
        "--calculate-kv-scales",
        "--enable-double-batch-overlap",
        "--ray-workers-use-nsight",
        "--disable-log-stats",
        "--use-tqdm-on-load",
        "--allow-credentials",
        "--enable-ssl-refresh",
        "--kv-sharing-fast-prefill",
        "--enable-mfu-metrics",
    ]
)
# Flags kvops knows take a value; anything else is kept and noted as unknown.
VALUE_FLAGS = frozenset(
    [
        "--model",
        "--served-model-name",
        "--host",
        "--port",
        "--api-key",
        "--hf-token",
        "--tokenizer",
        "--revision",
        "--dtype",
        "--kv-cache-dtype",
        "--max-model-len",
        "--max-num-seqs",
        "--max-num-batched-tokens",
        "--gpu-memory-utilization",
        "--tensor-parallel-size",
        "--pipeline-parallel-size",
        "--data-parallel-size",
        "--data-parallel-size-local",
        "--block-size",
        "--swap-space",
        "--cpu-offload-gb",
        "--kv-offloading-size",
        "--kv-offloading-backend",
        "--kv-transfer-config",
        "--kv-events-config",
        "--quantization",
        "--load-format",
        "--download-dir",
        "--seed",
        "--distributed-executor-backend",
        "--max-logprobs",
        "--tool-call-parser",
        "--reasoning-parser",
        "--chat-template",
        "--compilation-config",
        "--speculative-config",
        "--limit-mm-per-prompt",
        "--mm-processor-kwargs",
        "--override-generation-config",
        "--generation-config",
        "--hf-overrides",
        "--rope-scaling",
        "--rope-theta",
        "--max-seq-len-to-capture",
        "--num-gpu-blocks-override",
        "--attention-backend",
        "--uvicorn-log-level",
        "--ssl-keyfile",
        "--ssl-certfile",
        "--ssl-ca-certs",
        "--root-path",
        "--middleware",
        "--lora-modules",
        "--max-loras",
        "--max-lora-rank",
        "--tokenizer-mode",
        "--config",
        "--api-server-count",
        "--prefix-caching-hash-algo",
        "--scheduling-policy",
        "--long-prefill-token-threshold",
        "--max-num-partial-prefills",
        "--mamba-cache-mode",
        "--mamba-ssm-cache-dtype",
        "--logits-processors",
        "--allowed-local-media-path",
        "--data-parallel-address",
        "--data-parallel-rpc-port",
        "--data-parallel-start-rank",
        "--data-parallel-backend",
        "--expert-placement-strategy",
        "--eplb-config",
        "--worker-cls",
        "--cuda-graph-sizes",
        "--max-cudagraph-capture-size",
        "--optimization-level",
        "--performance-mode",
        "--structured-outputs-config",
        "--kv-cache-memory-bytes",
        "--logprobs-mode",
    ]
)
# vllm serve options with a short form.
SHORT_FLAGS = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-dp": "--data-parallel-size",
}
SECRET_FLAG_ENV = {"--api-key": "VLLM_API_KEY", "--hf-token": "HF_TOKEN"}
_SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
OFFLOADING_FLAGS = ("--kv-offloading-size", "--kv-offloading-backend", "--kv-transfer-config")

# docker run options that take a value (docker CLI reference); everything else is a switch.
_DOCKER_VALUE_OPTS = frozenset(
    [
        "-e",
        "--env",
        "--env-file",
        "-p",
        "--publish",
        "-v",
        "--volume",
        "--name",
        "--shm-size",
        "--ipc",
        "--device",
        "--group-add",
        "--gpus",
        "--runtime",
        "--ulimit",
        "-m",
        "--memory",
        "--memory-swap",
        "--network",
        "--net",
        "--security-opt",
        "--cap-add",
        "--cap-drop",
        "--entrypoint",
        "-w",
        "--workdir",
        "-u",
        "--user",
        "--mount",
        "--cpus",
        "--cpuset-cpus",
        "--pid",
        "--hostname",
        "-h",
        "--label",
        "-l",
        "--restart",
        "--platform",
        "--pull",
        "--log-driver",
        "--log-opt",
        "--add-host",
        "--dns",
        "--expose",
        "--tmpfs",
        "--uts",
        "--device-cgroup-rule",
        "--cgroupns",
        "--cgroup-parent",
        "--stop-signal",
        "--stop-timeout",
        "--health-cmd",
    ]
)
# Options that say the same thing: --ipc=host makes --shm-size moot.
_DOCKER_SAME = {"--ipc": ("--shm-size",), "--shm-size": ("--ipc",)}
_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def is_secret_name(name: str) -> bool:
    """Env names that hold credentials (a file or path is not itself a secret)."""
    upper = name.upper().lstrip("-").replace("-", "_")
    if upper.endswith(("FILE", "PATH", "DIR")):
        return False
    return any(word in upper for word in _SECRET_WORDS)


def secret_flag_env(flag: str) -> str | None:
    """`--api-key` -> VLLM_API_KEY; other secret-looking flags -> their upper-snake name."""
    if flag in SECRET_FLAG_ENV:
        return SECRET_FLAG_ENV[flag]
    return flag.lstrip("-").upper().replace("-", "_") if is_secret_name(flag) else None


def parse_size(text: str) -> int | None:
    """Docker sizes: 64m, 16g, 1024 (bytes)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([bkmgt]?)b?\s*", text.lower())
    if not m:
        return None
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2)])


@dataclass(frozen=True)
class Arg:
    flag: str  # canonical: --dashed-name (or a short docker/vllm form as given)
    value: str | None  # None: a switch
    joined: bool = False  # was written --flag=value


@dataclass(frozen=True)
class ServeCommand:
    launcher: str  # vllm-serve | api-server | docker
    launch: tuple[str, ...]  # tokens that start the server: ("vllm", "serve") or the python -m form
    model: str | None  # positional model of vllm serve
    args: tuple[Arg, ...]
    env: tuple[tuple[str, str | None], ...] = ()  # in order; None = docker `-e NAME` pass-through
    docker_opts: tuple[Arg, ...] = ()
    image: str | None = None
    unknown_flags: tuple[str, ...] = field(default=())

    # ---- reading -------------------------------------------------------------------------
    def has(self, flag: str) -> bool:
        return any(a.flag == flag for a in self.args)

    def get(self, flag: str) -> str | None:
        """The last value given (argparse keeps the last)."""
        value = None
        for a in self.args:
            if a.flag == flag:
                value = a.value
        return value

    def flag_bool(self, flag: str) -> bool | None:
        """True/False for a BooleanOptionalAction pair, None when neither is given."""
        result = None
        for a in self.args:
            if a.flag == flag:
                result = True
            elif a.flag == "--no-" + flag[2:]:
                result = False
        return result

    def env_dict(self) -> dict[str, str]:
        return {k: v for k, v in self.env if v is not None}

    def served_model(self) -> str | None:
        return self.get("--model") or self.model

    def tensor_parallel_size(self) -> int:
        value = self.get("--tensor-parallel-size")
        return int(value) if value and value.isdigit() else 1

    def kv_transfer_config(self) -> dict[str, Any] | None:
        raw = self.get("--kv-transfer-config")
        if raw is None:
            return None
        try:
            cfg = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--kv-transfer-config in --cmd is not valid JSON: {exc.msg}") from None
        if not isinstance(cfg, dict):
            raise UsageError("--kv-transfer-config in --cmd is not a JSON object")
        return cfg

    def offloading_size_gib(self) -> float | None:
        size = self.get("--kv-offloading-size")
        if size is not None:
            try:
                return float(size)
            except ValueError:
                return None
        extra = (self.kv_transfer_config() or {}).get("kv_connector_extra_config") or {}
        if isinstance(extra, dict) and isinstance(extra.get("cpu_bytes_to_use"), (int, float)):
            return float(extra["cpu_bytes_to_use"]) / (1 << 30)
        return None

    def connector(self) -> str | None:
        """The KV connector vLLM will build: from --kv-transfer-config, else the offloading flags."""
        cfg = self.kv_transfer_config()
        if cfg and cfg.get("kv_connector"):
            return str(cfg["kv_connector"])
        if self.get("--kv-offloading-size") is not None:
            backend = self.get("--kv-offloading-backend") or "native"
            return {"native": "OffloadingConnector", "lmcache": "LMCacheConnectorV1"}.get(backend, backend)
        return None

    def offloading(self) -> str | None:
        """native | lmcache | <other connector> | None."""
        name = self.connector()
        if name is None:
            return None
        if name in ("OffloadingConnector", "SimpleCPUOffloadConnector"):
            return "native"
        if name.startswith("LMCache"):
            return "lmcache"
        return name

    def platform_hint(self) -> str | None:
        """rocm/cuda where the command itself says so (image name, ROCm env); None otherwise."""
        env = self.env_dict()
        if (self.image and "rocm" in self.image.lower()) or any(k.startswith("VLLM_ROCM_") for k in env):
            return "rocm"
        if any(a.flag == "--device" and a.value and "/dev/kfd" in a.value for a in self.docker_opts):
            return "rocm"
        if any(
            a.flag == "--gpus" or (a.flag == "--runtime" and a.value == "nvidia") for a in self.docker_opts
        ):
            return "cuda"
        return None

    def docker_opt(self, *names: str) -> str | None:
        value = None
        for a in self.docker_opts:
            if a.flag in names:
                value = a.value
        return value

    # ---- changing ------------------------------------------------------------------------
    def with_fix(
        self,
        remove: Sequence[str] = (),
        add: Sequence[str] = (),
        env: Mapping[str, str | None] | None = None,
        docker_add: Sequence[str] = (),
    ) -> ServeCommand:
        """Drop the `remove` flags (both --x and --no-x), add `--flag=value` tokens, set/unset env;
        docker options are added only to a docker line (replacing the same option)."""
        drop = set(remove) | {"--no-" + f[2:] for f in remove}
        args = [a for a in self.args if a.flag not in drop]
        for token in add:
            flag, sep, value = token.partition("=")
            args = [a for a in args if a.flag != flag and a.flag != "--no-" + flag[2:]]
            args.append(Arg(flag, value if sep else None, joined=bool(sep)))
        new_env = list(self.env)
        for name, value in (env or {}).items():
            new_env = [(k, v) for k, v in new_env if k != name]
            if value is not None:
                new_env.append((name, str(value)))
        opts = list(self.docker_opts)
        if self.launcher == "docker":
            for token in docker_add:
                name, sep, value = token.partition("=")
                related = {name, *_DOCKER_SAME.get(name, ())}
                if name == "--ulimit":  # one --ulimit per resource
                    kind = value.split("=")[0]
                    opts = [
                        o for o in opts if not (o.flag == name and (o.value or "").startswith(kind + "="))
                    ]
                else:
                    opts = [o for o in opts if o.flag not in related]
                opts.append(Arg(name, value if sep else None, joined=bool(sep)))
        return replace(self, args=tuple(args), env=tuple(new_env), docker_opts=tuple(opts))

    # ---- printing ------------------------------------------------------------------------
    def render(self) -> str:
        """One pasteable line; secrets become $NAME."""
        parts: list[str] = []
        env_parts = [_env_token(k, v) for k, v in self.env]
        if self.launcher == "docker":
            parts += ["docker", "run"]
            for k, v in self.env:
                parts += ["-e", _env_token(k, v)]
            for a in self.docker_opts:
                parts += _arg_tokens(a)
            parts.append(_q(self.image or ""))
            parts += [_q(t) for t in self.launch]
        else:
            parts += env_parts
            parts += [_q(t) for t in self.launch]
        if self.model:
            parts.append(_q(self.model))
        for a in self.args:
            parts += _arg_tokens(a)
        return " ".join(parts)


def _q(token: str) -> str:
    if re.fullmatch(r"\$[A-Z_][A-Z0-9_]*", token):
        return token
    return shlex.quote(token)


def _env_token(name: str, value: str | None) -> str:
    if value is None:
        return _q(name)
    if is_secret_name(name):
        return f"{name}=${name}"
    return f"{name}={_q(value)}"


def _arg_tokens(a: Arg) -> list[str]:
    if a.value is None:
        return [a.flag]
    env = secret_flag_env(a.flag)
    value = f"${env}" if env else a.value
    if a.joined:
        return [f"{a.flag}={_q(value)}" if not env else f"{a.flag}={value}"]
    return [a.flag, _q(value)]


def _canonical(flag: str) -> str:
    if flag in SHORT_FLAGS:
        return SHORT_FLAGS[flag]
    return "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag


def _takes_value(flag: str, nxt: str | None) -> bool:
    if flag in BOOLEAN_FLAGS or flag.startswith("--no-"):
        return False
    if nxt is None:
        return False
    if flag in VALUE_FLAGS:
        return True
    # Unknown flag: it takes a value if the next token is not another option.
    return not nxt.startswith("-") or re.fullmatch(r"-\d+(\.\d+)?", nxt) is not None


def _parse_vllm_args(tokens: list[str]) -> tuple[str | None, list[Arg], list[str]]:
    model: str | None = None
    args: list[Arg] = []
    unknown: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith("-") and tok != "-":
            name, eq, value = tok.partition("=")
            flag = _canonical(name)
            if eq:
                args.append(Arg(flag, value, joined=True))
            elif _takes_value(flag, tokens[i + 1] if i + 1 < len(tokens) else None):
                args.append(Arg(flag, tokens[i + 1]))
                i += 1
            else:
                args.append(Arg(flag, None))
            base = "--" + flag[5:] if flag.startswith("--no-") else flag
            if base not in BOOLEAN_FLAGS and base not in VALUE_FLAGS and flag not in unknown:
                unknown.append(flag)
        elif model is None:
            model = tok
        else:
            unknown.append(tok)
        i += 1
    return model, args, unknown


def split(text: str) -> list[str]:
    joined = re.sub(r"\\\r?\n", " ", text)
    try:
        return shlex.split(joined, comments=True)
    except ValueError as exc:
        raise UsageError(f"cannot split --cmd as a shell line: {exc}") from None


def parse(text: str) -> ServeCommand:
    """Parse a serve command; UsageError (one line) when it is not one kvops understands."""
    tokens = split(text)
    env: list[tuple[str, str | None]] = []
    while tokens and tokens[0] in ("sudo", "env", "exec", "nohup"):
        tokens.pop(0)
    while tokens and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", tokens[0]):
        name, _, value = tokens.pop(0).partition("=")
        env.append((name, value))
    if not tokens:
        raise UsageError("--cmd is empty")

    if tokens[0] in ("docker", "podman") and len(tokens) > 1 and tokens[1] == "run":
        return _parse_docker(tokens[2:], env)
    launch, rest = _split_launch(tokens)
    if launch is None:
        raise UsageError(
            "--cmd is not a vllm serve, python -m vllm.entrypoints.openai.api_server or docker run line"
        )
    model, args, unknown = _parse_vllm_args(rest)
    launcher = "vllm-serve" if "serve" in launch else "api-server"
    return ServeCommand(launcher, launch, model, tuple(args), tuple(env), unknown_flags=tuple(unknown))


def _split_launch(tokens: list[str]) -> tuple[tuple[str, ...] | None, list[str]]:
    if len(tokens) >= 2 and tokens[0].endswith("vllm") and tokens[1] == "serve":
        return tuple(tokens[:2]), tokens[2:]
    python_m = len(tokens) >= 3 and re.search(r"python[\d.]*$", tokens[0]) and tokens[1] == "-m"
    if python_m and tokens[2] in ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.cli.main"):
        n = 4 if tokens[2].endswith("cli.main") and len(tokens) > 3 and tokens[3] == "serve" else 3
        return tuple(tokens[:n]), tokens[n:]
    return None, tokens


def _parse_docker(tokens: list[str], env: list[tuple[str, str | None]]) -> ServeCommand:
    opts: list[Arg] = []
    i = 0
    while i < len(tokens) and tokens[i].startswith("-"):
        name, eq, value = tokens[i].partition("=")
        if not eq and name in _DOCKER_VALUE_OPTS and i + 1 < len(tokens):
            value = tokens[i + 1]
            i += 1
        elif not eq:
            value = None
        if name in ("-e", "--env"):
            k, sep, v = (value or "").partition("=")
            env.append((k, v if sep else None))
        else:
            opts.append(Arg(name, value, joined=bool(eq)))
        i += 1
    if i >= len(tokens):
        raise UsageError("--cmd: docker run line has no image")
    image = tokens[i]
    rest = tokens[i + 1 :]
    launch, after = _split_launch(rest)
    if launch is not None:
        rest = after
    model, args, unknown = _parse_vllm_args(rest)
    return ServeCommand(
        "docker",
        launch or (),
        model,
        tuple(args),
        tuple(env),
        docker_opts=tuple(opts),
        image=image,
        unknown_flags=tuple(unknown),
    )


# NAME=value for upper-case env-style names; key: value / key=value for a few lower-case words;
# --api-key value style flags. Whitespace alone never separates a name from a value, so prose
# ("tokens per block") is left alone.
_SECRET_ENV_ASSIGN = re.compile(
    r"\b([A-Z][A-Z0-9_]*(?:TOKEN|KEY|SECRET|PASSWORD|PASSWD)[A-Z0-9_]*)=(?![$])([^\s'\",;]+)"
)
_SECRET_WORD_ASSIGN = re.compile(
    r"(?i)\b(password|passwd|secret|api[_-]?key|token)(\s*[:=]\s*)(?![$\s])([^\s,;'\"]+)"
)
_SECRET_FLAG = re.compile(
    r"(--[\w-]*(?:api-key|token|password|secret)[\w-]*)(=|\s+)(?![$-])([^\s'\",;]+)", re.I
)
# 'api_key': ['sk-...'] / "hf_token": "hf_..." in a logged dict or JSON (vLLM's non-default args).
_SECRET_QUOTED = re.compile(
    r"""(?i)(['"])([\w-]*(?:api_key|api-key|token|password|passwd|secret)s?)\1(\s*:\s*\[?\s*)(['"])(?![$])[^'"]*\4"""
)
_TOKEN_LIKE = re.compile(r"\b(hf_[A-Za-z0-9]{16,}|sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,})\b")


def secret_values(cmd: ServeCommand | None) -> dict[str, str]:
    """value -> $NAME for every secret the command carries (env and --api-key-like flags)."""
    out: dict[str, str] = {}
    if cmd is None:
        return out
    for name, value in cmd.env:
        if value and is_secret_name(name):
            out[value] = f"${name}"
    for a in cmd.args:
        env = secret_flag_env(a.flag)
        if env and a.value:
            out[a.value] = f"${env}"
    return out


def redact_text(text: str, known: Mapping[str, str] | None = None) -> str:
    """Hide secrets in free text (log lines, evidence): known values, NAME=value, token shapes."""
    for value, name in sorted((known or {}).items(), key=lambda kv: -len(kv[0])):
        if len(value) >= 4:
            text = text.replace(value, name)

    def env_assign(m: re.Match[str]) -> str:
        if m.group(1).endswith(("FILE", "PATH", "DIR")):
            return m.group(0)
        return f"{m.group(1)}=${m.group(1)}"

    def flag_assign(m: re.Match[str]) -> str:
        env = secret_flag_env(m.group(1).lower())
        return m.group(0) if env is None else f"{m.group(1)}{m.group(2)}${env}"

    def quoted(m: re.Match[str]) -> str:
        shown = SECRET_FLAG_ENV.get("--" + m.group(2).lower().replace("_", "-")) or m.group(2).upper()
        return f"{m.group(1)}{m.group(2)}{m.group(1)}{m.group(3)}{m.group(4)}${shown}{m.group(4)}"

    text = _SECRET_QUOTED.sub(quoted, text)
    text = _SECRET_ENV_ASSIGN.sub(env_assign, text)
    text = _SECRET_FLAG.sub(flag_assign, text)
    text = _SECRET_WORD_ASSIGN.sub(lambda m: f"{m.group(1)}{m.group(2)}${m.group(1).upper()}", text)
    return _TOKEN_LIKE.sub("$REDACTED", text)


_LOGGED_PAIR = re.compile(r"'(\w+)': ('[^']*'|-?[\d.]+(?:e-?\d+)?|True|False|None)")


def from_non_default_args(text: str) -> ServeCommand | None:
    """Rebuild a `vllm serve` line from vLLM's `non-default args: {...}` start-up log line.

    The dict is a Python repr; values that are objects (not literals) are skipped.
    """
    import ast

    try:
        values = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        values = {k: ast.literal_eval(v) for k, v in _LOGGED_PAIR.findall(text)}
    if not isinstance(values, dict) or not values:
        return None
    model = values.pop("model", None) or values.pop("model_tag", None)
    values.pop("model_tag", None)
    args: list[Arg] = []
    for key, value in values.items():
        flag = "--" + str(key).replace("_", "-")
        if value is None:
            continue
        if value is True:
            args.append(Arg(flag, None))
        elif value is False:
            args.append(Arg("--no-" + flag[2:], None))
        elif isinstance(value, dict):
            args.append(Arg(flag, json.dumps(value)))
        elif isinstance(value, (list, tuple)):
            if value:
                args.append(Arg(flag, str(value[0])))
        else:
            args.append(Arg(flag, str(value)))
    return ServeCommand("vllm-serve", ("vllm", "serve"), str(model) if model else None, tuple(args))
