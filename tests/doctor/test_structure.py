"""kvops/doctor has no import cycles, counting imports inside functions (which is how the three
it had were hidden: cmdline<->serve_line, cli_checks<->rules, catalog<->logs)."""

from __future__ import annotations

import ast
from pathlib import Path

DOCTOR = Path(__file__).parents[2] / "kvops" / "doctor"


def _module(path: Path) -> str:
    """kvops.doctor.<subpackage>.<module> (a package by its own name)."""
    parts = path.relative_to(DOCTOR.parents[1]).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    known = {_module(p): p for p in sorted(DOCTOR.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kvops.doctor"):
                for alias in node.names:  # `from pkg import module` or `from module import name`
                    full = f"{node.module}.{alias.name}"
                    deps.add(full if full in known else str(node.module))
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("kvops.doctor")}
        graph[name] = {d for d in deps if d in known and d != name}
    return graph


def test_the_graph_sees_modules_in_subpackages() -> None:
    graph = _graph()
    assert "kvops.doctor.reading.serve_line" in graph["kvops.doctor.reading.cmdline"]
    assert "kvops.doctor.judging.diagnose" in graph["kvops.doctor.reporting.report"]


def test_kvops_doctor_has_no_import_cycles() -> None:
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: list[str] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycles.append(" -> ".join([*path[path.index(dep) :], dep]))
            elif dep not in state:
                visit(dep, [*path, dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []
