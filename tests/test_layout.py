"""The code's shape, kept by CI: no import cycle among kvops modules (imports inside functions
and under TYPE_CHECKING count: the same dependency either way), and no function in kvops/ longer
than 80 lines, docstring included.

kvops/doctor/ included (its three cycles, cmdline <-> serve_line, cli_checks <-> rules and
catalog <-> logs, are gone). The import-linter contracts in pyproject.toml keep the layers between
packages and along doctor's pipeline.
"""

from __future__ import annotations

import ast
from pathlib import Path

KVOPS = Path(__file__).resolve().parents[1] / "kvops"
MAX_LINES = 80


def module_name(path: Path) -> str:
    parts = path.relative_to(KVOPS.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(KVOPS.rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every kvops module `name` imports, wherever the import statement is."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from a import b`: the module a.b where it is one, else a
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names
            ]
        else:
            continue
        out.update(t for t in targets if t in known and t != name)
    return out


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imports_of(name, path, known) for name, path in found.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def long_functions() -> list[str]:
    out = []
    for path in modules().values():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                length = (node.end_lineno or node.lineno) - first + 1
                if length > MAX_LINES:
                    out.append(f"{path.relative_to(KVOPS.parent)}:{node.lineno} {node.name} {length} lines")
    return out


def test_no_import_cycle() -> None:
    assert cycles(graph()) == []


def test_the_cycle_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    a = tmp_path / "a.py"
    a.write_text("def f():\n    from kvops import b\n")
    assert imports_of("kvops.a", a, {"kvops.a", "kvops.b"}) == {"kvops.b"}
    b = tmp_path / "b.py"
    b.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kvops.a import f\n")
    assert imports_of("kvops.b", b, {"kvops.a", "kvops.b"}) == {"kvops.a"}
    assert cycles({"kvops.a": {"kvops.b"}, "kvops.b": {"kvops.a"}}) == [["kvops.a", "kvops.b"]]


def test_no_function_over_80_lines() -> None:
    assert long_functions() == []
