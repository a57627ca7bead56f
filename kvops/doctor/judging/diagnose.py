"""Put the inputs together and turn matching playbooks into findings.

A finding comes from a log signature (with its context), from a playbook's conditions on the
model/command/version, or from this machine (only under --here). Text for people and JSON for
scripts are both rendered from the same Finding objects.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from kvops.doctor.judging import as_written
from kvops.doctor.judging.catalog import Catalog, Fix, Playbook
from kvops.doctor.judging.inputs import Inputs
from kvops.doctor.judging.judgement import Verdict
from kvops.doctor.judging.logs import FACTS, LogScan, clip
from kvops.doctor.judging.rules import CONDITIONS, FIX_VALUES, Context, evaluate, version_tuple
from kvops.doctor.reading import engines
from kvops.doctor.reading.cmdline import ServeCommand, redact_text, reparse, secret_values
from kvops.doctor.reading.modelcfg import ModelInfo
from kvops.doctor.reading.platform import Platform
from kvops.errors import UsageError
from kvops.termsafe import visible

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
UNKNOWN_FAILURE = "unknown-failure"  # the playbook a fatal error no other playbook knows is reported under


@dataclass
class Finding:
    playbook: Playbook
    severity: str
    source: str  # log | config | platform
    evidence: list[str]
    unknown: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    fixed_command: str | None = None
    alternative_commands: list[str | None] = field(default_factory=list)
    alternatives: tuple[Fix, ...] | None = None  # the playbook's, minus those already in place
    fix: Fix | None = None  # the playbook's fix with its {values} filled in
    unconfirmed: bool = False  # a generic message without its evidence: no fix is proposed
    # what the fixed command / each alternative's command needs first ("upgrade to vLLM >= X")
    fixed_needs: str | None = None
    alternative_needs: list[str | None] = field(default_factory=list)
    # the commands behind fixed_command / alternative_commands, judged before they are printed
    fixed_cmds: dict[int, ServeCommand] = field(default_factory=dict, repr=False)  # -1: the fix
    # where the quoted fatal message is raised (error_sites.Site.to_dict), most specific first
    raised_at: list[dict[str, Any]] = field(default_factory=list)
    fix_from_message: bool = False  # the fix's flags are the raised message's own (located._stated)

    def __post_init__(self) -> None:
        if self.unconfirmed:
            self.alternatives, self.fix = (), None
        if self.alternatives is None:
            self.alternatives = self.playbook.alternatives
        if self.fix is None and not self.unconfirmed:
            self.fix = self.playbook.fix

    @property
    def id(self) -> str:
        return self.playbook.id

    def commands_for_alternatives(self) -> list[str | None]:
        alts = self.alternative_commands
        n = len(self.alternatives or ())
        return alts if len(alts) == n else [None] * n

    def needs_for_alternatives(self) -> list[str | None]:
        n = len(self.alternatives or ())
        return self.alternative_needs if len(self.alternative_needs) == n else [None] * n

    def to_dict(self) -> dict[str, Any]:
        pb = self.playbook
        fix = self.fix or Fix()
        return {
            "id": pb.id,
            "severity": self.severity,
            "title": pb.title,
            "source": self.source,
            "confidence": pb.confidence,
            "evidence": self.evidence,
            "could_not_check": self.unknown,
            "notes": self.notes,
            "fix": fix.to_dict(),
            "fix_confidence": fix.confidence if self.fix is not None else None,
            "alternatives": [
                {**a.to_dict(with_confidence=True), "fixed_command": cmd, "fixed_command_needs": needs}
                for a, cmd, needs in zip(
                    self.alternatives or (),
                    self.commands_for_alternatives(),
                    self.needs_for_alternatives(),
                    strict=True,
                )
            ],
            "fixed_command": self.fixed_command,
            "fixed_command_needs": self.fixed_needs,
            "playbook": f"playbooks/{pb.path.name}",
        } | ({"raised_at": self.raised_at} if self.raised_at else {})


@dataclass
class Diagnosis:
    findings: list[Finding]
    version: str | None
    version_source: str
    model: ModelInfo | None
    cmd: ServeCommand | None
    platform: Platform | None
    notes: list[str]
    log_lines: int | None = None
    command_source: str | None = None  # cmd: the user's --cmd | log: someone else's line, rebuilt
    also_runs: list[str] = field(default_factory=list)  # what that line runs besides the serve command

    @property
    def exit_code(self) -> int:
        return 1 if any(f.severity == "error" for f in self.findings) else 0


def resolve_version(flag: str | None, log: LogScan | None, command_text: str = "") -> tuple[str | None, str]:
    """--vllm-version, else the log's `vLLM API server version X` line, else the release the
    command's vLLM image is tagged with or its script installs, else the one a short log (a
    report: its manifest or compose file) names that way, else the installed vllm."""
    if flag is not None:
        from kvops.doctor.reading.vllm_release import release_number

        return release_number(flag), "--vllm-version"
    if log is not None and log.version:
        return log.version, "log"
    if command_text:
        from kvops.doctor.reading.paste_release import pasted_release

        named = pasted_release(command_text)
        if named.release is not None:
            return named.release, clip(named.source)
    named_in_log = log.named_release if log is not None else None
    if named_in_log is not None and named_in_log.release is not None:
        return named_in_log.release, clip(named_in_log.source)
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("vllm"), "installed vllm"
    except PackageNotFoundError:
        return None, "unknown"


FACT_NAMES = {
    "lmcache": "LMCache in the command or the traceback",
    "rocm": "a ROCm platform (AMD GPU, AITER, a -rocm image)",
    "fp8_kv": "an FP8 KV cache (--kv-cache-dtype fp8*) or a KV-cache kernel in the traceback",
    "dsa": "a DeepSeek-V3.2-style sparse-attention (DSA) model",
    "mla": "an MLA model (DeepSeek-V2/V3/R1, Kimi-K2, GLM-4.5+)",
    "offload": "KV offloading in the command or the log",
    "pp": "pipeline parallelism (--pipeline-parallel-size > 1)",
    "kv_intent": "the user's own words asking for KV-cache offloading",
    "gpu_memory": "the GPUs' memory (a log line naming it)",
    "weights_loaded": "vLLM's 'Model loading took X GiB' line",
}


def _fact_evidence(name: str, ctx: Context, log: LogScan | None, command_text: str) -> str | None:
    """Where a `requires` fact shows, or None: the log, the command, the model, the platform."""
    if log is not None and name in log.facts:
        n, line = log.facts[name]
        return f"log line {n} ({name}): {clip(line)}"
    if command_text and FACTS[name].search(command_text):
        return f"command ({name}): {FACTS[name].search(command_text).group()}"  # type: ignore[union-attr]
    cmd, m = ctx.cmd, ctx.model
    if name == "fp8_kv" and cmd is not None and (cmd.get("--kv-cache-dtype") or "").startswith("fp8"):
        return f"command sets --kv-cache-dtype {cmd.get('--kv-cache-dtype')}"
    if name == "lmcache" and cmd is not None and cmd.offloading() == "lmcache":
        return f"command enables {cmd.connector()}"
    if name == "pp" and cmd is not None and (cmd.get("--pipeline-parallel-size") or "1") not in ("1", "0"):
        return f"command sets --pipeline-parallel-size {cmd.get('--pipeline-parallel-size')}"
    if name == "offload" and cmd is not None and cmd.offloading() is not None:
        return f"command enables {cmd.connector()}"
    if name == "dsa" and m is not None and m.is_dsa:
        return f"model {m.model_type} uses DSA"
    if name == "mla" and m is not None and m.is_mla:
        return f"model {m.model_type} uses MLA"
    if name == "rocm" and (
        (cmd is not None and cmd.platform_hint() == "rocm") or (ctx.platform and ctx.platform.vendor == "amd")
    ):
        return "platform rocm"
    return None


def _model_conditions(conditions: dict[str, Any]) -> dict[str, Any]:
    """The conditions about the model: a config.json is a fact, while a command may be partial
    (rebuilt from a log, or missing the defaults) and the version may be a fork's."""
    return {k: v for k, v in conditions.items() if k in CONDITIONS and CONDITIONS[k].needs == "model"}


