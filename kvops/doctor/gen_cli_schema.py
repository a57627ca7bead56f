"""Regenerate kvops/doctor/reading/vllm_cli.json: the `vllm serve` flags of every supported vLLM release,
recorded from each release's OWN argument parser.

    python -m kvops.doctor.gen_cli_schema --download ~/.cache/kvops/vllm > /tmp/vllm_cli.json
    python -m kvops.doctor.gen_cli_schema --sources DIR > /tmp/vllm_cli.json
        (DIR/<version>/vllm/... already holds each release's Python files)
    cmp /tmp/vllm_cli.json kvops/doctor/reading/vllm_cli.json

(docs/doctor.md, "The vLLM CLI schema": the cache, the time, what a failed release does.)

How it was derived (and what is approximate):
- Needs the `schema-gen` extra (torch, pydantic, msgspec, ...) installed; checked before recording.
- `--download` fetches each release's wheel from PyPI with `pip download --no-deps vllm==X`
  and keeps only its `vllm/**/*.py` (nothing is built; the CUDA extensions are not used).
- For each release a fresh interpreter (`--record DIR`) imports the module that release's
  `vllm serve` (entrypoints/cli/serve.py) takes make_arg_parser from, calls its own
  `make_arg_parser(FlexibleArgumentParser())` (what both `vllm serve` and `python -m
  vllm.entrypoints.openai.api_server` use) and reads the resulting parser's `_actions`: option
  strings (aliases, the `--no-` forms that BooleanOptionalAction adds), action kind, nargs,
  choices, default and the value type.
- vLLM's imports are satisfied by the release's own files, the local torch, pydantic, numpy,
  yaml, regex, ...; third-party modules that are not installed here (transformers, fastapi,
  ...) and vLLM's compiled `_C` extensions are replaced by permissive stand-ins (the ones
  `kvops doctor --repro` uses: kvops/doctor/reading/release_stand_ins.py). The
  platform is pinned to CUDA (vllm.platforms.cuda.CudaPlatform), and importlib.metadata tells
  vLLM's code version 99.0.0 for a stand-in library (its newest-library code path). So: flag
  names, kinds, nargs and choices are vLLM's own; a default that vLLM computes from a missing
  library or from the GPU may differ from a real CUDA install (defaults are informational,
  never used to judge).
- The value type is found by calling the action's own `type` on probes: a JSON object string
  parsed into a non-string -> "json"; "7" -> int; "0.5" -> float; `str_to_bool`-style -> bool.
- FlexibleArgumentParser's rewrites are read from the release's `parse_args` source: `_`/`-`
  in flag names (all releases), dotted `--x.y v` keys folded into the JSON of `--x` (and
  `--x.y+ a,b` lists), what `-O3` means (`-O.level=3` / `--optimization-level 3`) and the
  `--config` YAML file. kvops applies them in kvops/doctor/reading/cli_schema.py.

The output is compact: each flag lists variants, each with the releases it holds in, written as
ranges of consecutive entries of `releases` ("0.10.0..0.14.1").
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kvops.doctor.reading import release_stand_ins
from kvops.termsafe import visible

# Every release kvops supports: each minor's patches from 0.10.0 to 0.33.0 (PyPI's list).
_RELEASE_LIST = (
    "0.10.0 0.10.1 0.10.1.1 0.10.2 0.11.0 0.11.1 0.11.2 0.12.0 0.13.0 0.14.0 0.14.1 0.15.0 "
    "0.15.1 0.16.0 0.17.0 0.17.1 0.18.0 0.18.1 0.19.0 0.19.1 0.20.0 0.20.1 0.20.2 0.21.0 "
    "0.22.0 0.22.1 0.23.0 0.24.0 0.25.0 0.25.1 0.26.0 0.27.0 0.27.1 0.28.0 0.29.0 0.30.0 "
    "0.31.0 0.32.0 0.33.0"
)
RELEASES = tuple(_RELEASE_LIST.split())

# The schema-gen extra (pyproject.toml): what the releases' parser code imports for real. Each is
# checked before recording, since a missing one would quietly become a stand-in.
SCHEMA_GEN_MODULES = ("torch", "pydantic", "msgspec", "numpy", "regex", "cloudpickle", "psutil")


# ---- recording one release (runs in its own interpreter) ---------------------------------------
def _parser_home(root: str) -> str:
    """The module `vllm serve` takes make_arg_parser from (it moved: openai/cli_args.py,
    launchers/cli_args.py in 0.29, common/cli_args.py later), read from entrypoints/cli/serve.py."""
    serve = Path(root, "vllm", "entrypoints", "cli", "serve.py").read_text(encoding="utf-8")
    m = re.search(
        r"from (vllm\.[\w.]+) import (?:\([^)]*?\bmake_arg_parser\b|[^\n(]*\bmake_arg_parser\b)", serve
    )
    return m.group(1) if m else "vllm.entrypoints.openai.cli_args"


def _value_type(action: argparse.Action) -> str | None:
    """What the action's own `type` makes of probe strings."""
    fn = action.type
    if fn is None:
        return None if action.nargs == 0 else "str"
    if fn in (int, float, str):
        return fn.__name__

    def attempt(text: str) -> Any:
        try:
            return fn(text)  # type: ignore[misc, operator]
        except Exception:
            return _FAILED

    as_json = attempt('{"kvops_probe": 1}')
    if as_json is not _FAILED and not isinstance(as_json, str):
        return "json"
    if attempt("false") is False and attempt("true") is True:
        return "bool"
    number = attempt("7")
    if isinstance(number, int) and not isinstance(number, bool):
        return "int"
    if isinstance(attempt("0.5"), float):
        return "float"
    return "str"


