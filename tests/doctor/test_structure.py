"""kvops/doctor has no import cycles, counting imports inside functions (which is how the three
it had were hidden: cmdline<->serve_line, cli_checks<->rules, catalog<->logs)."""

from __future__ import annotations

import ast
from pathlib import Path

DOCTOR = Path(__file__).parents[2] / "kvops" / "doctor"


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(DOCTOR.glob("*.py")):
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "kvops.doctor":
                deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kvops.doctor."):
                deps.add(str(node.module).split(".")[2])
            elif isinstance(node, ast.Import):
                deps |= {a.name.split(".")[2] for a in node.names if a.name.startswith("kvops.doctor.")}
        graph[path.stem] = {d for d in deps if (DOCTOR / f"{d}.py").is_file() and d != path.stem}
    return graph


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
