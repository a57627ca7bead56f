"""A `vllm serve` / `python -m vllm.entrypoints.openai.api_server` / `docker run ... vllm/vllm-openai`
line, parsed with the judged vLLM release's own flag table, changed by a fix, printed back ready to paste.

Which flags take a value, how many (argparse nargs), which are `--x/--no-x` booleans and which hold
JSON comes from kvops/doctor/reading/vllm_cli.json (recorded from each release's parser, see
gen_cli_schema.py). FlexibleArgumentParser's rewrites are applied: `--a_b` is `--a-b`, dotted
`--x.y v` keys build the JSON of `--x`, `-O3` means the release's optimisation level. Parsing
never drops a token: unknown flags and stray values are kept, rendered back and reported.
Secrets (kvops/doctor/reading/credentials.py: an explicit list, never `*token*`) print as `$NAME`.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kvops.doctor.reading import cli_schema, credentials, docker_run, engines, serve_line
from kvops.doctor.reading.cli_schema import Schema, is_option
from kvops.errors import UsageError
from kvops.termsafe import visible

OFFLOADING_FLAGS = ("--kv-offloading-size", "--kv-offloading-backend", "--kv-transfer-config")
# docker run's own options and `...` elision live in docker_run.py (serve_line reads them too)
ELISIONS = docker_run.ELISIONS
is_elision = docker_run.is_elision
_DOCKER_VALUE_OPTS = docker_run.VALUE_OPTIONS
_DOCKER_SAME = docker_run.SAME_AS


def is_secret_name(name: str) -> bool:
    """Env names that hold credentials, by credentials.py's explicit list and suffixes."""
    return credentials.is_secret_env(name)


def secret_flag_env(flag: str) -> str | None:
    """`--api-key` -> VLLM_API_KEY, `--hf-token` -> HF_TOKEN; no other flag is a secret."""
    return credentials.secret_flag_env(flag)


@dataclass(frozen=True)
class Arg:
    flag: str  # canonical: --dashed-name (or a short docker/vllm form as given)
    value: str | None  # None: a switch; else the (first) value
    joined: bool = False  # was written --flag=value
    more: tuple[str, ...] = ()  # further values of an nargs="+"/"*" flag: --lora-modules a=x b=y
    # the tokens it was read from (shell_words.Word: where they are written), for as_written.py
    src: tuple[str, ...] = field(default=(), compare=False)

    @property
    def values(self) -> tuple[str, ...]:
        return () if self.value is None else (self.value, *self.more)


@dataclass(frozen=True)
class CliProblem:
    """Something the judged release's parser would reject or read differently than written."""

    kind: str  # unknown-flag | bool-with-value | missing-value | bad-choice | bad-json | bad-number
    flag: str
    message: str