_FAILED = object()


def _kind(action: argparse.Action) -> str:
    name = type(action).__name__
    for cls, kind in (
        (argparse.BooleanOptionalAction, "bool_optional"),
        (argparse._StoreTrueAction, "store_true"),
        (argparse._StoreFalseAction, "store_false"),
        (argparse._StoreConstAction, "store_const"),
        (argparse._AppendAction, "append"),
        (argparse._CountAction, "count"),
        (argparse._HelpAction, "help"),
        (argparse._StoreAction, "store"),
    ):
        if isinstance(action, cls):
            return kind
    return "bool_optional" if "BooleanOptional" in name else f"other:{name}"


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value if not isinstance(value, float) or value == value else None
    if isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float, str)) for v in value):
        return list(value)
    return repr(value)[:80]


def record(root: str) -> dict[str, Any]:
    """Import the release under `root` and read its serve parser's actions."""
    root = os.path.abspath(root)
    sys.path.insert(0, root)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    # what the release imports and cannot have here becomes a stand-in (release_stand_ins.py)
    release_stand_ins.install(release_stand_ins.StandInFinder(release_root=root))
    release_stand_ins.stand_in_versions(root)
    import vllm.platforms as platforms

    platforms.resolve_current_platform_cls_qualname = lambda: "vllm.platforms.cuda.CudaPlatform"  # type: ignore[attr-defined]
    if hasattr(platforms, "_current_platform"):
        platforms._current_platform = None  # resolved during `import vllm` (newer releases): redo
    import importlib

    home = _parser_home(root)
    if not Path(root, *home.split(".")).with_suffix(".py").is_file():
        raise SystemExit(f"{home} is not in this release's files")  # never a stand-in
    cli_args = importlib.import_module(home)
    # the parser class cli_args itself imports (its home module moved between releases)
    flexible = cli_args.FlexibleArgumentParser
    parser = cli_args.make_arg_parser(flexible())
    flags = []
    for action in parser._actions:
        if not action.option_strings:
            continue  # the positional model_tag
        choices = None
        if action.choices is not None:
            choices = sorted({str(c) for c in action.choices})
        flags.append(
            {
                "names": list(action.option_strings),
                "dest": action.dest,
                "kind": _kind(action),
                "nargs": action.nargs,
                "choices": choices,
                "type": _value_type(action),
                "default": _jsonable(action.default),
            }
        )
    return {"flags": flags, "rewrites": _rewrites(flexible)}


def _rewrites(parser_cls: type) -> dict[str, Any]:
    """FlexibleArgumentParser's rewrites, read from the release's own parse_args source."""
    import inspect

    src = inspect.getsource(parser_cls)
    if "--optimization-level" in src:
        o_flag = "--optimization-level"
    elif "-O.level" in src:
        o_flag = "-O.level"
    elif "-O.mode" in src:
        o_flag = "-O.mode"
    else:
        o_flag = None
    return {
        "underscores": 'replace("_", "-")' in src or "replace('_', '-')" in src,
        "dotted_keys": "create_nested_dict" in src or "nested_dict" in src,
        "dotted_list_plus": 'endswith("+")' in src or "endswith('+')" in src,
        "o_level": o_flag,
        "config_yaml": "_pull_args_from_config" in src,
    }


