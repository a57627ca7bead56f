"""`kvops doctor --repro ID`: show a failure happen, then show the fix make it go away.

Three levels, tried in order, each saying plainly what it could and could not do here:
1. a GPU and vllm: start `vllm serve` with the failing flags under a timeout, watch its output for
   the playbook's signature, then start it again with the fix and wait for "Application startup
   complete" (vLLM's uvicorn start-up line);
2. vllm importable but no GPU: not driven in-process by this version of kvops — we say so;
3. neither: print the exact commands that reproduce it, from the playbook's `repro:` block.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from kvops.doctor.catalog import Catalog, Playbook
from kvops.doctor.cmdline import ServeCommand
from kvops.doctor.modelcfg import ModelInfo
from kvops.errors import UsageError

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
) -> int:
    pb = catalog.get(playbook_id)
    if pb is None:
        raise UsageError(f"unknown check {playbook_id!r} (see kvops doctor --list-checks)")
    lines = commands(pb, model_arg, cmd)
    gpu, vllm = have_gpu(), have_vllm()
    print(f"repro {pb.id}: {pb.title}")
    if lines is None:
        print("this playbook has no reproduction commands (it is matched from logs only).")
        return 0
    failing, fixed = lines
    if gpu and vllm:
        print(f"GPU and vllm found: starting the failing command (timeout {timeout:g} s)\n  {failing}")
        got, text = serve_until(failing, pb, timeout)
        print(f"failing command: {got}" + (f": {text}" if text else ""))
        print(f"starting the fixed command\n  {fixed}")
        got_fixed, text_fixed = serve_until(fixed, pb, timeout)
        print(f"fixed command: {got_fixed}" + (f": {text_fixed}" if text_fixed else ""))
        return 0 if got == "signature" and got_fixed == "started" else 1
    why = []
    if not vllm:
        why.append("vllm is not importable here, so its code cannot be driven to the failing call")
    else:
        why.append("vllm is importable, but this kvops does not drive it in-process for this failure")
    if not gpu:
        why.append("no GPU (/dev/nvidia* or /dev/kfd), so vllm serve cannot be started")
    print("could not reproduce here: " + "; ".join(why) + ".")
    print("To reproduce on a machine with a GPU and vllm, run the failing command and look for")
    print(f"  {pb.signatures[0].pattern if pb.signatures else pb.id}")
    print(f"  {failing}")
    if fixed:
        print("then the fixed command, which should reach 'Application startup complete':")
        print(f"  {fixed}")
    if model is not None:
        print(f"model: {model.model_type}, attention {model.attention}")
    return 0
