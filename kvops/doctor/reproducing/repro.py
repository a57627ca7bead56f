"""`kvops doctor --repro ID`: show a failure happen, then show the fix make it go away.

First, for the failures whose mechanism is Python (kvops.doctor.reproducing.repro_release.CASES): run the
release's own function on CPU, from its wheel fetched with pip into the user's cache, then the first
fixed release's same function (`executed` / `fix_executed` in --json). Otherwise three levels,
tried in order, each saying plainly what it could and could not do here:
1. a GPU and vllm: start `vllm serve` with the failing flags under a timeout, watch its output for
   the playbook's signature, then start it again with the fix and wait for "Application startup
   complete" (vLLM's uvicorn start-up line);
2. vllm importable but no GPU: not driven in-process by this version of kvops — we say so, and
   report what the installed source's code does where the playbook names a source fact;
3. neither: print the exact commands that reproduce it, from the playbook's `repro:` block.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from kvops.doctor.judging.catalog import Catalog, Playbook
from kvops.doctor.reading import known_models
from kvops.doctor.reading.cmdline import ServeCommand
from kvops.doctor.reading.modelcfg import ModelInfo
from kvops.doctor.reproducing import repro_release
from kvops.errors import UsageError
from kvops.termsafe import visible

STARTED = "Application startup complete"


def have_gpu(dev: Path = Path("/dev")) -> bool:
    return any(dev.glob("nvidia[0-9]*")) or (dev / "kfd").exists()


def have_vllm() -> bool:
    return importlib.util.find_spec("vllm") is not None


def commands(pb: Playbook, model_arg: str | None, cmd: ServeCommand | None) -> tuple[str, str] | None:
    """(failing, fixed) command lines: the user's own command and its fix, else the playbook's."""
    if cmd is not None and pb.fix is not None and not pb.fix.is_empty():
        fixed = cmd.with_fix(pb.fix.remove, pb.fix.add, pb.fix.env, pb.fix.docker_add)
        return cmd.render(), fixed.render()
    block = pb.meta.get("repro") or {}
    if not isinstance(block, dict) or "failing" not in block:
        return None
    model = shlex.quote(model_arg) if model_arg else "<model>"
    return str(block["failing"]).format(model=model), str(block.get("fixed", "")).format(model=model)


def serve_until(line: str, pb: Playbook, timeout: float) -> tuple[str, str]:
    """Run a serve line; return ('signature'|'started'|'exited'|'timeout', the deciding output line)."""
    proc = subprocess.Popen(  # the user's own serve line, run through their shell on purpose
        line,
        shell=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    outcome = ("exited", "")
    try:
        assert proc.stdout is not None
        for out in proc.stdout:
            sys.stderr.write(out)
            if any(s.search(out) for s in pb.signatures):
                outcome = ("signature", out.strip())
                break
            if STARTED in out:
                outcome = ("started", out.strip())
                break
            if time.monotonic() > deadline:
                outcome = ("timeout", "")
                break
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 15)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
    return outcome


def run(
    catalog: Catalog,
    playbook_id: str,
    model: ModelInfo | None,
    model_arg: str | None,
    cmd: ServeCommand | None,
    timeout: float,
    as_json: bool = False,
    vllm_version: str | None = None,
) -> int:
    pb = catalog.get(playbook_id)
    if pb is None:
        raise UsageError(f"unknown check {playbook_id!r} (see kvops doctor --list-checks)")
    if playbook_id in repro_release.CASES and repro_release.missing_runtime() is None:
        result = attempt_with_release(pb, model, model_arg, cmd, vllm_version)
    else:
        result = attempt(pb, model_arg, cmd, timeout, have_gpu(), have_vllm())
        if playbook_id in repro_release.CASES:
            result["could_not"].insert(
                0, f"vLLM's own code cannot run here: {repro_release.missing_runtime()}"
            )
    if as_json:
        import json

        print(json.dumps(result, indent=2))
    else:
        print(to_text(result, model))
    return 1 if result["reproduced"] is True and result["fix_confirmed"] is False else 0


def _result(pb: Playbook, lines: tuple[str, str] | None, **extra: Any) -> dict[str, Any]:
    """The --repro answer before anything ran: what the playbook says and the two command lines."""
    return {
        "id": pb.id,
        "title": pb.title,
        "signature": pb.signatures[0].pattern if pb.signatures else None,
        "failing_command": lines[0] if lines else None,
        "fixed_command": lines[1] if lines else None,
        **extra,
        "reproduced": None,  # True/False once something was tried, None when not
        "fix_confirmed": None,
        "could_not": [],
    }


def attempt(
    pb: Playbook,
    model_arg: str | None,
    cmd: ServeCommand | None,
    timeout: float,
    gpu: bool,
    vllm: bool,
    runner: Callable[[str, Playbook, float], tuple[str, str]] | None = None,
    vllm_root: Path | None = None,
) -> dict[str, Any]:
    """What could be done here, and what happened. `runner` starts a command line (tests inject one)."""
    runner = runner or serve_until
    lines = commands(pb, model_arg, cmd)
    out = _result(pb, lines)
    if lines is None:
        out["could_not"].append("this playbook has no reproduction commands (it is matched from logs only)")
        return out
    if gpu and vllm:
        got, text = runner(lines[0], pb, timeout)
        out["reproduced"], out["failing_outcome"] = got == "signature", f"{got}: {text}".strip(": ")
        if lines[1]:
            got_fixed, text_fixed = runner(lines[1], pb, timeout)
            out["fix_confirmed"] = got_fixed == "started"
            out["fixed_outcome"] = f"{got_fixed}: {text_fixed}".strip(": ")
        return out
    if not vllm:
        out["could_not"].append(
            "vllm is not importable here, so its code cannot be driven to the failing call"
        )
    else:
        out["could_not"].append(
            "vllm is importable, but this kvops does not drive it in-process (no meta-device model build)"
        )
        source = _read_installed_source(pb, vllm_root)
        if source:
            out["installed_source"] = source
    if not gpu:
        out["could_not"].append("no GPU (/dev/nvidia* or /dev/kfd), so vllm serve cannot be started")
    if pb.id not in repro_release.CASES:
        platforms = (pb.conditions.get("platform") or []) if isinstance(pb.conditions, dict) else []
        where = " (a ROCm kernel: it needs an AMD Instinct MI300-class GPU)" if "rocm" in platforms else ""
        out["could_not"].append(
            f"the failing code is not vLLM's Python, so it has no CPU reproduction{where}"
        )
    return out


def attempt_with_release(
    pb: Playbook,
    model: ModelInfo | None,
    model_arg: str | None,
    cmd: ServeCommand | None,
    vllm_version: str | None,
    log: TextIO = sys.stderr,
    execute: Callable[..., dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run the failure's function from the release's own source, then from the first fixed release."""
    from kvops.doctor.reading import modelcfg

    execute = execute or repro_release.fetch_and_execute
    case = repro_release.CASES[pb.id]
    if model is None:
        model = modelcfg.load(str(known_models.shipped_model(case.model)))
    lines = commands(pb, model_arg, cmd)
    version = vllm_version or case.affected
    out = _result(pb, lines, model=model.path)
    fix_add = tuple(pb.fix.add) if pb.fix is not None else ()
    fix_flags = [f"remove {f}" for f in (pb.fix.remove if pb.fix is not None else ())] + list(fix_add)
    executed = execute(case, version, model, log, repro_release.case_params(pb.id, False, cmd))
    out["executed"] = executed
    if executed["outcome"] == "could-not-run":
        detail = str(executed.get("detail"))
        if "No module named" in detail:  # a module the release needs that REPRO_MODULES misses
            from kvops.install_hint import install_command

            detail += f" (kvops's repro extra: {install_command('repro')})"
        out["could_not"].append(f"vLLM {version}'s code could not be run here: {detail}")
        return out
    if executed["outcome"] == "not-applicable":
        out["reproduced"] = False
        return out
    error = executed.get("error") or ""
    expect = [re.compile(case.expect)] if case.expect else pb.signatures
    out["reproduced"] = executed["outcome"] == "raised" and any(s.search(error) for s in expect)
    if out["reproduced"]:
        # the first fixed release's same code, or (a flags-only fix) this release with the fixed flags
        fixed_version = case.fixed or version
        params = repro_release.case_params(pb.id, True, cmd, fix_add)
        fixed = execute(case, fixed_version, model, log, params)
        fixed["fixed_by"] = "release" if case.fixed else "flags: " + ", ".join(fix_flags)
        out["fix_executed"] = fixed
        out["fix_confirmed"] = fixed["outcome"] == "returned"
    return out


