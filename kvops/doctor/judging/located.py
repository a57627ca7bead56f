"""Where the log's fatal message is raised, put on the findings that quote it.

After the playbooks have judged a log: every finding from the log carries the log's own exception
line and `raised_at` (kvops/doctor/reading/error_sites.py: up to three sites, most specific first);
the release notes the table supports are said as hypotheses; a playbook that names the source
paths its failures come from (`raised_from:`) claims, at `info`, an exception located there that
none of its signatures matched; and a message that itself states its premise and remedy
(`stated_by_message:` playbooks) has that remedy's text quoted from the table's template.

The table is read only here, and only when the log has a fatal line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kvops.doctor.judging.catalog import Fix
from kvops.doctor.judging.logs import LogScan, clip
from kvops.doctor.reading import error_sites
from kvops.termsafe import visible

if TYPE_CHECKING:
    from kvops.doctor.judging.catalog import Catalog, Playbook

Finding = Any  # diagnose.Finding (diagnose imports this module: no import back)

UNKNOWN_FAILURE = "unknown-failure"


def _shown(site: error_sites.Site) -> str:
    return visible(site.shown())


def annotate(
    findings: list[Finding],
    log: LogScan | None,
    releases: dict[str, str | None],
    catalog: Catalog,
    make: Callable[..., Finding],
    only: frozenset[str] | None = None,
) -> None:
    """Add the exception line, `raised_at` and the release hypotheses to the log's findings; a
    family finding for an exception raised where a playbook says its failures come from."""
    if log is None or not log.fatal.found or log.fatal.exception is None:
        return
    fatal, exc = log.fatal, log.fatal.exception
    exception_line = f"log line {exc[0]} (exception): {visible(clip(exc[1]))}"
    located = error_sites.locate(fatal.exception_text, releases, log.engine or "vllm")
    raised_at = [m.site.to_dict() for m in located]
    head = " (the line's text is its head)"
    where = [f"raised at: {_shown(m.site)}{'' if m.whole else head}" for m in located]
    hypotheses: list[str] = []
    if located:
        package = located[0].site.package
        hypotheses = error_sites.release_notes(located, package, releases.get(package))
    _by_family(findings, located, catalog, make, only)
    native = fatal.native
    for f in findings:
        if f.source != "log":
            continue
        if not any(e.startswith(f"log line {exc[0]} ") for e in f.evidence):
            f.evidence.append(exception_line)
        quoted = native is not None and any(e.startswith(f"log line {native[0]} ") for e in f.evidence)
        if native is not None and f.id == UNKNOWN_FAILURE and not quoted:
            f.evidence.insert(
                0, f"log line {native[0]} (fatal, not a Python exception): {visible(clip(native[1]))}"
            )
        if not located:
            continue
        f.raised_at = raised_at
        f.evidence += [w for w in where if w not in f.evidence]
        f.evidence = [
            f"component: {located[0].site.path} (located by its message; no traceback frame names it)"
            if e.startswith("component: unknown")
            else e
            for e in f.evidence
        ]
        f.notes += [visible(h) for h in hypotheses if h not in f.notes]
        _stated(f, located)


def _by_family(
    findings: list[Finding],
    located: list[error_sites.Located],
    catalog: Catalog,
    make: Callable[..., Finding],
    only: frozenset[str] | None,
) -> None:
    """An exception raised under a playbook's `raised_from` paths that none of its signatures
    matched: reported under that playbook at `info` (a reworded message is not lost), in place
    of the catch-all quote."""
    if not located:
        return
    have = {f.id for f in findings}
    if any(f.source == "log" and f.id != UNKNOWN_FAILURE for f in findings):
        return  # a signature already explains the log: the location adds no family
    site = located[0].site
    best: tuple[int, Playbook, list[str]] | None = None  # the playbook naming the longest path
    for pb in catalog.failures:
        paths = pb.meta.get("raised_from") or []
        if pb.id in have or (only and pb.id not in only) or not isinstance(paths, list):
            continue
        for prefix in (str(p) for p in paths):
            if site.path.startswith(prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), pb, [str(p) for p in paths])
    if best is None:
        return
    _, pb, paths = best
    quote = next((f for f in findings if f.id == UNKNOWN_FAILURE), None)
    evidence = list(quote.evidence) if quote is not None else []
    under = ", ".join(paths)
    evidence.append(f"location: {visible(site.path)} is under this playbook's raised_from ({under})")
    notes = [
        "no signature of this playbook matches the message: its family is known from where it is raised,"
        " its cause is not; no fix proposed"
    ]
    findings.append(make(pb, "info", "log", evidence, notes=notes, unconfirmed=True))
    if quote is not None:
        findings.remove(quote)


# a flag a message names as its remedy: `--name` or `--name=value`, read from the template's literal text
REMEDY_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]{0,40}(?:=[A-Za-z0-9._-]{1,40})?(?![\w=-])")


def remedy_flags(template: str) -> list[str]:
    """The flags a template's literal text names, in order; a wildcard ends a literal piece, so a
    flag the log's wildcard text spells out is never read (only the table's template is)."""
    out: list[str] = []
    pieces = template.split(error_sites.WILD)
    for n, piece in enumerate(pieces):
        for m in REMEDY_FLAG.finditer(piece):
            # touching a wildcard (`--a{}`): the flag the log shows is partly the log's text
            cut = (m.start() == 0 and n > 0) or (m.end() == len(piece) and n < len(pieces) - 1)
            if not cut and m.group() not in out:
                out.append(m.group())
    return out


def _stated(f: Finding, located: list[error_sites.Located]) -> None:
    """A playbook whose failure the message itself states: its remedy is the message's, quoted
    from the template's literal text (never the log's text in the wildcards); with
    `remedy_from_message: docker_add` (or `add`), the fix's flags are that text's complete flags
    (`--ipc=host`; a bare `--shm-size` needs a value the message does not give: named, not added)."""
    marker = f.playbook.meta.get("stated_by_message")
    if not marker:
        return
    for m in located:
        text = m.site.template
        at = text.find(str(marker))
        if at >= 0:
            remedy = text[at:].replace(error_sites.WILD, "…")
            f.notes.append(
                visible(f"the raised message names the remedy ({m.site.path}, {m.site.function}): {remedy}")
            )
            _remedy_fix(f, text[at:])
            return


def _remedy_fix(f: Finding, remedy_template: str) -> None:
    where = f.playbook.meta.get("remedy_from_message")
    if where not in ("docker_add", "add") or f.unconfirmed or f.fix is None:
        return
    flags = remedy_flags(remedy_template)
    complete = tuple(t for t in flags if "=" in t)
    named = [t for t in flags if "=" not in t]
    said = visible(remedy_template.replace(error_sites.WILD, "…").strip())
    note = f"the message says: {said}"
    if named:
        note += f" (not added, the message gives no value for: {', '.join(named)})"
    base = f.playbook.fix or Fix()
    f.fix = replace(
        base,
        add=complete if where == "add" else base.add,
        docker_add=complete if where == "docker_add" else base.docker_add,
        note=" ".join(n for n in (note, base.note) if n),
    )
    f.fix_from_message = True
