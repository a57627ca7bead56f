"""Findings about the serve line itself, judged by the release's own flag table: flags that
release does not have, `--flag True` on a switch, a missing value, a value outside the choices,
invalid JSON (with json's exact message), a stray positional. Each of these stops vLLM at start-up
(argparse exits with "unrecognized arguments" / "invalid choice" / "expected one argument").

rules.py registers `serve-flags` in CHECKS; playbooks/vllm-serve-flags-invalid.md uses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvops.doctor import cmdline

if TYPE_CHECKING:
    from kvops.doctor.rules import Context, Verdict


def check_serve_flags(ctx: Context) -> Verdict:
    from kvops.doctor.rules import Verdict

    if ctx.cmd is None:
        return Verdict(None, applies=False)
    cmd = cmdline.reparse(ctx.cmd, ctx.version)
    evidence = [p.message for p in cmd.problems]
    error = cmd.kv_transfer_config_error()
    if error and not any(p.kind == "bad-json" and p.flag == "--kv-transfer-config" for p in cmd.problems):
        evidence.append(error)
    if not evidence:
        return Verdict(False)
    judged = f"vLLM {cmd.schema_version}" if cmd.schema_version else "every vLLM release kvops knows"
    evidence.append(
        f"flags read with the parser of {judged}" + (f" ({cmd.schema_note})" if cmd.schema_note else "")
    )
    return Verdict(True, evidence=evidence)