@dataclass(frozen=True)
class ServeCommand:
    launcher: str  # vllm-serve | api-server | docker | sglang | dynamo
    launch: tuple[str, ...]  # tokens that start the server: ("vllm", "serve") or the python -m form
    model: str | None  # positional model of vllm serve
    args: tuple[Arg, ...]
    env: tuple[tuple[str, str | None], ...] = ()  # in order; None = docker `-e NAME` pass-through
    docker_opts: tuple[Arg, ...] = ()
    image: str | None = None
    unknown_flags: tuple[str, ...] = field(default=())
    extra: tuple[str, ...] = ()  # positional tokens after the model (argparse would reject them)
    problems: tuple[CliProblem, ...] = ()
    schema_version: str | None = None  # the release whose flag table parsed this line
    schema_note: str | None = None  # set when that is another release's table
    tokens: tuple[str, ...] = ()  # the vLLM arguments as given (re-parsed for another release)
    config_args: tuple[Arg, ...] = ()  # from a readable `--config FILE.yaml`; the CLI's flags win
    elided: bool = False  # the paste elides part of the line with `...` (docker options unknown)
    pasted: str | None = field(default=None, compare=False)  # the text the tokens were read from
    env_src: tuple[tuple[str, tuple[str, ...]], ...] = field(default=(), compare=False)

    @property
    def engine(self) -> str:
        """vllm | sglang | dynamo (engines.py): which engine the launch tokens start."""
        return engines.engine_of(self.launch)

    def effective_args(self) -> tuple[Arg, ...]:
        """What vLLM parses: the --config file's flags first (FlexibleArgumentParser inserts them
        before the command line's), then the command line's."""
        return self.config_args + self.args

    # ---- reading -------------------------------------------------------------------------
    def has(self, flag: str) -> bool:
        """Given in any form: --flag, --flag=v, or a dotted --flag.key v."""
        return any(a.flag == flag or a.flag.startswith(flag + ".") for a in self.effective_args())

    def get_all(self, flag: str) -> list[str]:
        """Every value given to `flag`, in order (nargs="+" and repeated/append flags)."""
        return [v for a in self.effective_args() if a.flag == flag for v in a.values]

    def get(self, flag: str) -> str | None:
        """The last value given (argparse keeps the last)."""
        value = None
        for a in self.effective_args():
            if a.flag == flag:
                value = a.value
        return value

    def flag_bool(self, flag: str) -> bool | None:
        """True/False for a BooleanOptionalAction pair, None when neither is given.
        `--flag False` (which vLLM rejects) is read as what the writer meant."""
        result = None
        for a in self.effective_args():
            if a.flag == flag:
                result = (a.value or "true").lower() not in ("false", "0", "no")
            elif a.flag == "--no-" + flag[2:]:
                result = False
        return result

    def env_dict(self) -> dict[str, str]:
        return {k: v for k, v in self.env if v is not None}

    def same_settings(self, other: ServeCommand) -> bool:
        """The same env, flags and values (in any order) and docker options: what a fix changes."""

        def settings(c: ServeCommand) -> tuple[object, ...]:
            return (sorted(c.env_dict().items()), sorted((a.flag, a.value) for a in c.args), c.docker_opts)

        return settings(self) == settings(other)

    def served_model(self) -> str | None:
        return self.get("--model") or self.model

    def tensor_parallel_size(self) -> int:
        value = self.get("--tensor-parallel-size")
        return int(value) if value and value.isascii() and value.isdigit() else 1

    def json_value(self, flag: str) -> tuple[Any, str | None]:
        """(value, error) of a JSON-valued flag as vLLM builds it: dotted `--flag.key v` pairs, when
        given, replace the whole-JSON form (FlexibleArgumentParser appends them last)."""
        dotted = [a for a in self.effective_args() if a.flag.startswith(flag + ".")]
        if dotted:
            merged: dict[str, Any] = {}
            for a in dotted:
                path = a.flag[len(flag) + 1 :]
                plus = path.endswith("+")
                keys = path.rstrip("+").split(".")
                raw = a.value or ""
                value: Any
                if plus:
                    value = raw.split(",")
                else:
                    try:
                        value = json.loads(raw)
                    except json.JSONDecodeError:
                        value = raw
                for key in reversed(keys):
                    value = {key: value}
                _deep_update(merged, value)
            return merged, None
        whole = self.get(flag)
        if whole is None:
            return None, None
        try:
            return json.loads(whole), None
        except json.JSONDecodeError as exc:
            return None, f"{flag} is not valid JSON: {exc}"

    def kv_transfer_config(self) -> dict[str, Any] | None:
        """The connector config; None when absent or not a JSON object (see kv_transfer_config_error)."""
        cfg, _ = self.json_value("--kv-transfer-config")
        return cfg if isinstance(cfg, dict) else None

    def kv_transfer_config_error(self) -> str | None:
        """vLLM's own complaint about --kv-transfer-config, with json's exact message."""
        cfg, error = self.json_value("--kv-transfer-config")
        if error is None and cfg is not None and not isinstance(cfg, dict):
            return "--kv-transfer-config is not a JSON object"
        return error

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
        """The KV connector vLLM will build: from --kv-transfer-config, else the offloading flags
        (SGLang's HiCache and LMCache switches, Dynamo's `--connector kvbm`, by their own names)."""
        if self.engine == engines.SGLANG:
            if self.has("--enable-hierarchical-cache"):
                return "HiCache"
            return "LMCache (SGLang)" if self.has("--enable-lmcache") else None
        if self.engine == engines.DYNAMO and "kvbm" in [v.lower() for v in self.get_all("--connector")]:
            return "DynamoConnector"
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
        if name.startswith("LMCache") and self.engine == engines.VLLM:
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
        # a flag goes with its --no- form and its dotted keys (--kv-transfer-config.kv_role)
        args = [a for a in self.args if a.flag.partition(".")[0] not in drop]
        for token in add:
            flag, sep, value = token.partition("=")
            same = {flag, "--no-" + flag[2:]}
            args = [a for a in args if a.flag.partition(".")[0] not in same]
            args.append(Arg(flag, value if sep else None, joined=bool(sep)))
        new_env = list(self.env)
        for name, setting in (env or {}).items():
            new_env = [(k, v) for k, v in new_env if k != name]
            if setting is not None:
                new_env.append((name, str(setting)))
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
        # a shell assignment needs a valid name (parse_tokens reads no other): anything else is a word
        env_parts = [_env_token(k, v) for k, v in self.env if _ENV_NAME.fullmatch(k)]
        if self.launcher == "docker":
            parts += ["docker", "run"]
            for k, v in self.env:
                parts += ["-e", _env_token(k, v)]  # docker's own word: any name, quoted
            for a in self.docker_opts:
                parts += arg_tokens(a)
            parts.append(_q(self.image or ""))
            parts += [_q(t) for t in self.launch]
        else:
            parts += env_parts
            parts += [_q(t) for t in self.launch]
        if self.model:
            parts.append(_q(self.model))
        hidden = secret_values(self)
        parts += [hidden.get(t) or _q(t) for t in self.extra]
        for a in self.args:
            parts += arg_tokens(a)
        return " ".join(parts)


