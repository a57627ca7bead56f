"""Diagnosis → text for people or JSON for scripts (the doctor contract in docs/DESIGN.md)."""

from __future__ import annotations

import json
import re
from typing import Any

from kvops.doctor.judging.catalog import Catalog, Fix
from kvops.doctor.judging.diagnose import Diagnosis, Finding
from kvops.doctor.reading.cmdline import redact_text, secret_values
from kvops.doctor.reading.platform import describe
from kvops.termsafe import visible


def to_json(d: Diagnosis, catalog: Catalog) -> str:
    secrets = secret_values(d.cmd)
    out: dict[str, Any] = {
        "findings": [f.to_dict() for f in d.findings],
        "vllm_version": {"version": d.version, "source": d.version_source},
        "model": None
        if d.model is None
        else {
            "path": d.model.path,
            "model_type": d.model.model_type,
            "attention": d.model.attention,
            "kinds": sorted(d.model.kinds),
            "num_layers": d.model.num_layers,
            "kv_bytes_per_token": d.model.kv_bytes_per_token(),
        },
        "command": None
        if d.cmd is None
        else {
            "launcher": d.cmd.launcher,
            "command": d.cmd.render(),
            "source": d.command_source,
            "line_also_runs": d.also_runs,  # text shown apart, never a command to paste
            "connector": d.cmd.connector(),
            "unknown_flags": list(d.cmd.unknown_flags),
        },
        "platform": None if d.platform is None else d.platform.to_dict(),
        "log_lines": d.log_lines,
        "notes": d.notes,
        "playbook_problems": list(catalog.problems),
        "exit_code": d.exit_code,
    }
    return json.dumps(_redacted(out, secrets), indent=2)


def _redacted(value: Any, secrets: dict[str, str]) -> Any:
    """Redact every string in the tree (not the serialised text, which could break JSON)."""
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {k: _redacted(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v, secrets) for v in value]
    return value


def _first_sentences(text: str, limit: int = 360) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) <= limit:
        return text
    cut = text[:limit]
    dot = cut.rfind(". ")
    return (cut[: dot + 1] if dot > 80 else cut.rstrip() + "...").strip()


def _describe_fix(fix: Fix) -> str:
    parts = []
    if fix.remove:
        parts.append("remove " + " ".join(fix.remove))
    if fix.add:
        parts.append("add " + " ".join(fix.add))
    if fix.env:
        parts.append("env " + " ".join(f"{k}={'<unset>' if v is None else v}" for k, v in fix.env.items()))
    if fix.docker_add:
        parts.append("docker " + " ".join(fix.docker_add))
    what = "; ".join(parts)
    return f"{what}: {fix.note}" if what and fix.note else what or fix.note


def _finding_text(f: Finding) -> list[str]:
    pb = f.playbook
    lines = [f"{f.severity.upper()} {pb.id} ({f.source}): {pb.title}"]
    lines.append(f"  why: {_first_sentences(pb.section('Meaning'))}")
    if f.evidence:
        lines.append("  evidence:")
        lines += [f"    - {e}" for e in f.evidence]
    if f.unknown:
        lines.append("  could not check: " + "; ".join(f.unknown))
    lines += [f"  note: {note}" for note in f.notes]
    if f.fix is not None:
        lines.append(f"  fix [{f.fix.confidence}]: {_describe_fix(f.fix)}")
    if f.fixed_command:
        lines.append(f"  fixed command ({f.fixed_needs}, then):" if f.fixed_needs else "  fixed command:")
        lines += [f"    {line}" for line in f.fixed_command.split("\n")]  # the user's lines, indented
    alternatives = f.alternatives or ()
    if alternatives:
        lines.append("  alternatives (weakest last):")
        for alt, cmd, needs in zip(
            alternatives, f.commands_for_alternatives(), f.needs_for_alternatives(), strict=False
        ):
            lines.append(f"    - [{alt.confidence}] {_describe_fix(alt)}")
            if cmd and needs:
                lines.append(f"        ({needs}, then:)")
            if cmd:
                lines += [f"        {line}" for line in cmd.split("\n")]
    lines.append(f"  playbook: playbooks/{pb.path.name}  (confidence: {pb.confidence})")
    return lines