def _uses_host(pb: Playbook, platform: Platform | None, cmd: ServeCommand | None) -> bool:
    """Whether a config finding is about this machine rather than the configuration."""
    return "here" in pb.conditions or (platform is not None and cmd is None)


def _config_finding(pb: Playbook, verdict: Verdict, uses_host: bool) -> Finding | None:
    """The finding a playbook's conditions make without a log line; None when only inputs we
    lack stand in the way ("could not check", not a finding)."""
    if verdict.holds is None and verdict.hard:
        return None
    if verdict.holds is None and verdict.tentative:
        # a premise without evidence: said as `info`, with what would confirm it, no fix
        notes = [f"not confirmed: {u}" for u in verdict.unknown]
        return Finding(pb, "info", "config", verdict.evidence, notes=notes, unconfirmed=True)
    severity = str(pb.meta.get("config_severity", pb.severity))
    unknown = list(verdict.unknown)
    if verdict.holds is None:
        severity = "warning" if SEVERITY_ORDER.get(severity, 1) < 1 else severity
        note = pb.meta.get("version_note")
        if note and any("version" in u for u in unknown):
            unknown.append(str(note))
    return Finding(pb, severity, "platform" if uses_host else "config", verdict.evidence, unknown)


def _notes(engine: str, log: LogScan | None, cmd: ServeCommand | None, version: str | None) -> list[str]:
    """What the report says about its inputs: another engine, the flag table used, no version."""
    notes: list[str] = []
    if engine != engines.VLLM:
        release = log.engine_version if log is not None and log.engine == engine else None
        notes.append(
            f"engine: {engines.SHOWN[engine]} {visible(release) if release else '(release unknown)'}"
        )
    if cmd is not None and cmd.schema_note:
        notes.append(visible(cmd.schema_note))
    if version is None and engine == engines.VLLM:
        notes.append("vLLM version unknown: pass --vllm-version; version-bound checks are warnings")
    return notes


