"""Evaluate a playbook's `conditions` against what doctor knows: model, command, version, this host.

Each condition answers True, False or None (cannot tell). All must hold; a None turns an error
into a warning that says what could not be checked. Conditions about an input doctor was not
given (no --model, no --cmd) make the playbook not apply at all: doctor never guesses a command.

Vocabulary (keys of `conditions:` in playbooks/*.md):
  attention / not_attention: [mla, dsa, hybrid, sliding_window, gqa, mha]   (needs --model)
  moe: true                                                                 (needs --model)
  offloading: [native | lmcache | any]          flags_set / flags_unset: [--flag]   (needs --cmd)
  flag_value_not: {--flag: value}    (the flag is given with another value)         (needs --cmd)
  offloading_if_known: [...]         (like offloading, but true when no --cmd was given)
  env_on / env_not_off: [NAME]       (the command's env, else this host's env under --here)
  platform: [cuda | rocm]            (the command's image/env, else this host under --here)
  vllm_version: ">=0.12.0,<0.18.0"   here: true (judges this machine: only with --here)
  vllm_source: {offloading_layer_filter: Attention}   (read from the installed vllm when it is
                                     the judged version; holds when nothing can be read)
  kernel_below: "5.14"   memlock_limited: true   check: <named arithmetic check below>
  any_of: [{...}, {...}]             (one of the nested groups holds)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvops.doctor.cli_checks import check_serve_flags, check_serve_flags_unverified
from kvops.doctor.cmdline import ServeCommand, parse_size
from kvops.doctor.modelcfg import ModelInfo
from kvops.doctor.platform import Platform

GIB = 1 << 30
DOCKER_DEFAULT_SHM = 64 << 20  # docker's default /dev/shm
MEASURED_FOOTPRINT_FACTOR = 1.92  # vllm#53042
_ON = {"1", "true", "yes", "on"}
_OFF = {"0", "false", "no", "off"}


@dataclass
class Context:
    model: ModelInfo | None = None
    cmd: ServeCommand | None = None
    version: str | None = None
    version_source: str = "unknown"
    platform: Platform | None = None  # set only when doctor may judge this machine
    vllm_root: Path | None = None  # installed vllm's source, when it is the vLLM being judged


@dataclass
class Verdict:
    holds: bool | None  # None: could not tell
    applies: bool = True  # False: an input the rule needs was not given
    evidence: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    hard: bool = False  # an unknown other than version/platform: not worth a finding on its own


def version_tuple(text: str) -> tuple[int, int, int] | None:
    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
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


def _offload_gib(cmd: ServeCommand) -> float | None:
    return cmd.offloading_size_gib()


def _check_shm_too_small(ctx: Context) -> Verdict:
    cmd = ctx.cmd
    if cmd is None:
        return Verdict(None, applies=False)
    size = _offload_gib(cmd)
    if size is None:
        return Verdict(None, unknown=["offload size not in the command"])
    need = size * GIB
    if cmd.launcher == "docker":
        if cmd.docker_opt("--ipc") == "host":
            return Verdict(False, evidence=["docker --ipc=host shares the host's /dev/shm"])
        raw = cmd.docker_opt("--shm-size")
        shm = parse_size(raw) if raw else DOCKER_DEFAULT_SHM
        if shm is None:
            return Verdict(None, unknown=[f"cannot read --shm-size {raw!r}"])
        given = f"--shm-size {raw}" if raw else "docker default 64 MiB"
        ev = f"container /dev/shm {shm / GIB:.2f} GiB ({given})"
        return Verdict(
            shm < need, evidence=[f"{ev} < --kv-offloading-size {size:g} GiB" if shm < need else ev]
        )
    if ctx.platform is not None and ctx.platform.shm_free_bytes is not None:
        free = ctx.platform.shm_free_bytes
        ev = f"this host's /dev/shm has {free / GIB:.1f} GiB free; --kv-offloading-size is {size:g} GiB"
        return Verdict(free < need, evidence=[ev])
    return Verdict(None, unknown=["/dev/shm of the serving host (run doctor there with --here)"])


def _check_host_ram(ctx: Context) -> Verdict:
    cmd = ctx.cmd
    if cmd is None:
        return Verdict(None, applies=False)
    size = _offload_gib(cmd)
    if size is None:
        return Verdict(None, unknown=["offload size not in the command"])
    footprint = size * GIB * MEASURED_FOOTPRINT_FACTOR
    limit_raw = cmd.docker_opt("-m", "--memory") if cmd.launcher == "docker" else None
    if limit_raw:
        limit = parse_size(limit_raw)
        if limit is None:
            return Verdict(None, unknown=[f"cannot read --memory {limit_raw!r}"])
        source = f"docker --memory {limit_raw}"
    elif ctx.platform is not None and ctx.platform.host_ram_bytes is not None:
        limit = min(
            ctx.platform.host_ram_bytes, ctx.platform.memory_limit_bytes or ctx.platform.host_ram_bytes
        )
        source = "this host's memory"
    else:
        return Verdict(None, unknown=["memory of the serving host (run doctor there with --here)"])
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


CHECKS: dict[str, Callable[[Context], Verdict]] = {
    "aiter-moe-shape": _check_aiter_moe_shape,
    "aiter-mla-heads": _check_aiter_mla_heads,
    "shm-too-small": _check_shm_too_small,
    "host-ram-too-small": _check_host_ram,
    "offload-config-invalid": _check_offload_config,
    "serve-flags": check_serve_flags,
    "serve-flags-unverified": check_serve_flags_unverified,
}

CONDITION_KEYS = frozenset(
    [
        "attention",
        "not_attention",
        "moe",
        "offloading",
        "offloading_if_known",
        "flags_set",
        "flags_unset",
        "flag_value_not",
        "env_on",
        "env_not_off",
        "platform",
        "vllm_version",
        "vllm_source",
        "here",
        "kernel_below",
        "memlock_limited",
        "check",
        "any_of",
    ]
)


def problems(conditions: dict[str, Any]) -> list[str]:
    """What is wrong with a playbook's conditions block (checked when playbooks load)."""
    out = []
    for key, want in conditions.items():
        if key not in CONDITION_KEYS:
            out.append(f"unknown condition {key!r}")
        elif key == "check" and want not in CHECKS:
            out.append(f"unknown check {want!r}")
        elif key == "vllm_version":
            try:
                version_matches("0.0.0", str(want))
            except ValueError as exc:
                out.append(str(exc))
        elif key == "any_of":
            if not isinstance(want, list) or not all(isinstance(g, dict) for g in want):
                out.append("any_of must be a list of condition groups")
            else:
                out += [p for g in want for p in problems(g)]
    return out