def _q(token: str) -> str:
    if re.fullmatch(r"\$[A-Z_][A-Z0-9_]*", token):
        return token
    if token in ELISIONS:  # a value `...` written bare would read back as an elision
        return f"'{token}'"
    return shlex.quote(token)


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _env_token(name: str, value: str | None) -> str:
    """NAME=value as one shell word: a docker `-e` name with shell syntax (`A;curl x|sh;#`) is
    quoted with its value, never written bare."""
    if value is None:
        return _q(name)
    if not _ENV_NAME.fullmatch(name):
        return shlex.quote(f"{name}={value}")
    if is_secret_name(name):
        return f"{name}=${name}"
    return f"{name}={_q(value)}"


def _deep_update(into: dict[str, Any], update: dict[str, Any]) -> None:
    """FlexibleArgumentParser's recursive_dict_update: dicts merge, lists extend, else replace."""
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _deep_update(into[k], v)
        elif isinstance(v, list) and isinstance(into.get(k), list):
            into[k] = into[k] + v
        else:
            into[k] = v


def arg_tokens(a: Arg) -> list[str]:
    """The flag as shell words, values quoted, a credential as $NAME."""
    flag = shlex.quote(a.flag)  # a flag name read from a log (`non-default args:` keys) is data too
    if a.value is None:
        return [flag]
    env = secret_flag_env(a.flag)
    shown = [f"${env}" if env else _q(v) for v in a.values]
    if a.joined:
        return [f"{flag}={shown[0]}", *shown[1:]]
    return [flag, *shown]


def canonical_flag(token: str, schema: Schema) -> str:
    """vLLM's spelling of an option name: `_` -> `-` up to the first '.', aliases -> long name."""
    if token.startswith("--"):
        head, dot, rest = token[2:].partition(".")
        name = "--" + (head.replace("_", "-") if schema.rewrites.underscores else head) + dot + rest
    else:
        name = token
    base, dot, rest = name.partition(".")
    spec = schema.lookup(base)
    if spec is not None and not base.startswith("--no-"):
        base = spec.name
    return base + dot + rest