def diagnose(catalog: Catalog, inputs: Inputs, self_check: bool = True) -> Diagnosis:
    """Findings for `inputs`; `self_check` judges every fixed command before it is printed (off
    for that judging itself)."""
    model, cmd, log, version = inputs.model, inputs.cmd, inputs.log, inputs.version
    version_source, platform, only, vllm_root = (
        inputs.version_source,
        inputs.platform,
        inputs.only,
        inputs.vllm_root,
    )
    command_text, host_ram_bytes, shm_bytes = inputs.command_text, inputs.host_ram_bytes, inputs.shm_bytes
    partial_command = inputs.partial_command
    here = platform is not None
    cmd = reparse(cmd, version) if cmd is not None else None  # that release's flag table
    ctx = Context(model, cmd, version, version_source, platform, vllm_root, host_ram_bytes, shm_bytes)
    if log is not None:
        ctx.log_facts = dict(log.facts)
        if shm_bytes is None and log.shm_bytes is not None:
            ctx.shm_bytes, ctx.shm_source = log.shm_bytes, "/dev/shm from the log's df line"
    command_text = command_text or (cmd.render() if cmd is not None else "")
    secrets = secret_values(cmd)
    findings: list[Finding] = []
    for pb in catalog.failures:
        if only and pb.id not in only:
            continue
        verdict = evaluate(pb.conditions, ctx, here) if pb.conditions else None
        hit = log.hits.get(pb.id) if log else None
        if hit is not None:
            finding = _log_finding(pb, hit.evidence(), verdict, ctx, log, command_text)
        elif verdict is not None and verdict.applies and verdict.holds is not False:
            found = _config_finding(pb, verdict, uses_host=_uses_host(pb, platform, cmd))
            if found is None:
                continue
            finding = found
        else:
            continue
        if cmd is not None and not finding.unconfirmed:
            _propose_fixes(finding, cmd, ctx, partial_command)
        finding.evidence = [visible(redact_text(e, secrets)) for e in finding.evidence]
        finding.notes = [visible(n) for n in finding.notes]
        findings.append(finding)
    _apply_precedence(findings)
    engine = _engine(cmd, log)
    unknown_book = catalog.get(UNKNOWN_FAILURE)
    quote = (
        log is not None
        and log.fatal.found
        and unknown_book is not None
        and (not only or UNKNOWN_FAILURE in only)
    )
    # a fatal error no playbook knows; a fatal line that is not a Python exception is quoted
    # anyway, unless a finding already quotes that line as its evidence (it is explained)
    fatal = log.fatal if log is not None else None
    native_unexplained = (
        fatal is not None and fatal.native is not None and fatal.native[0] not in _lines_explained(findings)
    )
    if quote and (not any(f.source == "log" for f in findings) or native_unexplained):
        assert log is not None and unknown_book is not None
        findings.append(_unknown_failure(unknown_book, log, engine, version, version_source, secrets))
    # ---- issue 43: where the fatal message is raised (judging/located.py) ----
    from kvops.doctor.judging import located

    located.annotate(findings, log, {"vllm": version, **inputs.engine_versions}, catalog, Finding, only)
    if cmd is not None:
        _fix_from_messages(findings, cmd)
    if self_check and cmd is not None:
        for finding in findings:
            _judge_fixes(finding, cmd, catalog, ctx)
    findings.sort(key=lambda f: (SEVERITY_ORDER.get(f.severity, 3), f.id))
    notes = _notes(engine, log, cmd, version)
    return Diagnosis(
        findings,
        visible(version) if version else None,
        version_source,
        model,
        cmd,
        platform,
        notes,
        log.lines if log else None,
    )