# ---- merging every release -------------------------------------------------------------------
def ranges(indices: list[int], releases: Sequence[str]) -> list[str]:
    """Sorted indices into `releases` as runs of consecutive entries ("0.10.0..0.14.1")."""
    out: list[str] = []
    start = prev = indices[0]
    for i in [*indices[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        out.append(releases[start] if start == prev else f"{releases[start]}..{releases[prev]}")
        if i is not None:
            start = prev = i
    return out


def merge(per_release: dict[str, dict[str, Any]]) -> dict[str, Any]:
    releases = list(per_release)
    variants: dict[str, list[tuple[dict[str, Any], list[int]]]] = {}
    rewrites: list[tuple[dict[str, Any], list[int]]] = []
    for idx, version in enumerate(releases):
        rec = per_release[version]
        for flag in rec["flags"]:
            key = flag["names"][0] if flag["names"][0].startswith("--") else flag["names"][-1]
            body = {k: v for k, v in flag.items() if v is not None and k != "dest"} | {"dest": flag["dest"]}
            slots = variants.setdefault(key, [])
            for existing, where in slots:
                if existing == body:
                    where.append(idx)
                    break
            else:
                slots.append((body, [idx]))
        for existing, where in rewrites:
            if existing == rec["rewrites"]:
                where.append(idx)
                break
        else:
            rewrites.append((rec["rewrites"], [idx]))
    return {
        "generated_by": "python -m kvops.doctor.gen_cli_schema (see its docstring)",
        "releases": releases,
        "rewrites": [{"releases": ranges(w, releases), **body} for body, w in rewrites],
        "flags": {
            key: [{"releases": ranges(w, releases), **body} for body, w in slots]
            for key, slots in sorted(variants.items())
        },
    }


def _download(version: str, cache: Path) -> Path:
    """The release's Python files, fetched once with pip: the same cache `kvops doctor --repro`
    keeps (kvops.doctor.reading.vllm_release), so a release downloaded for one is there for the other."""
    from kvops.doctor.reading.vllm_release import fetch

    return fetch(version, cache=cache).root


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--download", metavar="CACHE_DIR", help="fetch each release's wheel into this cache")
    group.add_argument("--sources", metavar="DIR", help="DIR/<version>/vllm/ already extracted")
    group.add_argument("--record", metavar="ROOT", help=argparse.SUPPRESS)  # one release, in a child
    ap.add_argument("--releases", nargs="+", default=list(RELEASES))
    args = ap.parse_args(argv)
    if args.record:
        out = os.fdopen(os.dup(1), "w")
        sys.stdout = sys.stderr  # vLLM logs to stdout: keep it out of the JSON
        json.dump(record(args.record), out)
        out.close()
        return 0
    missing = [name for name in SCHEMA_GEN_MODULES if importlib.util.find_spec(name) is None]
    if missing:  # a stand-in for one of them records another parser (msgspec: "'fields' object ...")
        print(
            f"gen_cli_schema: {', '.join(missing)} not installed here; pip install -e '.[schema-gen]' first",
            file=sys.stderr,
        )
        return 2
    base = Path(args.download or args.sources)
    if args.sources and not base.is_dir():  # one line, not one "skipped" per release
        print(f"gen_cli_schema: --sources {visible(args.sources)}: not a directory", file=sys.stderr)
        return 2
    per_release: dict[str, dict[str, Any]] = {}
    for version in args.releases:
        root = _download(version, base) if args.download else base / version
        recorded = _record_in_child(version, root)
        if recorded is not None:
            per_release[version] = recorded
    failed = [v for v in args.releases if v not in per_release]
    if failed:  # a table without them would drop their flags: write none
        print(f"gen_cli_schema: not recorded: {' '.join(failed)}; no table written", file=sys.stderr)
        return 1
    sys.stdout.write(dump(merge(per_release)))
    return 0


def _record_in_child(version: str, root: Path) -> dict[str, Any] | None:
    """One release's record, from a fresh interpreter (the stand-ins and vLLM's imports stay there).
    Recorded afresh on every run: a saved record would outlive a change of the recorder."""
    if not (root / "vllm").is_dir():
        print(f"vllm {version}: no sources under {root}, skipped", file=sys.stderr)
        return None
    child = subprocess.run(
        [sys.executable, "-m", "kvops.doctor.gen_cli_schema", "--record", str(root)],
        capture_output=True,
        text=True,
        timeout=600,
        # no .pyc in the cached tree: vllm_release.verify refuses any file the wheel did not carry
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONDONTWRITEBYTECODE": "1"},
    )
    if child.returncode != 0:
        tail = child.stderr.strip().splitlines()[-1:] or ["no output"]
        print(f"vllm {version}: could not record its parser: {tail[0]}", file=sys.stderr)
        return None
    recorded: dict[str, Any] = json.loads(child.stdout)
    print(f"vllm {version}: {len(recorded['flags'])} flags", file=sys.stderr)
    return recorded


def dump(schema: dict[str, Any]) -> str:
    """Compact JSON with one flag per line, so a regeneration's diff shows what changed."""

    def one(value: Any) -> str:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    head = [f"{one(k)}:{one(v)}" for k, v in schema.items() if k != "flags"]
    flags = [f"{one(k)}:{one(v)}" for k, v in schema["flags"].items()]
    return "{\n" + ",\n".join(head) + ',\n"flags":{\n' + ",\n".join(flags) + "\n}}\n"


if __name__ == "__main__":
    sys.exit(main())