def _o_level(token: str, nxt: str | None, schema: Schema) -> tuple[str, str, int] | None:
    """-O3 / -O=3 / -O 3 -> (flag, level, tokens used) per the release's FlexibleArgumentParser."""
    target = schema.rewrites.o_level
    if target is None or not token.startswith("-O") or token.startswith("-O."):
        return None
    flag = (
        "--optimization-level" if target == "--optimization-level" else "--compilation-config." + target[3:]
    )
    if token == "-O":
        if nxt in ("0", "1", "2", "3"):
            return flag, nxt, 2
        return None
    return flag, token[3:] if token[2] == "=" else token[2:], 1


def split_args(
    tokens: Sequence[str], schema: Schema
) -> tuple[str | None, list[Arg], list[str], list[CliProblem]]:
    """(model, flags, stray positionals, problems) of the tokens after `vllm serve`, read as the
    schema's release would. Every token ends up in exactly one of model, flags and strays."""
    model: str | None = None
    args: list[Arg] = []
    extra: list[str] = []
    problems: list[CliProblem] = []
    release = schema.shown_version()
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if is_elision(tok):  # `...` in a paste: something left out, not an argument
            i += 1
        elif tok == "--":  # argparse: everything after is positional
            extra += tokens[i + 1 :]
            break
        elif not is_option(tok):
            if model is None:
                model = tok
            else:
                extra.append(tok)
                problems.append(CliProblem("stray-value", tok, f"{tok!r} is not the value of any flag"))
            i += 1
        else:
            arg, end, found = _read_option(tokens, i, schema, release)
            args.append(replace(arg, src=tuple(tokens[i:end])))
            problems += found
            i = end
    return model, args, extra, problems


def _read_option(
    tokens: Sequence[str], i: int, schema: Schema, release: str
) -> tuple[Arg, int, list[CliProblem]]:
    """The option at tokens[i] with its value as the release's argparse reads it, the index after
    them, and what that release objects to."""
    tok = tokens[i]
    nxt = tokens[i + 1] if i + 1 < len(tokens) else None
    level = _o_level(tok, nxt, schema)
    if level is not None:
        return Arg(level[0], level[1]), i + level[2], []
    name, eq, inline = tok.partition("=")
    flag = canonical_flag(name, schema)
    base = flag.partition(".")[0]
    spec = schema.lookup(base)
    if "." in flag and base.startswith("--"):  # dotted key: always one value (vLLM takes the next)
        problems = []
        if spec is None:
            problems.append(_unknown(base, release, schema))
        elif spec.value_type != "json":
            problems.append(CliProblem("not-json", base, f"{base} does not take dotted keys"))
        if eq:
            return Arg(flag, inline, joined=True), i + 1, problems
        if nxt is not None:
            return Arg(flag, nxt), i + 2, problems
        return (
            Arg(flag, None),
            i + 1,
            [*problems, CliProblem("missing-value", flag, f"{flag} expects a value")],
        )
    if spec is None:
        problems = [_unknown(flag, release, schema)]
        if eq:
            return Arg(flag, inline, joined=True), i + 1, problems
        if nxt is not None and not is_option(nxt):
            return Arg(flag, nxt), i + 2, problems  # unknown: a following non-option is its value
        return Arg(flag, None), i + 1, problems
    if not spec.takes_value:
        if eq:
            return Arg(flag, inline, joined=True), i + 1, [_bool_value(flag, inline)]
        if nxt is not None and nxt.lower() in ("true", "false"):
            return Arg(flag, nxt), i + 2, [_bool_value(flag, nxt)]  # vLLM: "unrecognized arguments: True"
        return Arg(flag, None), i + 1, []
    if eq:
        arg, end, problems = Arg(flag, inline, joined=True), i + 1, []
    else:
        arg, end, problems = _separate_value(tokens, i, flag, spec)
    return arg, end, problems + _value_problems(spec, flag, arg)