def _read_installed_source(pb: Playbook, root: Path | None) -> str | None:
    """What the installed vllm's source says about this failure, for playbooks that name a fact."""
    from kvops.doctor.reading.vllm_source import installed_root, offloading_layer_filter

    want = (pb.conditions.get("vllm_source") or {}).get("offloading_layer_filter")
    root = root or installed_root()
    if want is None or root is None:
        return None
    found = offloading_layer_filter(root)
    if found is None:
        return f"could not find register_kv_caches in {root}"
    verdict = "this build has the failing lookup" if found == want else "this build has the fix"
    return f"installed vllm ({root}) looks offloaded layers up by {found}: {verdict}"


def to_text(result: dict[str, Any], model: ModelInfo | None) -> str:
    lines = [f"repro {result['id']}: {result['title']}"]
    if "executed" in result:
        return "\n".join([*lines, *_release_text(result)])
    if result["reproduced"] is not None:
        lines.append(f"failing command: {result['failing_command']}")
        lines.append(f"  -> {result.get('failing_outcome')} (signature seen: {result['reproduced']})")
        if result["fixed_command"]:
            lines.append(f"fixed command: {result['fixed_command']}")
            lines.append(f"  -> {result.get('fixed_outcome')} (started: {result['fix_confirmed']})")
        return "\n".join(lines)
    if result["failing_command"] is None:
        return "\n".join([*lines, *result["could_not"]])
    lines.append("could not reproduce here: " + "; ".join(result["could_not"]) + ".")
    if result.get("installed_source"):
        lines.append(result["installed_source"])
    lines.append("To reproduce on a machine with a GPU and vllm, run the failing command and look for")
    lines.append(f"  {result['signature']}")
    lines.append(f"  {result['failing_command']}")
    if result["fixed_command"]:
        lines.append(f"then the fixed command, which should reach '{STARTED}':")
        lines.append(f"  {result['fixed_command']}")
    if model is not None:
        lines.append(f"model: {model.model_type}, attention {model.attention}")
    return "\n".join(lines)