def to_text(d: Diagnosis, catalog: Catalog) -> str:
    secrets = secret_values(d.cmd)
    lines: list[str] = []
    src = f" ({d.version_source})" if d.version else ""
    lines.append(f"vLLM version: {d.version or 'unknown'}{src}")
    if d.model is not None:
        m = d.model
        lines.append(
            f"model: {m.model_type}, attention {m.attention} ({', '.join(sorted(m.kinds))}),"
            f" {m.num_layers} layers, {m.kv_bytes_per_token():,} KV bytes/token"
        )
    if d.cmd is not None:
        lines.append(f"command: {d.cmd.launcher}, KV connector: {d.cmd.connector() or 'none'}")
    if d.log_lines is not None:
        lines.append(f"log: {d.log_lines:,} lines read")
    if d.platform is not None:
        lines.append("this machine:")
        lines += [f"  {line}" for line in describe(d.platform)]
    for note in d.notes:
        lines.append(f"note: {note}")
    for problem in catalog.problems:
        lines.append(f"playbook problem: {problem}")
    lines.append("")
    for f in d.findings:
        lines += _finding_text(f)
        lines.append("")
    errors = sum(f.severity == "error" for f in d.findings)
    warnings = sum(f.severity == "warning" for f in d.findings)
    if not d.findings:
        lines.append("No known failure matched.")
    else:
        lines.append(f"{errors} error(s), {warnings} warning(s), {len(d.findings) - errors - warnings} info")
    # evidence lines, versions and model names come from outside: shown, never interpreted
    return visible(redact_text("\n".join(lines), secrets), keep_newlines=True)


def list_checks(catalog: Catalog, as_json: bool) -> str:
    rows: list[dict[str, Any]] = [
        {
            "id": pb.id,
            "kind": pb.kind,
            "severity": pb.severity,
            "title": pb.title,
            "confidence": pb.confidence,
            "matches": [k for k, v in (("log", pb.signatures), ("config", pb.conditions)) if v],
            # a silent misconfiguration: nothing in any log, only the command/model/version tell
            "silent": pb.kind == "failure" and not pb.signatures and bool(pb.conditions),
            "playbook": f"playbooks/{pb.path.name}",
        }
        for pb in (*catalog.failures, *catalog.alerts)
    ]
    if as_json:
        return json.dumps({"checks": rows, "playbook_problems": list(catalog.problems)}, indent=2)
    failures = [r for r in rows if r["kind"] == "failure"]
    silent = [r for r in failures if r["silent"]]
    lines = [f"{len(failures) - len(silent)} failure checks (a log line, and/or the command/model):"]
    lines += [
        f"  {r['id']:<40} {r['severity']:<8} {'+'.join(r['matches']):<11} {r['title'][:80]}"
        for r in failures
        if not r["silent"]
    ]
    lines.append(f"{len(silent)} silent misconfigurations (no error anywhere; read from the command/model):")
    lines += [f"  {r['id']:<40} {r['severity']:<8} {'config':<11} {r['title'][:80]}" for r in silent]
    lines.append(
        "  (log+config checks above are also judged from the command/model before anything fails:"
        " offload tier vs host RAM or /dev/shm with --here/--host-ram/--shm, offloading a model"
        " whose attention the release cannot offload)"
    )
    if catalog.alerts:
        lines.append(f"{len(catalog.alerts)} alert runbooks (for the alert rules; not matched by doctor):")
        lines += [
            f"  {r['id']:<40} {r['severity']:<8} {r['title'][:80]}" for r in rows if r["kind"] != "failure"
        ]
    lines += [f"playbook problem: {p}" for p in catalog.problems]
    return visible("\n".join(lines), keep_newlines=True)