def _separate_value(
    tokens: Sequence[str], i: int, flag: str, spec: cli_schema.FlagSpec
) -> tuple[Arg, int, list[CliProblem]]:
    """A value-taking flag not written `--flag=value`: its next token, or every token up to the
    next option for an nargs="+"/"*" flag."""
    if spec.multi:
        j = i + 1
        while j < len(tokens) and not (is_option(tokens[j]) or tokens[j] == "--" or is_elision(tokens[j])):
            j += 1
        values = list(tokens[i + 1 : j])
        problems = []
        if not values and spec.nargs != "*":
            problems.append(CliProblem("missing-value", flag, f"{flag} expects at least one value"))
        return Arg(flag, values[0] if values else None, more=tuple(values[1:])), j, problems
    nxt = tokens[i + 1] if i + 1 < len(tokens) else None
    if nxt is not None and not is_option(nxt):
        return Arg(flag, nxt), i + 2, []
    if spec.optional_value:
        return Arg(flag, None), i + 1, []
    return Arg(flag, None), i + 1, [CliProblem("missing-value", flag, f"{flag} expects a value")]


def _unknown(flag: str, release: str, schema: Schema) -> CliProblem:
    where = cli_schema.releases_with(flag)
    if schema.version is None or not where:
        msg = f"`{flag}` is not a flag of any vLLM release kvops knows ({cli_schema.releases()[0]}.."
        msg += f"{cli_schema.releases()[-1]})"
    else:
        span = where[0] if len(where) == 1 else f"{where[0]}..{where[-1]}"
        minor = ".".join(release.split(".")[:2]) + ".x"
        msg = f"`{flag}` does not exist in vLLM {minor} (it exists in {span})"
    return CliProblem("unknown-flag", flag, msg)


def _bool_value(flag: str, value: str) -> CliProblem:
    want = flag if value.lower() not in ("false", "0", "no") else "--no-" + flag[2:]
    return CliProblem(
        "bool-with-value",
        flag,
        f"`{flag} {value}`: {flag} takes no value, vLLM stops with 'unrecognized arguments'; write {want}",
    )


_EXPANSION = re.compile(r"\$(?:[A-Za-z_]\w*|\{[^}]*\}|\()")


def _value_problems(spec: cli_schema.FlagSpec, flag: str, arg: Arg) -> list[CliProblem]:
    out = []
    for value in arg.values:
        if _EXPANSION.search(value):
            continue  # `$MAX_LEN`, `${X}`, `$(cmd)`: the shell's value, unknown here
        if spec.choices and value not in spec.choices and spec.value_type != "json":
            shown = ", ".join(spec.choices[:12]) + (", ..." if len(spec.choices) > 12 else "")
            out.append(CliProblem("bad-choice", flag, f"{flag} {value!r} is not one of: {shown}"))
        elif spec.value_type == "json" and value.lstrip().startswith(("{", "[")):
            try:
                json.loads(value)
            except json.JSONDecodeError as exc:
                out.append(CliProblem("bad-json", flag, f"{flag} is not valid JSON: {exc}"))
        elif spec.value_type in ("int", "float") and not re.fullmatch(
            r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?[kKmMgGtT]?[iI]?", value
        ):
            out.append(CliProblem("bad-number", flag, f"{flag} {value!r} is not a number"))
    return out


def split(text: str) -> list[str]:
    """The tokens of the vLLM command hidden in `text` (see serve_line.py)."""
    return serve_line.extract(text)


def parse(text: str, version: str | None = None) -> ServeCommand:
    """Parse a serve command with `version`'s flag table (None: any release's); UsageError (one
    line) when no vLLM command can be found in it."""
    return replace(parse_tokens(split(text), version), pasted=serve_line.clean(text))


def parse_tokens(tokens: list[str], version: str | None = None) -> ServeCommand:
    tokens = list(tokens)
    env: list[tuple[str, str | None]] = []
    env_src: list[tuple[str, tuple[str, ...]]] = []
    while tokens and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", tokens[0]):
        token = tokens.pop(0)
        name, _, value = token.partition("=")
        env.append((name, value))
        env_src.append((name, (token,)))
    if not tokens:
        raise UsageError("--cmd is empty")
    schema = cli_schema.for_version(version)
    if tokens[0].split("/")[-1] in ("docker", "podman") and len(tokens) > 1 and tokens[1] == "run":
        return _parse_docker(tokens[2:], env, schema, env_src)
    launch, rest = _split_launch(tokens)
    if launch is None:
        raise UsageError(
            "--cmd is not a vllm serve, python -m vllm.entrypoints.openai.api_server or docker run line"
        )
    launcher = "vllm-serve" if "serve" in launch else "api-server"
    if engines.other_launch(launch) is not None:
        launcher = engines.engine_of(launch)
    return replace(_command(launcher, launch, rest, env, schema), env_src=tuple(env_src))