def _fix_from_messages(findings: list[Finding], cmd: ServeCommand) -> None:
    """The fixed command again for findings whose fix came from the raised message's template
    (located after the fixes were first built): the message's flags, not the playbook's."""
    for finding in findings:
        if not finding.fix_from_message or finding.fix is None:
            continue
        finding.fixed_command = _apply(cmd, finding.fix)
        finding.fixed_cmds.pop(-1, None)
        if finding.fixed_command is not None:
            finding.fixed_cmds[-1] = _fixed(cmd, finding.fix)
        elif cmd.launcher == "docker" and not finding.fix.is_empty():
            finding.notes.append("the command already carries this fix")


def _apply_precedence(findings: list[Finding]) -> None:
    """A specific cause wins over the generic one the same log also matches: a playbook's
    `supersedes: [ids]` demotes those findings, and a `yields: true` playbook (a catch-all such as an
    assertion anywhere in the offload code) gives way to any other log finding at warning or above.
    The loser stays, as `info` without a fix, saying which finding explains the log."""
    claimed = [f for f in findings if f.source == "log" and f.severity in ("error", "warning")]
    for f in findings:
        if f.severity == "info":
            continue
        by = [o for o in claimed if o is not f and f.id in (o.playbook.meta.get("supersedes") or [])]
        if not by and f.source == "log" and f.playbook.meta.get("yields"):
            by = [o for o in claimed if o is not f and not o.playbook.meta.get("yields")]
        if by:
            f.severity = "info"
            f.fix, f.alternatives, f.fixed_command, f.alternative_commands = None, (), None, []
            f.unconfirmed = True
            f.notes.append(
                f"explained by {by[0].id}, which matches the same log more specifically: no fix proposed"
            )


_CITED_LINE = re.compile(r"log line (\d+)\b")


def _lines_explained(findings: list[Finding]) -> set[int]:
    """The log lines a warning or error finding quotes as its evidence ("log line N: ...")."""
    return {
        int(m.group(1))
        for f in findings
        if f.source == "log" and f.severity != "info"
        for e in f.evidence
        if (m := _CITED_LINE.match(e))
    }


def _engine(cmd: ServeCommand | None, log: LogScan | None) -> str:
    """The engine judged: the command's, else the one the log shows, else vLLM."""
    if cmd is not None and cmd.engine != engines.VLLM:
        return cmd.engine
    if log is not None and log.engine is not None and (cmd is None or log.version is None):
        return log.engine
    return engines.VLLM


def _unknown_failure(
    pb: Playbook, log: LogScan, engine: str, version: str | None, source: str, secrets: dict[str, str]
) -> Finding:
    """One `info` finding quoting a fatal error no playbook knows: its first line, the exception, the
    release, the component that raised it and what to search the trackers for."""
    fatal = log.fatal
    assert fatal.exception is not None
    shown = engines.SHOWN[engine]
    if engine == engines.VLLM:
        release = f"vLLM {version} ({source})" if version else "vLLM release unknown (pass --vllm-version)"
    else:
        release = f"{shown} {log.engine_version}" if log.engine_version else f"{shown} release unknown"
        if log.version:
            release += f"; vLLM {log.version}"
    evidence = []
    if fatal.first_line is not None and fatal.first_line[0] != fatal.exception[0]:
        evidence.append(f"log line {fatal.first_line[0]} (first fatal line): {clip(fatal.first_line[1])}")
    evidence += [
        f"log line {fatal.exception[0]} (exception): {clip(fatal.exception[1])}",
        f"release: {release}",
        f"component: {fatal.component or 'unknown (no traceback frame before the exception)'}",
        f"search terms: {fatal.search_terms(shown)}",
    ]
    notes = ["no playbook knows this failure: search the component's tracker with the terms above"]
    return Finding(
        pb, "info", "log", [visible(redact_text(e, secrets)) for e in evidence], notes=notes, unconfirmed=True
    )


