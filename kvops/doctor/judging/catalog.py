"""playbooks/*.md → Playbook objects: the one place failure knowledge lives.

A playbook is Markdown with YAML front matter between `---` lines. `kind: failure` playbooks
carry the machine-readable part doctor matches with (signatures, context, conditions, fix);
`kind: alert` runbooks (written for the alert rules) are loaded and listed but never matched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvops.doctor.reading.facts import FACTS
from kvops.errors import UsageError

REQUIRED = ("id", "kind", "title", "severity")
SEVERITIES = ("error", "warning", "info")
SECTIONS = ("Meaning", "Impact", "Diagnosis", "Mitigation", "Sources")


class PlaybookError(ValueError):
    """A playbook file that cannot be used; the message names the file."""


@dataclass(frozen=True)
class Fix:
    remove: tuple[str, ...] = ()
    add: tuple[str, ...] = ()
    env: dict[str, str | None] = field(default_factory=dict)
    docker_add: tuple[str, ...] = ()  # docker run options, used only when the command is a docker line
    confidence: str = "sourced"
    note: str = ""

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> Fix:
        if not isinstance(raw, dict):
            raise PlaybookError(f"{where}: fix must be a mapping")
        env = raw.get("env") or {}
        if not isinstance(env, dict):
            raise PlaybookError(f"{where}: fix.env must be a mapping")
        for token in raw.get("add") or []:
            if not str(token).startswith("--"):
                raise PlaybookError(f"{where}: fix.add token {token!r} is not --flag[=value]")
        return cls(
            remove=tuple(str(f) for f in raw.get("remove") or []),
            add=tuple(str(f) for f in raw.get("add") or []),
            env={str(k): None if v is None else str(v) for k, v in env.items()},
            docker_add=tuple(str(f) for f in raw.get("docker_add") or []),
            confidence=str(raw.get("confidence", "sourced")),
            note=str(raw.get("note", "")).strip(),
        )

    def to_dict(self, with_confidence: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"remove": list(self.remove), "add": list(self.add), "env": dict(self.env)}
        if self.docker_add:
            out["docker_add"] = list(self.docker_add)
        if with_confidence:
            out["confidence"] = self.confidence
        if self.note:
            out["note"] = self.note
        return out

    def is_empty(self) -> bool:
        return not (self.remove or self.add or self.env or self.docker_add)


@dataclass(frozen=True)
class Playbook:
    id: str
    kind: str  # failure | alert
    title: str
    severity: str
    path: Path
    meta: dict[str, Any]
    body: str
    signatures: tuple[re.Pattern[str], ...] = ()
    context: tuple[re.Pattern[str], ...] = ()
    requires: tuple[str, ...] = ()  # evidence facts (logs.FACTS) a log match needs to be a claim
    conditions: dict[str, Any] = field(default_factory=dict)
    fix: Fix | None = None
    alternatives: tuple[Fix, ...] = ()

    @property
    def confidence(self) -> str:
        return str(self.meta.get("confidence", ""))

    @property
    def source_id(self) -> str:
        return str(self.meta.get("source_id", ""))

    def section(self, name: str) -> str:
        m = re.search(rf"^##\s+{re.escape(name)}\s*$(.*?)(?=^##\s|\Z)", self.body, re.M | re.S)
        return m.group(1).strip() if m else ""


def split_front_matter(text: str, where: str) -> tuple[dict[str, Any], str]:
    import yaml

    if not text.startswith("---"):
        raise PlaybookError(f"{where}: no YAML front matter (the file must start with ---)")
    parts = re.split(r"^---\s*$", text, maxsplit=2, flags=re.M)
    if len(parts) < 3:
        raise PlaybookError(f"{where}: front matter is not closed with ---")
    try:
        # libyaml's safe loader when present: the same documents, several times faster to load
        meta = yaml.load(parts[1], Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise PlaybookError(f"{where}: front matter is not valid YAML: {exc}") from None
    if not isinstance(meta, dict):
        raise PlaybookError(f"{where}: front matter is not a mapping")
    return meta, parts[2]


def _patterns(raw: Any, where: str, key: str, flags: int = 0) -> tuple[re.Pattern[str], ...]:
    items = [raw] if isinstance(raw, str) else list(raw or [])
    out = []
    for item in items:
        try:
            out.append(re.compile(str(item), flags))
        except re.error as exc:
            raise PlaybookError(f"{where}: {key} regex {item!r} does not compile: {exc}") from None
    return tuple(out)


def parse_playbook(path: Path) -> Playbook:
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PlaybookError(f"{where}: cannot read: {exc}") from None
    meta, body = split_front_matter(text, where)
    missing = [k for k in REQUIRED if not meta.get(k)]
    if missing:
        raise PlaybookError(f"{where}: front matter lacks {', '.join(missing)}")
    severity = str(meta["severity"]).lower()
    kind = str(meta["kind"])
    if kind == "failure" and severity not in SEVERITIES:
        raise PlaybookError(f"{where}: severity {severity!r} is not one of {', '.join(SEVERITIES)}")
    pb = Playbook(
        id=str(meta["id"]),
        kind=kind,
        title=str(meta["title"]),
        severity=severity,
        path=path,
        meta=meta,
        body=body,
    )
    if kind != "failure":
        return pb  # alert runbooks: listed, never matched
    conditions = meta.get("conditions") or {}
    if not isinstance(conditions, dict):
        raise PlaybookError(f"{where}: conditions must be a mapping")
    from kvops.doctor.judging.rules import problems

    wrong = problems(conditions)
    if wrong:
        raise PlaybookError(f"{where}: {'; '.join(wrong)}")
    for key in ("supersedes",):
        value = meta.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise PlaybookError(f"{where}: {key} must be a list of playbook ids")
    requires = meta.get("requires") or []
    if not isinstance(requires, list) or any(str(r) not in FACTS for r in requires):
        raise PlaybookError(f"{where}: requires must list facts among {', '.join(FACTS)}")
    fix = Fix.from_dict(meta["fix"], where) if meta.get("fix") else None
    alternatives = tuple(Fix.from_dict(a, where) for a in meta.get("alternatives") or [])
    return Playbook(
        id=pb.id,
        kind=kind,
        title=pb.title,
        severity=severity,
        path=path,
        meta=meta,
        body=body,
        signatures=_patterns(meta.get("signatures"), where, "signatures"),
        # context names files, functions, vendors: matched case-insensitively
        context=_patterns(meta.get("context"), where, "context", re.IGNORECASE),
        requires=tuple(str(r) for r in requires),
        conditions=conditions,
        fix=fix,
        alternatives=alternatives,
    )


@dataclass(frozen=True)
class Catalog:
    failures: tuple[Playbook, ...]
    alerts: tuple[Playbook, ...]
    problems: tuple[str, ...]  # playbooks that could not be read, one line each

    def get(self, playbook_id: str) -> Playbook | None:
        for pb in self.failures:
            if pb.id == playbook_id:
                return pb
        return None


def load(directory: Path | None = None) -> Catalog:
    """Every playbook in the folder. A broken file is reported, never fatal to the others."""
    from kvops.playbooks_path import playbooks_dir

    folder = directory or playbooks_dir()
    if not folder.is_dir():
        raise UsageError(f"playbooks folder not found: {folder}")
    failures: list[Playbook] = []
    alerts: list[Playbook] = []
    problems: list[str] = []
    seen: set[str] = set()
    for path in sorted(folder.glob("*.md")):
        if path.name.lower() == "readme.md":
            continue
        try:
            pb = parse_playbook(path)
        except PlaybookError as exc:
            problems.append(str(exc))
            continue
        if pb.id in seen:
            problems.append(f"{path}: duplicate id {pb.id}")
            continue
        seen.add(pb.id)
        (failures if pb.kind == "failure" else alerts).append(pb)
    return Catalog(tuple(failures), tuple(alerts), tuple(problems))