def _command(
    launcher: str,
    launch: tuple[str, ...],
    rest: list[str],
    env: list[tuple[str, str | None]],
    schema: Schema,
    **docker: Any,
) -> ServeCommand:
    elided = bool(docker.pop("elided", False))
    model, args, extra, problems = split_args(rest, schema)
    config_args: list[Arg] = []
    config_file = next((a.value for a in args if a.flag == "--config" and a.value), None)
    if config_file and schema.rewrites.config_yaml:
        from_file = config_tokens(config_file)
        if from_file is not None:
            _, config_args, _, in_file = split_args(from_file, schema)
            problems += [replace(p, message=f"in --config {config_file}: {p.message}") for p in in_file]
    unknown = tuple(dict.fromkeys(p.flag for p in problems if p.kind == "unknown-flag"))
    return ServeCommand(
        launcher,
        launch,
        model,
        tuple(args),
        tuple(env),
        unknown_flags=unknown,
        extra=tuple(extra),
        problems=tuple(problems),
        schema_version=schema.version,
        schema_note=schema.note,
        tokens=tuple(rest),
        config_args=tuple(config_args),
        elided=elided or any(is_elision(t) for t in rest),
        **docker,
    )


def config_tokens(path: str) -> list[str] | None:
    """A `--config` YAML file as FlexibleArgumentParser.load_config_file turns it into flags
    (True -> --key, False -> nothing, a list -> --key item...); None when it cannot be read here."""
    import yaml

    from kvops.doctor.reading import yaml_bounded

    if not path.endswith((".yaml", ".yml")):
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml_bounded.load(fh.read(1 << 20))  # aliases bounded: a bomb is not readable
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(data, dict):
        return None
    out: list[str] = []
    for key, value in data.items():
        if isinstance(value, bool):
            out += [f"--{key}"] if value else []
        elif isinstance(value, list):
            out += [f"--{key}", *map(str, value)] if value else []
        else:
            out += [f"--{key}", str(value)]
    return out


def reparse(cmd: ServeCommand, version: str | None) -> ServeCommand:
    """The same command read with another release's flag table (fixes already applied are lost:
    call this before with_fix)."""
    schema = cli_schema.for_version(version)
    if (schema.version == cmd.schema_version and schema.note == cmd.schema_note) or not cmd.tokens:
        return cmd
    fresh = _command(cmd.launcher, cmd.launch, list(cmd.tokens), list(cmd.env), schema)
    return replace(
        fresh,
        docker_opts=cmd.docker_opts,
        image=cmd.image,
        pasted=cmd.pasted,
        env_src=cmd.env_src,
        elided=cmd.elided or fresh.elided,
    )


def _split_launch(tokens: list[str]) -> tuple[tuple[str, ...] | None, list[str]]:
    other = engines.other_launch(tokens)
    if other is not None:
        return tuple(tokens[: other[1]]), tokens[other[1] :]
    if len(tokens) >= 2 and tokens[0].endswith("vllm") and tokens[1] == "serve":
        return tuple(tokens[:2]), tokens[2:]
    python_m = len(tokens) >= 3 and re.search(r"python[\d.]*$", tokens[0]) and tokens[1] == "-m"
    if python_m and tokens[2].startswith("vllm.entrypoints"):
        n = 4 if tokens[2].endswith("cli.main") and len(tokens) > 3 and tokens[3] == "serve" else 3
        return tuple(tokens[:n]), tokens[n:]
    return None, tokens


docker_image_index = docker_run.image_index


