"""Evaluate a playbook's `conditions` against what doctor knows: model, command, version, this host.

Each condition answers True, False or None (cannot tell). All must hold; a None turns an error
into a warning that says what could not be checked. Conditions about an input doctor was not
given (no --model, no --cmd) make the playbook not apply at all: doctor never guesses a command.

One registry: every `conditions:` key is a function registered with `@condition` below (with the
input it needs and how its value is validated when playbooks load), every `check:` name is in
CHECKS, and every `{value}` a fix can name is a `@fix_value`. A new rule is one entry here; a new
signature is one playbook file. Keys (see each function's docstring):
  attention / not_attention: [mla, dsa, hybrid, sliding_window, gqa, mha]   (needs --model)
  moe: true                                                                 (needs --model)
  offloading: [native | lmcache | any]          flags_set / flags_unset: [--flag]   (needs --cmd)
  flag_value_not: {--flag: value}    (the flag is given with another value)         (needs --cmd)
  offloading_if_known: [...]         (like offloading, but true when no --cmd was given)
  env_on / env_not_off: [NAME]       (the command's env, else this host's env under --here)
  platform: [cuda | rocm]            (the command's image/env, else this host under --here)
  vllm_version: ">=0.12.0,<0.18.0"   vllm_version_known: (same; silent when the version is unknown)
  here: true (judges this machine: only with --here)
  engine: [vllm | sglang | dynamo]   (the command's engine; without this key: vllm only)
  vllm_source: {offloading_layer_filter: Attention}   (read from the installed vllm when it is
                                     the judged version; holds when nothing can be read)
  kernel_below: "5.14"   memlock_limited: true   check: <named arithmetic check below>
  any_of: [{...}, {...}]             (one of the nested groups holds)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvops.doctor.judging.cli_checks import check_serve_flags, check_serve_flags_unverified
from kvops.doctor.judging.judgement import Context, Verdict
from kvops.doctor.reading.cmdline import ServeCommand
from kvops.termsafe import visible
from kvops.units import GIB, docker_size

DOCKER_DEFAULT_SHM = 64 << 20  # docker's default /dev/shm
MEASURED_FOOTPRINT_FACTOR = 1.92  # vllm#53042
_ON = {"1", "true", "yes", "on"}
_OFF = {"0", "false", "no", "off"}


def version_tuple(text: str) -> tuple[int, int, int] | None:
    # bounded digit runs: a 5,000-digit "version" is not a release (and int() would refuse it)
    m = re.match(r"v?(\d{1,6})\.(\d{1,6})(?:\.(\d{1,6}))?(?!\d)", text.strip()[:64])
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def version_matches(version: str, spec: str) -> bool | None:
    v = version_tuple(version)
    if v is None:
        return None
    for clause in spec.split(","):
        m = re.fullmatch(r"\s*(>=|<=|==|<|>)\s*([\d.]+)\s*", clause)
        if not m:
            raise ValueError(f"bad version clause {clause!r}")
        bound = version_tuple(m.group(2))
        assert bound is not None
        op = m.group(1)
        ok = {
            ">=": v >= bound,
            "<=": v <= bound,
            "==": v == bound,
            "<": v < bound,
            ">": v > bound,
        }[op]
        if not ok:
            return False
    return True


def _env(ctx: Context) -> dict[str, str] | None:
    if ctx.cmd is not None:
        return ctx.cmd.env_dict()
    if ctx.platform is not None:
        return dict(ctx.platform.env)
    return None


def _platform(ctx: Context) -> str | None:
    if ctx.cmd is not None and ctx.cmd.platform_hint():
        return ctx.cmd.platform_hint()
    if ctx.platform is not None and ctx.platform.vendor in ("nvidia", "amd"):
        return {"nvidia": "cuda", "amd": "rocm"}[ctx.platform.vendor]
    return None


# ---- named arithmetic checks ---------------------------------------------------------------


def _check_aiter_moe_shape(ctx: Context) -> Verdict:
    m, cmd = ctx.model, ctx.cmd
    if m is None or cmd is None:
        return Verdict(None, applies=False)
    if not m.moe_intermediate_size:
        return Verdict(None, unknown=["moe_intermediate_size not in the config"])
    tp = cmd.tensor_parallel_size()
    per_rank = m.moe_intermediate_size / tp
    ev = f"moe_intermediate_size {m.moe_intermediate_size} / TP {tp} = {per_rank:g} per rank"
    if per_rank != int(per_rank) or int(per_rank) % 256:
        return Verdict(True, evidence=[ev + ", not a multiple of 256 (CK fused-MoE heuristic, PR #35893)"])
    return Verdict(False, evidence=[ev])


def _check_aiter_mla_heads(ctx: Context) -> Verdict:
    m, cmd = ctx.model, ctx.cmd
    if m is None or cmd is None:
        return Verdict(None, applies=False)
    tp = cmd.tensor_parallel_size()
    per_rank = m.num_attention_heads / tp
    ev = f"{m.num_attention_heads} heads / TP {tp} = {per_rank:g} per rank"
    return Verdict(per_rank not in (16, 128), evidence=[ev + " (AITER MLA supports 16 or 128)"])


def _cmd_and_offload_gib(ctx: Context) -> tuple[ServeCommand, float] | Verdict:
    """The command and its --kv-offloading-size in GiB, which the shm and host-RAM checks
    compare with a size; or their verdict without one: no command (the check does not apply),
    no size in it (unknown)."""
    cmd = ctx.cmd
    if cmd is None:
        return Verdict(None, applies=False)
    size = cmd.offloading_size_gib()
    if size is None:
        return Verdict(None, unknown=["offload size not in the command"])
    return cmd, size


def _check_shm_too_small(ctx: Context) -> Verdict:
    offloading = _cmd_and_offload_gib(ctx)
    if isinstance(offloading, Verdict):
        return offloading
    cmd, size = offloading
    need = size * GIB
    if cmd.launcher == "docker" and (cmd.docker_opt("--ipc") or cmd.docker_opt("--shm-size")):
        if cmd.docker_opt("--ipc") == "host":
            return Verdict(False, evidence=["docker --ipc=host shares the host's /dev/shm"])
        raw = cmd.docker_opt("--shm-size")
        if raw is None:
            return Verdict(None, unknown=[f"/dev/shm under --ipc={cmd.docker_opt('--ipc')}"])
        shm = docker_size(raw)
        if shm is None:
            return Verdict(None, unknown=[f"cannot read --shm-size {raw!r}"])
        ev = f"container /dev/shm {shm / GIB:.2f} GiB (--shm-size {raw})"
        return Verdict(
            shm < need, evidence=[f"{ev} < --kv-offloading-size {size:g} GiB" if shm < need else ev]
        )
    if ctx.shm_bytes is not None:
        ev = f"{ctx.shm_source} {ctx.shm_bytes / GIB:.1f} GiB; --kv-offloading-size is {size:g} GiB"
        return Verdict(ctx.shm_bytes < need, evidence=[ev])
    if ctx.platform is not None and ctx.platform.shm_free_bytes is not None:
        free = ctx.platform.shm_free_bytes
        ev = f"this host's /dev/shm has {free / GIB:.1f} GiB free; --kv-offloading-size is {size:g} GiB"
        return Verdict(free < need, evidence=[ev])
    if cmd.launcher == "docker":
        # Docker's default /dev/shm is 64 MiB, but a paste often elides options (`docker run ... IMAGE`)
        # and compose files and daemon.json set their own: the size is a premise, not a fact
        return Verdict(
            None,
            unknown=[
                f"/dev/shm of the container: the docker line shows neither --shm-size nor --ipc (Docker's"
                f" default is {DOCKER_DEFAULT_SHM >> 20} MiB, below --kv-offloading-size {size:g} GiB, if"
                " nothing else sets it); confirm with `df -h /dev/shm` inside it, or pass --shm"
            ],
            tentative=True,
        )
    return Verdict(None, unknown=["/dev/shm of the serving host (run doctor there with --here, or --shm)"])


def _check_cpu_offload_is_kv(ctx: Context) -> Verdict:
    """--cpu-offload-gb misread as KV offloading: the user's words asking for KV offloading, or
    weights that fit without it (checkpoint or loaded size vs the GPU's memory). Weights that do not
    fit make it right (no finding: removing it would break the start-up); no evidence either way
    is a tentative premise (an `info` saying what would tell)."""
    cmd = ctx.cmd
    if cmd is None:
        return Verdict(None, applies=False)
    from kvops.doctor.reading import weights

    if "kv_intent" in ctx.log_facts:
        n, line = ctx.log_facts["kv_intent"]
        return Verdict(
            True, evidence=[f"the report asks for KV offloading (line {n}): {visible(line.strip()[:160])}"]
        )
    tp = cmd.tensor_parallel_size()
    try:
        offload = float(cmd.get("--cpu-offload-gb") or 0) * GIB
    except ValueError:
        offload = 0.0
    per_gpu, where = None, ""
    estimated = False
    if ctx.model is not None:
        found = weights.checkpoint_bytes(ctx.model.path)
        if found is None:
            found = _config_estimate(ctx.model.path)
            estimated = found is not None
        if found is not None:
            per_gpu, where = found[0] / tp, f"{found[1]}: {found[0] / GIB:.1f} GiB / TP {tp}"
    if per_gpu is None and "weights_loaded" in ctx.log_facts:
        loaded = weights.loaded_bytes_in(ctx.log_facts["weights_loaded"][1])
        if loaded is not None and math.isfinite(offload):
            per_gpu = loaded + offload
            where = f"vLLM loaded {loaded / GIB:.1f} GiB per GPU + {offload / GIB:g} GiB --cpu-offload-gb"
    gpu, gpu_where = None, ""
    if ctx.platform is not None and ctx.platform.gpu_memory_bytes:
        gpu, gpu_where = ctx.platform.gpu_memory_bytes, "this host's GPU"
    elif "gpu_memory" in ctx.log_facts:
        gpu = weights.gpu_bytes_in(ctx.log_facts["gpu_memory"][1])
        gpu_where = f"log line {ctx.log_facts['gpu_memory'][0]}"
    if per_gpu is not None and gpu is None and per_gpu > weights.LARGEST_GPU:
        ev = f"weights {per_gpu / GIB:.0f} GiB per GPU ({where}): more than any GPU holds (288 GB)"
        return Verdict(False, evidence=[ev + ": the weights need --cpu-offload-gb"])
    if per_gpu is None or gpu is None:
        missing = [
            *(["the weights' size (--model DIR with its safetensors)"] if per_gpu is None else []),
            *(["the GPUs' memory (run doctor on the GPU host with --here)"] if gpu is None else []),
        ]
        return Verdict(
            None,
            unknown=[
                "whether the weights fit in GPU memory without --cpu-offload-gb, which would make this a"
                f" misread KV-offloading flag: needs {' and '.join(missing)}, or the report's own words"
                " asking for KV offloading"
            ],
            tentative=True,
        )
    budget = gpu * weights.DEFAULT_UTILIZATION * weights.FITS_SHARE
    ev = (
        f"weights {per_gpu / GIB:.1f} GiB per GPU ({where}) vs {gpu / GIB:.0f} GiB GPU ({gpu_where}) x"
        f" {weights.DEFAULT_UTILIZATION} utilisation x {weights.FITS_SHARE} left for weights"
        f" = {budget / GIB:.1f} GiB"
    )
    if per_gpu <= budget:
        return Verdict(True, evidence=[ev + ": they fit without --cpu-offload-gb"])
    if not estimated or per_gpu > gpu:
        return Verdict(False, evidence=[ev + ": the weights need --cpu-offload-gb"])
    return Verdict(  # an estimate between the two bounds: not enough to claim either way
        None,
        unknown=[ev + ": too close to call from config.json; the checkpoint's size would tell"],
        tentative=True,
    )


def _config_estimate(path: str) -> tuple[int, str] | None:
    from kvops.doctor.reading import weights
    from kvops.doctor.reading.modelcfg import read_config
    from kvops.errors import UsageError

    try:
        return weights.config_bytes(read_config(path)[1])
    except (UsageError, OSError):
        return None


def _check_host_ram(ctx: Context) -> Verdict:
    offloading = _cmd_and_offload_gib(ctx)
    if isinstance(offloading, Verdict):
        return offloading
    cmd, size = offloading
    footprint = size * GIB * MEASURED_FOOTPRINT_FACTOR
    limit_raw = cmd.docker_opt("-m", "--memory") if cmd.launcher == "docker" else None
    if limit_raw:
        limit = docker_size(limit_raw)
        if limit is None:
            return Verdict(None, unknown=[f"cannot read --memory {limit_raw!r}"])
        source = f"docker --memory {limit_raw}"
    elif ctx.host_ram_bytes is not None:
        limit = ctx.host_ram_bytes
        source = "--host-ram"
    elif ctx.platform is not None and ctx.platform.host_ram_bytes is not None:
        limit = min(
            ctx.platform.host_ram_bytes, ctx.platform.memory_limit_bytes or ctx.platform.host_ram_bytes
        )
        source = "this host's memory"
    else:
        return Verdict(
            None, unknown=["memory of the serving host (run doctor there with --here, or --host-ram)"]
        )
    ev = (
        f"--kv-offloading-size {size:g} GiB x {MEASURED_FOOTPRINT_FACTOR} measured footprint ="
        f" {footprint / GIB:.0f} GiB vs {source} = {limit / GIB:.0f} GiB"
    )
    return Verdict(footprint > limit, evidence=[ev])


def _check_offload_config(ctx: Context) -> Verdict:
    cmd = ctx.cmd
    if cmd is None:
        return Verdict(None, applies=False)
    problems = []
    backend = cmd.get("--kv-offloading-backend")
    if backend is not None and backend not in ("native", "lmcache"):
        problems.append(f"--kv-offloading-backend {backend!r} is not native or lmcache")
    if backend is not None and cmd.get("--kv-offloading-size") is None:
        problems.append("--kv-offloading-backend without --kv-offloading-size does not enable offloading")
    cfg = cmd.kv_transfer_config()
    if cfg and cfg.get("kv_connector") == "OffloadingConnector":
        extra = cfg.get("kv_connector_extra_config") or {}
        if not isinstance(extra, dict) or not ({"cpu_bytes_to_use", "num_cpu_blocks"} & set(extra)):
            problems.append("OffloadingConnector JSON has neither cpu_bytes_to_use nor num_cpu_blocks")
        elif "block_size" in extra and "blocks_per_chunk" in extra:
            problems.append("OffloadingConnector JSON sets both block_size and blocks_per_chunk")
    return Verdict(bool(problems), evidence=problems)


# ---- one registry: a new rule is one decorated function ---------------------------------------
# Playbooks name conditions (`conditions:` keys), arithmetic checks (`check: <name>`) and fix
# values (`{name}` inside a fix's `add` tokens); each is registered here once, next to its code.


@dataclass(frozen=True)
class Condition:
    name: str
    evaluate: Callable[[Any, Context, bool], Verdict]
    needs: str | None = None  # "model" | "cmd": without that input the playbook does not apply
    validate: Callable[[Any], list[str]] | None = None
    soft_unknown: bool = False  # "cannot tell" here only demotes an error to a warning
    doc: str = ""


CONDITIONS: dict[str, Condition] = {}
CHECKS: dict[str, Callable[[Context], Verdict]] = {
    "aiter-moe-shape": _check_aiter_moe_shape,
    "aiter-mla-heads": _check_aiter_mla_heads,
    "shm-too-small": _check_shm_too_small,
    "host-ram-too-small": _check_host_ram,
    "cpu-offload-is-kv": _check_cpu_offload_is_kv,
    "offload-config-invalid": _check_offload_config,
    "serve-flags": check_serve_flags,
    "serve-flags-unverified": check_serve_flags_unverified,
}
FIX_VALUES: dict[str, Callable[[Context], tuple[str | None, str]]] = {}


def condition(
    name: str,
    needs: str | None = None,
    validate: Callable[[Any], list[str]] | None = None,
    soft_unknown: bool = False,
) -> Callable[[Callable[[Any, Context, bool], Verdict]], Callable[[Any, Context, bool], Verdict]]:
    def register(fn: Callable[[Any, Context, bool], Verdict]) -> Callable[[Any, Context, bool], Verdict]:
        CONDITIONS[name] = Condition(name, fn, needs, validate, soft_unknown, (fn.__doc__ or "").strip())
        return fn

    return register


def fix_value(name: str) -> Callable[[Callable[[Context], tuple[str | None, str]]], Any]:
    """A value a playbook's fix can name as `{name}`: (value or None, how it was chosen)."""

    def register(fn: Callable[[Context], tuple[str | None, str]]) -> Any:
        FIX_VALUES[name] = fn
        return fn

    return register


def _list_of_str(want: Any) -> list[str]:
    ok = isinstance(want, list) and all(isinstance(w, str) for w in want)
    return [] if ok else [f"expects a list of strings, got {type(want).__name__}"]


@condition("attention", needs="model", validate=_list_of_str)
def _attention(want: Any, ctx: Context, here: bool) -> Verdict:
    """the model's attention is one of [mla, dsa, hybrid, sliding_window, gqa, mha]"""
    m = ctx.model
    assert m is not None
    hit = sorted(set(want) & m.kinds)
    shown = f"attention {m.attention}" + (f" ({', '.join(hit)})" if hit != [m.attention] else "")
    return Verdict(bool(hit), evidence=[f"model {visible(m.model_type)}: {shown}"] if hit else [])


@condition("not_attention", needs="model", validate=_list_of_str)
def _not_attention(want: Any, ctx: Context, here: bool) -> Verdict:
    """the model's attention is none of these"""
    assert ctx.model is not None
    return Verdict(not (set(want) & ctx.model.kinds))


@condition("moe", needs="model")
def _moe(want: Any, ctx: Context, here: bool) -> Verdict:
    """the model is (true) or is not (false) a mixture of experts"""
    m = ctx.model
    assert m is not None
    return Verdict(m.is_moe == bool(want), evidence=[f"MoE with {m.num_experts} experts"] if m.is_moe else [])


def _offloading_verdict(want: Any, ctx: Context) -> Verdict:
    cmd = ctx.cmd
    if cmd is None:
        return Verdict(True)
    kind = cmd.offloading()
    hit = kind is not None and ("any" in want or kind in want)
    connector = visible(cmd.connector())
    return Verdict(hit, evidence=[f"command enables {connector} ({visible(kind)} offloading)"] if hit else [])


@condition("offloading", needs="cmd", validate=_list_of_str)
def _offloading(want: Any, ctx: Context, here: bool) -> Verdict:
    """the command offloads KV with [native | lmcache | any]"""
    return _offloading_verdict(want, ctx)


@condition("offloading_if_known", validate=_list_of_str)
def _offloading_if_known(want: Any, ctx: Context, here: bool) -> Verdict:
    """like offloading, but holds when no --cmd was given"""
    return _offloading_verdict(want, ctx)


@condition("flags_set", needs="cmd", validate=_list_of_str)
def _flags_set(want: Any, ctx: Context, here: bool) -> Verdict:
    """the command sets one of these flags"""
    assert ctx.cmd is not None
    hit = [f for f in want if ctx.cmd.has(f)]
    return Verdict(bool(hit), evidence=[f"command sets {f}" for f in hit])


@condition("flags_unset", needs="cmd", validate=_list_of_str)
def _flags_unset(want: Any, ctx: Context, here: bool) -> Verdict:
    """the command sets none of these flags"""
    assert ctx.cmd is not None
    return Verdict(not any(ctx.cmd.has(f) for f in want))


@condition("flag_value_not", needs="cmd")
def _flag_value_not(want: Any, ctx: Context, here: bool) -> Verdict:
    """{--flag: value}: the flag is given with another value"""
    assert ctx.cmd is not None
    for flag, value in want.items():
        given = ctx.cmd.get(flag)
        if given is None or given == str(value):
            return Verdict(False)
        return Verdict(True, evidence=[f"command sets {flag} {visible(given)} (needs {value})"])
    return Verdict(False)


def _env_condition(want: Any, ctx: Context, on: bool) -> Verdict:
    env = _env(ctx)
    if env is None:
        return Verdict(None, applies=False)
    # env names are matched case-insensitively: people paste `vllm_rocm_use_aiter=1` too
    upper = {k.upper(): v for k, v in env.items()}
    for name in want:
        value = upper.get(name.upper(), "").strip().lower()
        if (value not in _ON) if on else (value in _OFF):
            return Verdict(False)
    return Verdict(True, evidence=[f"{n}={visible(upper[n.upper()])}" for n in want if n.upper() in upper])


@condition("env_on", validate=_list_of_str)
def _env_on(want: Any, ctx: Context, here: bool) -> Verdict:
    """these env variables are on (the command's env, else this host's under --here)"""
    return _env_condition(want, ctx, on=True)


@condition("env_not_off", validate=_list_of_str)
def _env_not_off(want: Any, ctx: Context, here: bool) -> Verdict:
    """these env variables are not explicitly off"""
    return _env_condition(want, ctx, on=False)


@condition("platform", validate=_list_of_str, soft_unknown=True)
def _platform_cond(want: Any, ctx: Context, here: bool) -> Verdict:
    """[cuda | rocm], from the command's image/env, else this host under --here"""
    plat = _platform(ctx)
    if plat is None:
        return Verdict(None, unknown=[f"platform ({' or '.join(want)})"])
    return Verdict(plat in want, evidence=[f"platform {plat}"])


def _version_problems(want: Any) -> list[str]:
    try:
        version_matches("0.0.0", str(want))
    except ValueError as exc:
        return [str(exc)]
    return []


@condition("vllm_version", validate=_version_problems, soft_unknown=True)
def _vllm_version(want: Any, ctx: Context, here: bool) -> Verdict:
    """the judged vLLM release is in this range, e.g. ">=0.12.0,<0.18.0\""""
    if ctx.version is None:
        return Verdict(None, unknown=[f"vLLM version (applies to vLLM {want})"])
    ok = version_matches(ctx.version, str(want))
    shown = visible(ctx.version)
    if ok is None:
        return Verdict(None, unknown=[f"vLLM version {shown!r} unreadable (applies to {want})"])
    return Verdict(ok, evidence=[f"vLLM {shown} ({ctx.version_source}) is in {want}"] if ok else [])


@condition("vllm_version_known", validate=_version_problems)
def _vllm_version_known(want: Any, ctx: Context, here: bool) -> Verdict:
    """like vllm_version, but the playbook does not apply at all when the version is unknown"""
    if ctx.version is None:
        return Verdict(None, applies=False)
    ok = version_matches(ctx.version, str(want))
    if ok is None:
        return Verdict(None, applies=False)
    shown = visible(ctx.version)
    return Verdict(ok, evidence=[f"vLLM {shown} ({ctx.version_source}) is in {want}"] if ok else [])


@condition("vllm_source")
def _vllm_source(want: Any, ctx: Context, here: bool) -> Verdict:
    """{offloading_layer_filter: Attention}: read from the installed vllm when it is the judged one"""
    if ctx.vllm_root is None:
        return Verdict(True)  # no installed source to read: the version rule decides
    from kvops.doctor.reading.vllm_source import offloading_layer_filter

    for fact, value in want.items():
        if fact != "offloading_layer_filter":
            return Verdict(None, unknown=[f"unknown vllm_source fact {fact!r} in playbook"])
        found = offloading_layer_filter(ctx.vllm_root)
        if found is None:
            return Verdict(True)
        where = f"installed vllm at {ctx.vllm_root}"
        if found != value:
            return Verdict(False, evidence=[f"{where} looks offloaded layers up by {found}"])
        return Verdict(True, evidence=[f"{where}: register_kv_caches looks layers up by {found}"])
    return Verdict(True)


@condition("engine", validate=_list_of_str)
def _engine(want: Any, ctx: Context, here: bool) -> Verdict:
    """the command starts one of [vllm | sglang | dynamo]; a playbook without this key judges vLLM
    commands only (an SGLang line has other flags and other failures)"""
    if ctx.cmd is None:
        return Verdict(True)
    return Verdict(ctx.cmd.engine in want)


@condition("here")
def _here(want: Any, ctx: Context, here: bool) -> Verdict:
    """judges this machine: only with --here"""
    return Verdict(True) if here or not want else Verdict(None, applies=False)


@condition("kernel_below")
def _kernel_below(want: Any, ctx: Context, here: bool) -> Verdict:
    """this host's kernel is older than this version"""
    kv = ctx.platform.kernel_version() if ctx.platform else None
    if kv is None or ctx.platform is None:
        return Verdict(None, unknown=["kernel version: could not check"])
    bound = version_tuple(str(want))
    if bound is None:
        return Verdict(None, unknown=[f"kernel bound {want!r} unreadable"])
    return Verdict(kv < bound[:2], evidence=[f"kernel {visible(ctx.platform.kernel)} < {want}"])


@condition("memlock_limited")
def _memlock_limited(want: Any, ctx: Context, here: bool) -> Verdict:
    """ulimit -l is not unlimited on this host"""
    lim = ctx.platform.memlock_bytes if ctx.platform else None
    if lim is None:
        return Verdict(None, unknown=["ulimit -l: could not check"])
    return Verdict(lim >= 0, evidence=[f"ulimit -l is {lim // 1024} KiB, not unlimited"])


def _check_problems(want: Any) -> list[str]:
    return [] if want in CHECKS else [f"unknown check {want!r}"]


@condition("check", validate=_check_problems)
def _check(want: Any, ctx: Context, here: bool) -> Verdict:
    """a named arithmetic check (CHECKS)"""
    fn = CHECKS.get(str(want))
    if fn is None:
        return Verdict(None, unknown=[f"unknown check {want!r} in playbook"])
    return fn(ctx)


def _any_of_problems(want: Any) -> list[str]:
    if not isinstance(want, list) or not all(isinstance(g, dict) for g in want):
        return ["any_of must be a list of condition groups"]
    return [p for g in want for p in problems(g)]


@condition("any_of", validate=_any_of_problems)
def _any_of(want: Any, ctx: Context, here: bool) -> Verdict:
    """one of the nested condition groups holds"""
    verdicts = [evaluate(group, ctx, here) for group in want]
    applicable = [v for v in verdicts if v.applies]
    if not applicable:
        return Verdict(None, applies=False)
    for v in applicable:
        if v.holds:
            return v
    if any(v.holds is None for v in applicable):
        return Verdict(None, unknown=[u for v in applicable for u in v.unknown])
    return Verdict(False)


@fix_value("offload_size_gib")
def _offload_size_gib(ctx: Context) -> tuple[str | None, str]:
    """--kv-offloading-size for a command that misused --cpu-offload-gb: kvops size's answer when
    the model is known, else the host memory the command already set aside (per GPU x TP)."""
    cmd, m = ctx.cmd, ctx.model
    tp = cmd.tensor_parallel_size() if cmd is not None else 1
    if m is not None:
        from kvops.doctor.judging.sizing import SizeReport

        raw_len = cmd.get("--max-model-len") if cmd is not None else None
        max_len = (
            int(raw_len) if raw_len and raw_len.isascii() and raw_len.isdigit() else m.max_position_embeddings
        )
        if max_len:
            dtype = (cmd.get("--kv-cache-dtype") if cmd is not None else None) or "auto"
            rep = SizeReport(m, dtype, max_len, 1, tp, None)
            why = (
                f"--kv-offloading-size {rep.recommended_gib} is kvops size's answer"
                f" for {max_len} tokens at TP {tp}"
            )
            return str(rep.recommended_gib), why
    given = cmd.get("--cpu-offload-gb") if cmd is not None else None
    try:
        per_gpu = float(given) if given is not None else 0.0
    except ValueError:
        per_gpu = 0.0
    if per_gpu <= 0 or per_gpu > 1 << 20:
        return None, ""
    total = math.ceil(per_gpu * tp)
    why = (
        f"--kv-offloading-size {total}: the {per_gpu:g} GiB per GPU x TP {tp} the command already gives to"
        " --cpu-offload-gb (vLLM's size is the total over TP ranks); size it with `kvops size --model ...`"
    )
    return str(total), why


CONDITION_KEYS = frozenset(CONDITIONS)


def problems(conditions: dict[str, Any]) -> list[str]:
    """What is wrong with a playbook's conditions block (checked when playbooks load)."""
    out = []
    for key, want in conditions.items():
        cond = CONDITIONS.get(key)
        if cond is None:
            out.append(f"unknown condition {key!r}")
        elif cond.validate is not None:
            out += [
                p if p.startswith(("unknown", "bad", "any_of")) else f"{key} {p}" for p in cond.validate(want)
            ]
    return out


def evaluate(conditions: dict[str, Any], ctx: Context, here: bool) -> Verdict:
    """AND of every condition; evidence says which facts made it hold."""
    out = Verdict(True)
    if conditions.get("here") and not here:
        return Verdict(None, applies=False)
    if ctx.cmd is not None and ctx.cmd.engine not in conditions.get("engine", ["vllm"]):
        return Verdict(None, applies=False)  # another engine's command: this rule is not about it
    for key, want in conditions.items():
        cond = CONDITIONS.get(key)
        if cond is None:
            return Verdict(None, unknown=[f"unknown condition {key!r} in playbook"], hard=True)
        if (cond.needs == "model" and ctx.model is None) or (cond.needs == "cmd" and ctx.cmd is None):
            return Verdict(None, applies=False)
        v = cond.evaluate(want, ctx, here)
        if not v.applies:
            return v
        out.evidence += v.evidence
        out.unknown += v.unknown
        out.hard = out.hard or (v.holds is None and not cond.soft_unknown and not v.tentative)
        out.tentative = out.tentative or (v.holds is None and v.tentative)
        if v.holds is False:
            return Verdict(False, evidence=out.evidence)
        if v.holds is None:
            out.holds = None
    return out
