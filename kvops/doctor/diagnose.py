"""Put the inputs together and turn matching playbooks into findings.

A finding comes from a log signature (with its context), from a playbook's conditions on the
model/command/version, or from this machine (only under --here). Text for people and JSON for
scripts are both rendered from the same Finding objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvops.doctor.catalog import Catalog, Fix, Playbook
from kvops.doctor.cmdline import ServeCommand, redact_text, reparse, secret_values
from kvops.doctor.logs import LogScan
from kvops.doctor.modelcfg import ModelInfo
from kvops.doctor.platform import Platform
from kvops.doctor.rules import Context, evaluate, version_tuple
from kvops.errors import UsageError

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


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

    @property
    def id(self) -> str:
        return self.playbook.id

    def commands_for_alternatives(self) -> list[str | None]:
        alts = self.alternative_commands
        return (
            alts if len(alts) == len(self.playbook.alternatives) else [None] * len(self.playbook.alternatives)
        )

    def to_dict(self) -> dict[str, Any]:
        pb = self.playbook
        fix = pb.fix or Fix()
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
            "fix_confidence": fix.confidence,
            "alternatives": [
                {**a.to_dict(with_confidence=True), "fixed_command": cmd}
                for a, cmd in zip(pb.alternatives, self.commands_for_alternatives(), strict=True)
            ],
            "fixed_command": self.fixed_command,
            "playbook": f"playbooks/{pb.path.name}",
        }


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

    @property
    def exit_code(self) -> int:
        return 1 if any(f.severity == "error" for f in self.findings) else 0


def resolve_version(flag: str | None, log: LogScan | None) -> tuple[str | None, str]:
    """--vllm-version, else the log's `vLLM API server version X` line, else the installed vllm."""
    if flag:
        if version_tuple(flag) is None:
            raise UsageError(f"--vllm-version {flag!r}: expected a release like 0.17.0 or 0.11")
        return flag, "--vllm-version"
    if log is not None and log.version:
        return log.version, "log"
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("vllm"), "installed vllm"
    except PackageNotFoundError:
        return None, "unknown"


def diagnose(
    catalog: Catalog,
    model: ModelInfo | None = None,
    cmd: ServeCommand | None = None,
    log: LogScan | None = None,
    version: str | None = None,
    version_source: str = "unknown",
    platform: Platform | None = None,
    only: set[str] | None = None,
    vllm_root: Path | None = None,
) -> Diagnosis:
    here = platform is not None
    cmd = reparse(cmd, version) if cmd is not None else None  # that release's flag table
    ctx = Context(model, cmd, version, version_source, platform, vllm_root)
    secrets = secret_values(cmd)
    findings: list[Finding] = []
    for pb in catalog.failures:
        if only and pb.id not in only:
            continue
        verdict = evaluate(pb.conditions, ctx, here) if pb.conditions else None
        hit = log.hits.get(pb.id) if log else None
        if hit is not None:
            evidence = hit.evidence()
            if verdict is not None and verdict.applies and verdict.holds:
                evidence += verdict.evidence
            finding = Finding(pb, pb.severity, "log", evidence)
        elif verdict is not None and verdict.applies and verdict.holds is not False:
            if verdict.holds is None and verdict.hard:
                continue  # only inputs we lack: "could not check", not a finding
            severity = str(pb.meta.get("config_severity", pb.severity))
            unknown = list(verdict.unknown)
            if verdict.holds is None:
                severity = "warning" if SEVERITY_ORDER.get(severity, 1) < 1 else severity
                note = pb.meta.get("version_note")
                if note and any("version" in u for u in unknown):
                    unknown.append(str(note))
            uses_host = "here" in pb.conditions or (platform is not None and cmd is None)
            finding = Finding(pb, severity, "platform" if uses_host else "config", verdict.evidence, unknown)
        else:
            continue
        if cmd is not None and pb.fix is not None and not pb.fix.is_empty():
            finding.fixed_command = _apply(cmd, pb.fix)
            applicable = cmd.launcher == "docker" or pb.fix.remove or pb.fix.add or pb.fix.env
            if finding.fixed_command is None and applicable:
                finding.notes.append("the command already carries this fix")
        finding.alternative_commands = [
            _apply(cmd, alt) if cmd is not None and not alt.is_empty() else None for alt in pb.alternatives
        ]
        finding.evidence = [redact_text(e, secrets) for e in finding.evidence]
        findings.append(finding)
    findings.sort(key=lambda f: (SEVERITY_ORDER.get(f.severity, 3), f.id))
    notes = []
    if cmd is not None and cmd.schema_note:
        notes.append(cmd.schema_note)
    if version is None:
        notes.append("vLLM version unknown: pass --vllm-version; version-bound checks are warnings")
    return Diagnosis(
        findings, version, version_source, model, cmd, platform, notes, log.lines if log else None
    )


def _apply(cmd: ServeCommand, fix: Fix) -> str | None:
    """The command with the fix applied; None when that changes nothing (nothing to paste)."""
    fixed = cmd.with_fix(fix.remove, fix.add, fix.env, fix.docker_add)
    return None if _same(fixed, cmd) else fixed.render()


def _same(a: ServeCommand, b: ServeCommand) -> bool:
    def norm(c: ServeCommand) -> tuple[object, ...]:
        return (sorted(c.env_dict().items()), sorted((x.flag, x.value) for x in c.args), c.docker_opts)

    return norm(a) == norm(b)