def _parse_docker(
    tokens: list[str],
    env: list[tuple[str, str | None]],
    schema: Schema,
    env_src: list[tuple[str, tuple[str, ...]]],
) -> ServeCommand:
    opts: list[Arg] = []
    elided = False
    i = 0
    while i < len(tokens) and (tokens[i].startswith("-") or is_elision(tokens[i])):
        if is_elision(tokens[i]):  # `docker run ... IMAGE`: options left out, not the image
            elided = True
            i += 1
            continue
        first = i
        name, eq, written = tokens[i].partition("=")
        value: str | None = written
        if not eq and name in _DOCKER_VALUE_OPTS and i + 1 < len(tokens):
            value = tokens[i + 1]
            i += 1
        elif not eq:
            value = None
        if name in ("-e", "--env"):
            k, sep, v = (value or "").partition("=")
            env.append((k, v if sep else None))
            env_src.append((k, tuple(tokens[first : i + 1])))
        else:
            opts.append(Arg(name, value, joined=bool(eq), src=tuple(tokens[first : i + 1])))
        i += 1
    if i >= len(tokens):
        raise UsageError("--cmd: docker run line has no image")
    image = tokens[i]
    rest = tokens[i + 1 :]
    launch, after = _split_launch(rest)
    entry = next((o.value for o in opts if o.flag == "--entrypoint" and o.value), None)
    if launch is None and entry:  # --entrypoint python3 IMAGE -m vllm.entrypoints...: the image's args
        with_entry, after_entry = _split_launch([entry, *rest])
        if with_entry is not None:
            launch, after = with_entry[1:], after_entry
    if launch is not None:
        rest = after
    cmd = _command(
        "docker", launch or (), rest, env, schema, docker_opts=tuple(opts), image=image, elided=elided
    )
    return replace(cmd, env_src=tuple(env_src))