def _release_text(result: dict[str, Any]) -> list[str]:
    """What ran from the release's own source, its outcome, and the fix's."""
    lines: list[str] = []
    runs = [("failing", result["executed"])]
    if "fix_executed" in result:
        runs.append(("fix", result["fix_executed"]))
    for label, ran in runs:
        version = ran["vllm_version"]
        head = f"vLLM {version}"
        if label == "fix":
            by = ran.get("fixed_by", "release")
            head += " (the first fixed release)" if by == "release" else f" with the fix ({by})"
        if ran["outcome"] in ("could-not-run", "not-applicable"):
            lines.append(f"{head}: {ran['outcome']}: {visible(ran.get('detail'))}")
            continue
        lines.append(f"{head}, its own code on CPU: {ran['function']}")
        lines.append(f"  in {ran['file']}")
        if ran.get("loaded"):
            lines.append(f"  {visible(ran['loaded'])}")
        lines.append(f"  over {visible(ran.get('inputs'))}")
        if ran["outcome"] == "raised":
            lines.append("  raised:")
            lines += ["    " + ln for ln in visible(ran["traceback"], keep_newlines=True).splitlines()]
        else:
            lines.append(f"  returned cleanly: {visible(ran.get('detail'))}")
    verdict = {True: "yes", False: "no", None: "not tried"}
    lines.append(
        f"reproduced: {verdict[result['reproduced']]}; fix confirmed: {verdict[result['fix_confirmed']]}"
    )
    if result["reproduced"] is False:
        lines.append(f"vLLM {result['executed']['vllm_version']} does not raise this failure for this model.")
    stand = result["executed"].get("stand_ins") or []
    if stand:
        lines.append("stand-ins (edge of the machine, nothing else): " + "; ".join(stand))
    mods = result["executed"].get("stood_in_modules") or []
    if mods:
        lines.append("imported but never called, stood in: " + ", ".join(mods))
    lines += [f"could not: {c}" for c in result["could_not"]]
    if result["failing_command"]:
        lines.append("On a GPU machine the same is seen with:")
        lines.append(f"  {result['failing_command']}")
        if result["fixed_command"]:
            lines.append(f"  fixed: {result['fixed_command']}")
    return lines
