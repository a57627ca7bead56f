"""Findings about the serve line itself, judged by the release's own flag table: flags that
release does not have, `--flag True` on a switch, a missing value, a value outside the choices,
invalid JSON (with json's exact message), a stray positional. Each of these stops vLLM at start-up
(argparse exits with "unrecognized arguments" / "invalid choice" / "expected one argument").

A claim needs the right table: with the judged release's own table (shipped, or the installed
build's parser) the problems are an error (`serve-flags`); when the release is unknown or only a
nearby release's table was available they are `info` (`serve-flags-unverified`), except invalid
JSON, which no release accepts. rules.py registers both in CHECKS.
"""

from __future__ import annotations

from kvops.doctor.judging.judgement import Context, Verdict
from kvops.doctor.reading import cmdline

_ANY_RELEASE = {"bad-json"}  # wrong whatever the release


def _problems(ctx: Context) -> tuple[cmdline.ServeCommand, list[str], list[str]] | None:
    """(command as the release reads it, problems any release has, release-bound problems)."""
    if ctx.cmd is None or ctx.cmd.engine != "vllm":
        return None  # SGLang's and Dynamo's flags are not in vLLM's tables: not judged
    cmd = cmdline.reparse(ctx.cmd, ctx.version)
    always = [p.message for p in cmd.problems if p.kind in _ANY_RELEASE]
    bound = [p.message for p in cmd.problems if p.kind not in _ANY_RELEASE]
    error = cmd.kv_transfer_config_error()
    if error and error not in always:
        always.append(error)
    return cmd, always, bound


def _judged(cmd: cmdline.ServeCommand) -> str:
    judged = f"vLLM {cmd.schema_version}" if cmd.schema_version else "every vLLM release kvops knows"
    return f"flags read with the parser of {judged}" + (f" ({cmd.schema_note})" if cmd.schema_note else "")


def exact(cmd: cmdline.ServeCommand) -> bool:
    """Read with the judged release's own table (not a neighbour's, not the union)."""
    return cmd.schema_version is not None and cmd.schema_note is None


def check_serve_flags(ctx: Context) -> Verdict:

    found = _problems(ctx)
    if found is None:
        return Verdict(None, applies=False)
    cmd, always, bound = found
    evidence = always + (bound if exact(cmd) else [])
    if not evidence:
        return Verdict(False)
    return Verdict(True, evidence=[*evidence, _judged(cmd)])


def check_serve_flags_unverified(ctx: Context) -> Verdict:

    found = _problems(ctx)
    if found is None:
        return Verdict(None, applies=False)
    cmd, _, bound = found
    if exact(cmd) or not bound:
        return Verdict(False)
    return Verdict(True, evidence=[*bound, _judged(cmd)])
