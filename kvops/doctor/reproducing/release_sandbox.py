"""Run one function of a vLLM release's own source file on CPU, in this (child) process.

What is real: the release's `vllm/` Python tree from the cache (first on sys.path), the local
torch (CPU build), numpy, pydantic, regex, PyYAML, psutil. What stands in, and only at the edge:
- the third-party packages in EDGE_PACKAGES (tokenizers, HTTP, serialisation, ZMQ ...). vLLM
  imports them at module level, the functions run here never call them. Each becomes an empty
  module whose attributes are inert classes, so `class X(msgspec.Struct)` or a decorator import
  still works (the stand-ins of kvops/doctor/reading/release_stand_ins.py, which the recorder of
  vllm_cli.json uses too); which ones were touched is reported;
- the compiled extension modules the wheel carried (`vllm._C`, ...): CUDA builds, not loadable.

The function itself is compiled from the release's file at its own line numbers, and the names it
uses are bound by that file's own import statements to the release's own modules. A traceback
therefore points into the release's source, line for line.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kvops.doctor.reading import release_stand_ins

# Imported at module level by vLLM's config / attention / model modules, never called by the
# functions reproduced. Stood in for even when installed, so every machine runs the same thing.
EDGE_PACKAGES = (
    "aiohttp",
    "blake3",
    "cachetools",
    "cbor2",
    "diskcache",
    "einops",
    "fastapi",
    "gguf",
    "huggingface_hub",
    "llguidance",
    "mistral_common",
    "msgspec",
    "openai",
    "openai_harmony",
    "PIL",
    "pybase64",
    "safetensors",
    "tqdm",
    "transformers",
    "xgrammar",
    "zmq",
)

HOW_LOADED: dict[str, str] = {}  # qualname -> how load_function obtained it


def enter(root: Path, extensions: Iterable[str]) -> None:
    """Make `import vllm` load the release at `root`, with the edge stood in."""
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        del sys.modules[name]
    for name in EDGE_PACKAGES:
        sys.modules.pop(name, None)
    sys.path.insert(0, str(root))
    # the edge packages even when installed (an installed copy must not be used); vllm's compiled
    # modules only when nothing else has them (only the .so, absent here, would have matched)
    release_stand_ins.install(release_stand_ins.StandInFinder(always=EDGE_PACKAGES, extensions=extensions))


def stood_in() -> list[str]:
    """The modules this run stood in (reported beside the result)."""
    return release_stand_ins.stood_in()


def find_class(root: Path, name: str, base: str) -> tuple[str, type] | None:
    """(module, class) of the release's `class <name>(...<base>...)`, wherever this release keeps it."""
    needle = f"class {name}("
    for path in sorted((root / "vllm").rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        at = text.find(needle)
        if at < 0 or base not in text[at : text.find(":", at)]:
            continue
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        return module, getattr(importlib.import_module(module), name)
    return None


def find_function(path: Path, qualname: str) -> ast.FunctionDef | None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return _lookup(tree.body, qualname.split("."))


def _lookup(body: list[ast.stmt], parts: list[str]) -> ast.FunctionDef | None:
    for node in body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == parts[0]:
            if len(parts) == 1:
                return node if isinstance(node, ast.FunctionDef) else None
            return _lookup(node.body, parts[1:])
    return None


def calls(func: ast.FunctionDef, name: str) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name for n in ast.walk(func)
    )


def load_function(path: Path, qualname: str, stand_ins: dict[str, Any] | None = None) -> Callable[..., Any]:
    """The function `qualname` of the release file `path`, as the release itself would run it.

    A module-level function of a module that imports here is taken from the imported module.
    Otherwise (a method, or a module whose other imports need the edge for real) the function is
    compiled from that file at its own lines, and its free names are bound as the file binds them:
    by the file's own top-level imports (to the release's own modules) or its top-level
    definitions, followed transitively; `stand_ins` replaces the few that reach the GPU (named by
    the caller, reported by it).
    """
    if "." not in qualname and not stand_ins:
        try:
            function = getattr(importlib.import_module(_module_name(path)), qualname)
            HOW_LOADED[qualname] = f"imported from {_module_name(path)}"
            return function
        except Exception as exc:  # any import failure: compile the function alone instead
            why = f"{type(exc).__name__}: {exc}"
    else:
        why = "a method" if "." in qualname else "some of its names stood in"
    HOW_LOADED[qualname] = f"compiled from its file at its own lines ({why[:200]})"
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    func = _lookup(tree.body, qualname.split("."))
    if func is None:
        raise LookupError(f"{qualname} not found in {path}")
    stand_ins = stand_ins or {}
    imports, defs = _top_level_bindings(tree)
    namespace: dict[str, Any] = {"__name__": _module_name(path), "__file__": str(path)}
    body: list[ast.stmt] = [func]
    todo, seen = list(_free_names(func)), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in stand_ins:
            namespace[name] = stand_ins[name]
        elif name in imports:
            module, attr = imports[name]
            namespace[name] = _import(module, attr)
        elif name in defs and defs[name] not in body:
            body.append(defs[name])
            todo.extend(_free_names(defs[name]))
    body.sort(key=lambda n: n.lineno)
    code = compile(ast.Module(body=body, type_ignores=[]), str(path), "exec")
    exec(code, namespace)  # the release's own code, at its own file and line numbers
    return namespace[func.name]


def _import(module: str, attr: str | None) -> Any:
    mod = importlib.import_module(module)
    if attr is None:
        return mod
    try:
        return getattr(mod, attr)
    except AttributeError:  # `from package import submodule`
        return importlib.import_module(f"{module}.{attr}")


def _module_name(path: Path) -> str:
    parts = list(path.with_suffix("").parts)
    return ".".join(parts[len(parts) - 1 - parts[::-1].index("vllm") :])


def _top_level_bindings(tree: ast.Module) -> tuple[dict[str, tuple[str, str | None]], dict[str, ast.stmt]]:
    imports: dict[str, tuple[str, str | None]] = {}
    defs: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    imports[alias.asname] = (alias.name, None)
                else:
                    top = alias.name.split(".")[0]
                    imports[top] = (top, None)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                imports[alias.asname or alias.name] = (node.module, alias.name)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defs[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    defs[target.id] = node
    return imports, defs


def _free_names(node: ast.AST) -> set[str]:
    loaded = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    bound = {a.arg for a in ast.walk(node) if isinstance(a, ast.arg)}
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        bound |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return loaded - bound