_MODEL_KEYS = {"attention", "not_attention", "moe"}
_CMD_KEYS = {"offloading", "flags_set", "flags_unset", "flag_value_not"}


def evaluate(conditions: dict[str, Any], ctx: Context, here: bool) -> Verdict:
    """AND of every condition; evidence says which facts made it hold."""
    out = Verdict(True)
    if conditions.get("here") and not here:
        return Verdict(None, applies=False)
    for key, want in conditions.items():
        if key == "here":
            continue
        v = _one(key, want, ctx, here)
        if not v.applies:
            return v
        out.evidence += v.evidence
        out.unknown += v.unknown
        out.hard = out.hard or (v.holds is None and key not in ("vllm_version", "platform"))
        if v.holds is False:
            return Verdict(False, evidence=out.evidence)
        if v.holds is None:
            out.holds = None
    return out


def _one(key: str, want: Any, ctx: Context, here: bool) -> Verdict:
    m, cmd = ctx.model, ctx.cmd
    if key in _MODEL_KEYS and m is None:
        return Verdict(None, applies=False)
    if key in _CMD_KEYS and cmd is None:
        return Verdict(None, applies=False)
    if key == "attention":
        hit = sorted(set(want) & m.kinds)
        shown = f"attention {m.attention}" + (f" ({', '.join(hit)})" if hit != [m.attention] else "")
        return Verdict(bool(hit), evidence=[f"model {m.model_type}: {shown}"] if hit else [])
    if key == "not_attention":
        return Verdict(not (set(want) & m.kinds))
    if key == "moe":
        return Verdict(
            m.is_moe == bool(want), evidence=[f"MoE with {m.num_experts} experts"] if m.is_moe else []
        )
    if key in ("offloading", "offloading_if_known"):
        if cmd is None:
            return Verdict(True)
        kind = cmd.offloading()
        hit = kind is not None and ("any" in want or kind in want)
        return Verdict(
            hit, evidence=[f"command enables {cmd.connector()} ({kind} offloading)"] if hit else []
        )
    if key == "flags_set":
        hit = [f for f in want if cmd.has(f)]
        return Verdict(bool(hit), evidence=[f"command sets {f}" for f in hit])
    if key == "flags_unset":
        return Verdict(not any(cmd.has(f) for f in want))
    if key == "flag_value_not":
        for flag, value in want.items():
            given = cmd.get(flag)
            if given is None or given == str(value):
                return Verdict(False)
            return Verdict(True, evidence=[f"command sets {flag} {given} (needs {value})"])
    if key in ("env_on", "env_not_off"):
        env = _env(ctx)
        if env is None:
            return Verdict(None, applies=False)
        for name in want:
            value = env.get(name, "").strip().lower()
            ok = value in _ON if key == "env_on" else value not in _OFF
            if not ok:
                return Verdict(False)
        return Verdict(True, evidence=[f"{n}={env[n]}" for n in want if n in env])
    if key == "platform":
        plat = _platform(ctx)
        if plat is None:
            return Verdict(None, unknown=[f"platform ({' or '.join(want)})"])
        return Verdict(plat in want, evidence=[f"platform {plat}"])
    if key == "vllm_version":
        if ctx.version is None:
            return Verdict(None, unknown=[f"vLLM version (applies to vLLM {want})"])
        ok = version_matches(ctx.version, str(want))
        if ok is None:
            return Verdict(None, unknown=[f"vLLM version {ctx.version!r} unreadable (applies to {want})"])
        return Verdict(ok, evidence=[f"vLLM {ctx.version} ({ctx.version_source}) is in {want}"] if ok else [])
    if key == "vllm_source":
        if ctx.vllm_root is None:
            return Verdict(True)  # no installed source to read: the version rule decides
        from kvops.doctor.vllm_source import offloading_layer_filter

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
    if key == "kernel_below":
        kv = ctx.platform.kernel_version() if ctx.platform else None
        if kv is None:
            return Verdict(None, unknown=["kernel version: could not check"])
        bound = version_tuple(str(want))
        assert bound is not None
        return Verdict(kv < bound[:2], evidence=[f"kernel {ctx.platform.kernel} < {want}"])  # type: ignore[union-attr]
    if key == "memlock_limited":
        lim = ctx.platform.memlock_bytes if ctx.platform else None
        if lim is None:
            return Verdict(None, unknown=["ulimit -l: could not check"])
        return Verdict(lim >= 0, evidence=[f"ulimit -l is {lim // 1024} KiB, not unlimited"])
    if key == "check":
        try:
            return CHECKS[str(want)](ctx)
        except KeyError:
            return Verdict(None, unknown=[f"unknown check {want!r} in playbook"])
    if key == "any_of":
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
    return Verdict(None, unknown=[f"unknown condition {key!r} in playbook"])