def _log_finding(
    pb: Playbook,
    evidence: list[str],
    verdict: Any,
    ctx: Context,
    log: LogScan | None,
    command_text: str,
) -> Finding:
    """A signature matched. It is the playbook's claim only with the specific evidence the
    playbook requires and no input contradicting it; otherwise an `info` saying what would."""
    severity = pb.severity
    notes: list[str] = []
    if verdict is not None and verdict.applies and verdict.holds:
        evidence = evidence + verdict.evidence
    for name in pb.requires:
        shown = _fact_evidence(name, ctx, log, command_text)
        if shown is None:
            severity = "info"
            notes.append(f"generic message: would be confirmed by {FACT_NAMES[name]}; none seen")
        else:
            evidence = [*evidence, shown]
    about_model = _model_conditions(pb.conditions)
    if about_model:
        against = evaluate(about_model, ctx, here=False)
        if against.applies and against.holds is False:
            severity = "info"
            notes.append("the model given does not match this failure's conditions")
    if severity == "info" and pb.severity != "info":
        notes.append("no fix proposed until it is confirmed (playbook: " + f"playbooks/{pb.path.name})")
        return Finding(pb, severity, "log", evidence, notes=notes, unconfirmed=True)
    return Finding(pb, severity, "log", evidence, notes=notes)


def _propose_fixes(finding: Finding, cmd: ServeCommand, ctx: Context, partial: bool = False) -> None:
    """The fixed command for the fix and each alternative; a fix the command already carries is
    said once and never proposed again (nor is an alternative that is already in place)."""
    pb = finding.playbook
    if pb.fix is not None and not pb.fix.is_empty():
        fix = _with_values(pb.fix, ctx, finding.notes)
        finding.fix = fix
        finding.fixed_command = _apply(cmd, fix)
        if finding.fixed_command is not None:
            finding.fixed_cmds[-1] = _fixed(cmd, fix)
        applicable = cmd.launcher == "docker" or fix.remove or fix.add or fix.env
        if finding.fixed_command is None and applicable and not partial:
            finding.notes.append("the command already carries this fix")
    kept: list[Any] = []
    commands: list[Any] = []
    for alt in pb.alternatives:
        if alt.is_empty():
            kept.append(alt)
            commands.append(None)
            continue
        alt = _with_values(alt, ctx, finding.notes)
        fixed = _apply(cmd, alt)
        if fixed is None and (alt.add or alt.env or alt.docker_add) and not partial:
            what = " ".join([*alt.add, *(f"{k}={v}" for k, v in alt.env.items())])
            finding.notes.append(f"not proposed again, already in the command: {what}")
            continue
        if fixed is not None:
            finding.fixed_cmds[len(kept)] = _fixed(cmd, alt)
        kept.append(alt)
        commands.append(fixed)
    finding.alternatives = tuple(kept)
    finding.alternative_commands = commands


def _with_values(fix: Fix, ctx: Context, notes: list[str]) -> Fix:
    """`{name}` in a fix's add tokens filled from rules.FIX_VALUES (e.g. a size from kvops size)."""
    if not any("{" in t for t in fix.add):
        return fix
    values: dict[str, str] = {}
    for name, fn in FIX_VALUES.items():
        if any("{" + name + "}" in t for t in fix.add):
            value, why = fn(ctx)
            if value is None:
                return replace(fix, add=tuple(t for t in fix.add if "{" + name + "}" not in t))
            values[name] = value
            notes.append(why)
    return replace(fix, add=tuple(t.format(**values) if "{" in t else t for t in fix.add))


def _fixed(cmd: ServeCommand, fix: Fix) -> ServeCommand:
    return cmd.with_fix(fix.remove, fix.add, fix.env, fix.docker_add)


def _apply(cmd: ServeCommand, fix: Fix) -> str | None:
    """The command with the fix applied; None when that changes nothing (nothing to paste)."""
    fixed = cmd.with_fix(fix.remove, fix.add, fix.env, fix.docker_add)
    if fixed.same_settings(cmd):
        return None
    return as_written.render(cmd, fixed) or fixed.render()  # the user's text, only the serve part changed