# NAME=value where NAME is a credential by credentials.py's list; key: value / key=value for a few
# lower-case words; vLLM's credential flags (all values of --api-key, which takes several). Whitespace
# alone never separates a name from a value, so prose ("tokens per block") is left alone.
_ENV_ASSIGN = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=(?![$])([^\s'\",;]+)")
_SECRET_WORD_ASSIGN = re.compile(
    r"(?i)(?<![\w-])(password|passwd|secret|api[_-]?key|token|access[_-]?token|auth[_-]?token)"
    r"(\s*[:=]\s*)(?![$\s])([^\s,;'\"]+)"
)
_SECRET_FLAG = re.compile(r"(?i)(--(?:api[-_]key|hf[-_]token))((?:(?:=|\s+)(?![$-])[^\s'\",;]+)+)")
# 'api_key': ['sk-...', 'k2'] / "hf_token": "hf_..." in a logged dict or JSON (vLLM's non-default args).
_SECRET_KEYS = (
    r"api_key|api-key|hf_token|hf-token|token|password|passwd|secret|[\w-]*_api_key|access_token|auth_token"
)
_SECRET_QUOTED = re.compile(rf"""(?i)(['"])({_SECRET_KEYS})\1(\s*:\s*)(\[[^\]]*\]|(['"])[^'"]*\5)""")
_QUOTED_STRING = re.compile(r"""(['"])(?![$])[^'"]*\1""")


def secret_values(cmd: ServeCommand | None) -> dict[str, str]:
    """value -> $NAME for every secret the command carries (env and vLLM's credential flags)."""
    out: dict[str, str] = {}
    if cmd is None:
        return out
    for name, value in cmd.env:
        if value and is_secret_name(name):
            out[value] = f"${name}"
    for a in cmd.effective_args():
        env = secret_flag_env(a.flag)
        for value in a.values if env else ():
            out[value] = f"${env}"
    # words after a credential flag that this release does not take as its values (0.10's
    # --api-key takes one): still the user's keys, never shown
    env = None
    for tok in cmd.tokens:
        if is_option(tok):
            name, eq, value = tok.partition("=")
            env = secret_flag_env(name)
            if env and eq and value:
                out.setdefault(value, f"${env}")
        elif env:
            out.setdefault(tok, f"${env}")
    return out


def redact_text(text: str, known: Mapping[str, str] | None = None) -> str:
    """Hide secrets in free text (log lines, evidence): known values, NAME=value, token shapes."""
    for value, name in sorted((known or {}).items(), key=lambda kv: -len(kv[0])):
        if len(value) >= 4:
            text = text.replace(value, name)

    def env_assign(m: re.Match[str]) -> str:
        return f"{m.group(1)}=${m.group(1)}" if is_secret_name(m.group(1)) else m.group(0)

    def flag_assign(m: re.Match[str]) -> str:
        env = secret_flag_env(m.group(1))
        values = re.sub(r"(?<=[=\s])[^\s=]+", f"${env}", m.group(2))
        return f"{m.group(1)}{values}"

    def quoted(m: re.Match[str]) -> str:
        key = m.group(2)
        shown = secret_flag_env("--" + key) or key.upper().replace("-", "_")
        value = _QUOTED_STRING.sub(lambda q: f"{q.group(1)}${shown}{q.group(1)}", m.group(4))
        return f"{m.group(1)}{key}{m.group(1)}{m.group(3)}{value}"

    text = _SECRET_QUOTED.sub(quoted, text)
    text = _ENV_ASSIGN.sub(env_assign, text)
    text = _SECRET_FLAG.sub(flag_assign, text)
    text = _SECRET_WORD_ASSIGN.sub(lambda m: f"{m.group(1)}{m.group(2)}${m.group(1).upper()}", text)
    text = credentials.BEARER.sub(lambda m: f"{m.group(1)}$REDACTED", text)
    return credentials.TOKEN_SHAPE.sub("$REDACTED", text)


_LOGGED_PAIR = re.compile(r"'(\w+)': ('[^']*'|-?[\d.]+(?:e-?\d+)?|True|False|None)")
_MAX_DIGITS = 40  # no vLLM argument is a number this long; a longer one is not a value to print back


def _logged_dict(text: str) -> dict[Any, Any]:
    """The logged dict: a Python literal, else its literal-looking pairs (a value that is an
    object's repr is left out). UsageError (one line, the log's text shown visibly) when a pair
    is not a literal (`1.2.3`), or a number is too long or not finite."""
    import ast

    try:
        values = ast.literal_eval(text.strip())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        if isinstance(exc, (MemoryError, RecursionError)) or "nested" in str(exc):
            raise UsageError("it is nested too deeply to read") from None
        values = {}
        for key, raw in _LOGGED_PAIR.findall(text):
            if len(raw) > _MAX_DIGITS and not raw.startswith("'"):
                raise UsageError(f"{key!r} is a number of {len(raw):,} characters") from None
            try:
                values[key] = ast.literal_eval(raw)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                raise UsageError(f"{key!r}: {visible(raw[:40])} is not a Python literal") from None
    if not isinstance(values, dict):
        return {}
    for key, value in values.items():
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**_MAX_DIGITS:
            raise UsageError(f"{visible(str(key)[:60])!r} is a number of more than {_MAX_DIGITS} digits")
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"{visible(str(key)[:60])!r} is {value} (not a finite number)")
    return values


def from_non_default_args(text: str) -> ServeCommand | None:
    """Rebuild a `vllm serve` line from vLLM's `non-default args: {...}` start-up log line.

    The dict is a Python repr; values that are objects (not literals) are skipped. UsageError
    when the line cannot be read (see _logged_dict); a key with shell syntax stays a word,
    quoted when printed (arg_tokens).
    """
    values = _logged_dict(text)
    if not values:
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
            try:
                args.append(Arg(flag, json.dumps(value)))
            except (RecursionError, ValueError, TypeError):  # nested past what json writes, or not JSON
                raise UsageError(f"{visible(flag[:60])}'s value cannot be written as JSON") from None
        elif isinstance(value, (list, tuple)):
            if value:  # nargs="+" flags log a list: keep every value
                args.append(Arg(flag, str(value[0]), more=tuple(str(v) for v in value[1:])))
        else:
            args.append(Arg(flag, str(value)))
    return ServeCommand("vllm-serve", ("vllm", "serve"), str(model) if model else None, tuple(args))