# ---- a fixed command is judged by doctor itself before it is printed ---------------------------
def _blocking(
    fixed: ServeCommand, catalog: Catalog, ctx: Context, version: str | None
) -> list[Finding] | None:
    """The errors and warnings doctor gives the fixed command on `version` (None: it cannot be read).
    Judged as a fresh paste of it: read again with that release's flag table, so a flag the release
    lacks is seen."""
    from kvops.doctor.reading.cmdline import parse

    try:
        again = parse(fixed.render(), version)
    except UsageError:
        return None
    judged = diagnose(
        catalog,
        Inputs(
            model=ctx.model,
            cmd=again,
            version=version,
            version_source=ctx.version_source,
            vllm_root=ctx.vllm_root if version == ctx.version else None,
            host_ram_bytes=ctx.host_ram_bytes,
            shm_bytes=ctx.shm_bytes,
        ),
        self_check=False,
    )
    return [f for f in judged.findings if f.severity in ("error", "warning")]


def _upgrade_to(findings: list[Finding], fixed: ServeCommand, version: str | None) -> str | None:
    """A release that may clear every finding: past each playbook's `vllm_version: <X` bound, and
    one whose flag table has every flag the command uses (the caller judges it there to be sure)."""
    from kvops.doctor.reading import cli_schema
    from kvops.doctor.reading.cmdline import parse

    bounds = []
    for f in findings:
        conditions = f.playbook.conditions
        spec = str(conditions.get("vllm_version") or conditions.get("vllm_version_known") or "")
        bounds += [
            c.strip()[1:].strip() for c in spec.split(",") if c.strip().startswith("<") and "=" not in c
        ]
    try:
        unknown = parse(fixed.render(), version).unknown_flags
    except UsageError:
        return None
    for flag in unknown:
        where = cli_schema.releases_with(flag)
        if not where:
            return None  # a flag no release has: no upgrade helps
        bounds.append(where[0])
    if not bounds:
        return None
    best = max(bounds, key=lambda v: version_tuple(v) or (0, 0, 0))
    newer = (version_tuple(best) or (0, 0, 0)) > (version_tuple(version or "0.0") or (0, 0, 0))
    return best if newer else None


def _judge_fixes(finding: Finding, cmd: ServeCommand, catalog: Catalog, ctx: Context) -> None:
    """Print a fixed command only when doctor, judging it with the same release, raises no error or
    warning; else what it needs first (a newer release), else no command at all (said in a note)."""
    alt_cmds = finding.commands_for_alternatives()
    finding.alternative_needs = [None] * len(alt_cmds)
    for slot, fixed in sorted(finding.fixed_cmds.items()):
        blocking = _blocking(fixed, catalog, ctx, ctx.version)
        if blocking == []:
            continue
        needs = None
        if blocking:
            # the other findings' own fixes, applied too: one paste that clears them all
            combined = fixed
            for other in blocking:
                if other.playbook.fix is not None and not other.playbook.fix.is_empty():
                    combined = _fixed(combined, other.playbook.fix)
            fix = finding.fix if slot == -1 else (finding.alternatives or ())[slot]
            undone = fix is not None and any(not combined.has(t.partition("=")[0]) for t in fix.add)
            if combined is not fixed and not undone and _blocking(combined, catalog, ctx, ctx.version) == []:
                text = as_written.render(cmd, combined) or combined.render()
                shown = ", ".join(sorted({b.id for b in blocking}))
                finding.notes.append(f"the fixed command also applies the fix of {shown}")
                _set(finding, slot, text, None)
                continue
            upgrade = _upgrade_to(blocking, fixed, ctx.version)
            if upgrade and _blocking(fixed, catalog, ctx, upgrade) == []:
                needs = f"upgrade to vLLM >= {upgrade}"
        if needs is not None:
            _set(finding, slot, _current(finding, slot), needs)
            continue
        what = "it cannot be read back" if blocking is None else ", ".join(sorted({b.id for b in blocking}))
        where = f"vLLM {ctx.version}" if ctx.version else "this release"
        label = "fixed command" if slot == -1 else f"alternative {slot + 1}'s command"
        finding.notes.append(f"no {label} printed: doctor would still report {what} for it on {where}")
        _set(finding, slot, None, None)


def _current(finding: Finding, slot: int) -> str | None:
    return finding.fixed_command if slot == -1 else finding.commands_for_alternatives()[slot]


def _set(finding: Finding, slot: int, text: str | None, needs: str | None) -> None:
    if slot == -1:
        finding.fixed_command, finding.fixed_needs = text, needs
        return
    commands = finding.commands_for_alternatives()
    commands[slot] = text
    finding.alternative_commands = commands
    finding.alternative_needs[slot] = needs
