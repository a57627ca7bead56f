"""Regenerate kvops/doctor/reading/error_sites.json.gz: every error message vLLM, SGLang and LMCache
releases can raise or log, with where it is raised, recorded from each release's OWN source.

    python -m kvops.doctor.gen_error_sites --download ~/.cache/kvops > /tmp/error_sites.json.gz
    cmp /tmp/error_sites.json.gz kvops/doctor/reading/error_sites.json.gz

(docs/doctor.md, "The error-site table": which releases, the cache, what a location proves.)

How it is recorded:
- `--download CACHE` fetches each release's wheel with `pip download --no-deps --only-binary=:all:`
  (wheels only: an sdist is never built) and keeps only its `<package>/**/*.py` and the wheel's
  RECORD, under CACHE/<package>/<version>/ (vLLM's are the cache `kvops doctor --repro` and
  gen_cli_schema use: kvops/doctor/reading/vllm_release.py). A release already there is not
  fetched again.
- Each file is parsed with `ast` (never imported, never run). A site is `raise X(msg)`,
  `assert cond, msg` and `<logger>.error/exception/critical/warning(msg, ...)` whose message is a
  string literal, an f-string, `"..." % args`, `"...".format(...)` or a `+` of those; every
  placeholder becomes the wildcard `\\x00` (shown as `*`), and a message without literal text is
  skipped.
- A helper that raises with a message passed in (`check_shm_free_space(total, name)` raising
  f"... for {name}: ...") is recorded with the wildcard, and each call of it with a literal
  argument is recorded too, the argument filled in, at the call site (path, class, function).
- Entries are merged across releases: one per (template, type, package, path, class, function),
  with the releases it is in as ranges of that package's release list ("0.10.0..0.14.1").
- Output: gzip (mtime 0, no name) of JSON lines sorted by key: the same sources give the same bytes.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvops.doctor.gen_cli_schema import RELEASES as VLLM_RELEASES
from kvops.doctor.gen_cli_schema import ranges  # one form of release ranges for both tables

WILD = "\x00"  # a placeholder of the message: any text
FORMAT = 3  # the table's layout; doctor refuses another (kvops/doctor/reading/error_sites.py)

# SGLang: the last release of the 0.4 line, every release of the current 0.5 line (PyPI's list).
_SGLANG_LIST = (
    "0.4.10.post2 0.5.1 0.5.1.post1 0.5.1.post2 0.5.1.post3 0.5.2 0.5.3 0.5.3.post1 0.5.3.post2 "
    "0.5.3.post3 0.5.4 0.5.4.post1 0.5.4.post2 0.5.4.post3 0.5.5 0.5.5.post1 0.5.5.post2 "
    "0.5.5.post3 0.5.6 0.5.6.post1 0.5.6.post2 0.5.7 0.5.8 0.5.8.post1 0.5.9 0.5.10 0.5.10.post1 "
    "0.5.11 0.5.12 0.5.12.post1 0.5.13 0.5.13.post1 0.5.14 0.5.15 0.5.15.post1 0.5.16 0.5.17 "
    "0.5.18 0.5.19 0.5.20 0.5.21 0.5.22 0.5.23"
)
SGLANG_RELEASES = tuple(_SGLANG_LIST.split())
# LMCache: the last release of 0.3 and 0.4, every release of the current 0.5 line.
_LMCACHE_LIST = "0.3.15 0.4.7 0.5.0 0.5.1 0.5.2 0.5.3 0.5.4 0.5.5 0.5.6"
LMCACHE_RELEASES = tuple(_LMCACHE_LIST.split())
PACKAGES: dict[str, tuple[str, ...]] = {
    "vllm": VLLM_RELEASES,
    "sglang": SGLANG_RELEASES,
    "lmcache": LMCACHE_RELEASES,
}
LOG_METHODS = {"error": "logger.error", "exception": "logger.exception", "critical": "logger.critical"}
LOG_METHODS["warning"] = "logger.warning"
MAX_TEMPLATE = 400  # characters kept of a template (a message's head is what identifies it)


# ---- a message expression -> template ------------------------------------------------------------
def _percent(fmt: str) -> str:
    """`%s`, `%d`, `%(name)s`, `%.2f` ... -> wildcard; `%%` -> `%`."""
    return re.sub(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[a-zA-Z%]", _pct, fmt)


def _pct(m: Any) -> str:
    return "%" if m.group() == "%%" else WILD


def _braces(fmt: str) -> str:
    """str.format fields -> wildcard; `{{`/`}}` -> braces."""
    out, i = [], 0
    while i < len(fmt):
        c = fmt[i]
        if c == "{" and fmt.startswith("{{", i):
            out.append("{")
            i += 2
        elif c == "}" and fmt.startswith("}}", i):
            out.append("}")
            i += 2
        elif c == "{":
            j = fmt.find("}", i)
            if j < 0:
                out.append(fmt[i:])
                break
            out.append(WILD)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def template(node: ast.expr | None, params: frozenset[str] = frozenset()) -> str | None:
    """The message an expression builds, placeholders as WILD; None when it is not built from a
    literal. A placeholder that is one of `params` whole is marked MARK + name + END instead (a
    helper's message, filled in at its call sites)."""

    def walk(n: ast.expr) -> str | None:
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            return n.value.replace(WILD, "").replace(MARK, "").replace(END, "")
        if isinstance(n, ast.JoinedStr):
            parts = []
            for v in n.values:
                if isinstance(v, ast.Constant) and isinstance(v.value, str):
                    parts.append(walk(v) or "")
                elif isinstance(v, ast.FormattedValue) and _name(v.value) in params:
                    parts.append(MARK + _name(v.value) + END)
                else:
                    parts.append(WILD)
            return "".join(parts)
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod):
            left = walk(n.left)
            return _percent(left) if left is not None else None
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
            left, right = walk(n.left), walk(n.right)
            if left is None and right is None:
                return None
            return (left if left is not None else WILD) + (right if right is not None else WILD)
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "format"
            and isinstance(n.func.value, ast.Constant)
            and isinstance(n.func.value.value, str)
        ):
            return _braces(walk(n.func.value) or "")
        if isinstance(n, ast.Name) and n.id in params:
            return MARK + n.id + END
        return None

    return walk(node) if node is not None else None


MARK, END = "\x02", "\x03"
_MARKED = re.compile("\x02(\\w+)\x03")


def public(marked: str) -> str:
    """A template as the table holds it: every mark a wildcard."""
    return _squeeze(_MARKED.sub(WILD, marked))


def _name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else ""


def _squeeze(text: str) -> str:
    """One line, runs of blanks and of wildcards collapsed, cut at MAX_TEMPLATE."""
    text = " ".join(text.split())
    while WILD + WILD in text or WILD + " " + WILD in text:
        text = text.replace(WILD + WILD, WILD).replace(WILD + " " + WILD, WILD)
    return text[:MAX_TEMPLATE]


def has_literal(text: str) -> bool:
    """Some literal word in the template (at least 3 letters in a row): else it says nothing."""
    run = 0
    for c in text:
        run = run + 1 if c.isalpha() else 0
        if run >= 3:
            return True
    return False


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    return None


def _first_arg(call: ast.Call) -> ast.expr | None:
    if call.args and not isinstance(call.args[0], ast.Starred):
        return call.args[0]
    for kw in call.keywords:
        if kw.arg in ("msg", "message", "detail", "reason"):
            return kw.value
    return None


# ---- one file -----------------------------------------------------------------------------------
Site = tuple[str, str, str, str, str]  # template, type, path, class, function


@dataclass(frozen=True)
class Helper:
    """A function that raises with a message built from its own parameters."""

    marked: str  # the template with MARK name END for each parameter used
    kind: str
    params: tuple[str, ...]  # positional parameters in order (self/cls included)
    defaults: dict[str, str]  # literal string defaults


def _signature(func: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[tuple[str, ...], dict[str, str]]:
    a = func.args
    positional = [p.arg for p in [*a.posonlyargs, *a.args]]
    defaults: dict[str, str] = {}
    for name, value in zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True):
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            defaults[name] = value.value
    for param, default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        if isinstance(default, ast.Constant) and isinstance(default.value, str):
            defaults[param.arg] = default.value
    return tuple(positional), defaults


class _Sites(ast.NodeVisitor):
    """The sites of one module, with the enclosing class and function of each."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.classes: list[str] = []
        self.functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        self.sites: list[Site] = []
        self.helpers: dict[str, list[Helper]] = {}
        self.calls: list[tuple[Call, str, str]] = []  # call, class, function
        self.defined: list[str] = []  # every function name defined (a helper must be unique)

    def _where(self) -> tuple[str, str]:
        cls = self.classes[-1] if self.classes else ""
        fn = self.functions[-1].name if self.functions else ""
        return cls, fn

    def _params(self) -> frozenset[str]:
        if not self.functions:
            return frozenset()
        a = self.functions[-1].args
        return frozenset(p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs])

    def _add(self, node: ast.expr | None, kind: str) -> None:
        marked = template(node, self._params())
        if marked is None:
            return
        text = public(marked)
        if not has_literal(text):
            return
        cls, fn = self._where()
        self.sites.append((text, kind, self.path, cls, fn))
        if _MARKED.search(marked) and len(self.functions) == 1 and not self.classes:
            func = self.functions[-1]  # a module-level function: its calls are found by name
            params, defaults = _signature(func)
            self.helpers.setdefault(func.name, []).append(Helper(marked, kind, params, defaults))

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.classes.append(node.name)
        self.generic_visit(node)
        self.classes.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._function(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.defined.append(node.name)
        self.functions.append(node)  # a nested function keeps its method's class
        self.generic_visit(node)
        self.functions.pop()

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if isinstance(exc, ast.Call):
            name = _dotted(exc.func)
            if name:
                self._add(_first_arg(exc), name.rsplit(".", 1)[-1])
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        if node.msg is not None:
            self._add(node.msg, "AssertionError")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in LOG_METHODS:
            owner = (_dotted(func.value) or "").lower()
            if "log" in owner:
                self._add(_first_arg(node), LOG_METHODS[func.attr])
        name = _dotted(func)
        if name:
            args = tuple(None if isinstance(a, ast.Starred) else _text(a) for a in node.args)
            stars = any(isinstance(a, ast.Starred) for a in node.args)
            kws = tuple((kw.arg, _text(kw.value)) for kw in node.keywords if kw.arg)
            cls, fn = self._where()
            short = name.rsplit(".", 1)[-1]
            # every call: a helper's default fills what a call leaves out
            self.calls.append((Call(short, isinstance(func, ast.Attribute), args, stars, kws), cls, fn))
        self.generic_visit(node)


def _text(node: ast.expr) -> str | None:
    found = template(node)
    return public(found) if found is not None else None


@dataclass(frozen=True)
class Call:
    """A call with a literal argument, as far as filling a helper's message needs it."""

    name: str
    on_attribute: bool  # mod.f(...) or obj.f(...)
    args: tuple[str | None, ...]  # each positional argument's text (None: not literal)
    starred: bool
    keywords: tuple[tuple[str, str | None], ...]


def _argument(call: Call, helper: Helper, name: str) -> str | None:
    """The literal text a call passes for one of a helper's parameters (its default when the call
    leaves it out), None when it is not a literal."""
    for kw, value in call.keywords:
        if kw == name:
            return value
    if name in helper.params:
        index = helper.params.index(name)
        if call.starred:
            return None
        if index < len(call.args):
            return call.args[index]
    return helper.defaults.get(name)


def _filled(call: Call, helper: Helper) -> str | None:
    """The helper's message as this call makes it; None when no argument is literal."""
    literal = False

    def fill(m: re.Match[str]) -> str:
        nonlocal literal
        value = _argument(call, helper, m.group(1))
        if value is None or not has_literal(value):
            return WILD
        literal = True
        return value

    text = public(_MARKED.sub(fill, helper.marked))
    return text if literal else None


FileRecord = tuple[list[Site], dict[str, list[Helper]], list[tuple[Call, str, str]], list[str]]


def file_record(data: bytes, rel: str) -> FileRecord | None:
    try:
        tree = ast.parse(data, filename=rel)
    except (SyntaxError, ValueError):
        return None
    visitor = _Sites(rel)
    visitor.visit(tree)
    return visitor.sites, visitor.helpers, visitor.calls, visitor.defined


# A file unchanged between releases is parsed once per run: (path, sha256) -> its record.
_SEEN: dict[tuple[str, str], FileRecord | None] = {}


def release_sites(root: Path, package: str) -> tuple[set[Site], int]:
    """Every site of one release (paths relative to root, `package/...`); and how many files
    could not be parsed (newer syntax than this Python's)."""
    import hashlib

    sites: set[Site] = set()
    helpers: dict[str, list[Helper]] = {}
    calls: list[tuple[Call, str, str, str]] = []
    defined: dict[str, int] = {}
    unparsed = 0
    for path in sorted((root / package).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        data = path.read_bytes()
        key = (rel, hashlib.sha256(data).hexdigest())
        if key not in _SEEN:
            _SEEN[key] = file_record(data, rel)
        record = _SEEN[key]
        if record is None:
            unparsed += 1
            continue
        file_sites, file_helpers, file_calls, names = record
        sites.update(file_sites)
        for name, found in file_helpers.items():
            helpers.setdefault(name, []).extend(found)
        for name in names:
            defined[name] = defined.get(name, 0) + 1
        calls += [(call, rel, cls, fn) for call, cls, fn in file_calls]
    for call, rel, cls, fn in calls:
        if defined.get(call.name) != 1:
            continue  # a name defined twice (a method too): its calls cannot be told apart
        for helper in helpers.get(call.name, ()):
            text = _filled(call, helper)
            if text is not None and has_literal(text):
                sites.add((text, helper.kind, rel, cls, fn))
    return sites, unparsed


# ---- merging --------------------------------------------------------------------------------------
def merge(per_release: dict[str, dict[str, set[Site]]]) -> bytes:
    """{package: {version: sites}} -> the table's bytes (deterministic)."""
    rows: list[list[Any]] = []
    for package in sorted(per_release):
        order = [v for v in PACKAGES[package] if v in per_release[package]]
        seen: dict[Site, list[int]] = {}
        for version in order:
            index = PACKAGES[package].index(version)
            for site in per_release[package][version]:
                seen.setdefault(site, []).append(index)
        for site, where in seen.items():
            text, kind, path, cls, fn = site
            rows.append([text, kind, package, path, cls, fn, ranges(sorted(where), PACKAGES[package])])
    return write(rows, sorted(per_release))


def write(rows: list[list[Any]], packages: list[str]) -> bytes:
    """The table's bytes: a header line, the places line (package, path, class, function of every
    site, sorted), then one row per line, `[template, type, place, "ranges"]`, sorted as text.
    Few objects per row: doctor parses the whole table when it locates a message."""
    header: dict[str, Any] = {
        "format": FORMAT,
        "generated_by": "python -m kvops.doctor.gen_error_sites (see its docstring)",
        "wildcard": WILD,
        "fields": ["template", "type", "place", "releases"],
        "place_fields": ["package", "path", "class", "function"],
        "releases": {pkg: list(PACKAGES[pkg]) for pkg in PACKAGES if pkg in packages},
    }
    rows = sorted(rows, key=lambda r: (r[2], r[3], r[4], r[5], r[0], r[1]))
    places = sorted({tuple(r[2:6]) for r in rows})
    index = {place: i for i, place in enumerate(places)}

    def line(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    lines = [json.dumps(header, ensure_ascii=False, separators=(",", ":"), sort_keys=True)]
    lines.append(line([list(p) for p in places]))
    # rows in the order of their text: the rows whose template starts with a message's head are one
    # run of lines, found by bisection without parsing the others (kvops/doctor/reading/error_sites.py)
    lines += sorted(line([r[0], r[1], index[tuple(r[2:6])], ",".join(r[6])]) for r in rows)
    raw = ("\n".join(lines) + "\n").encode("utf-8")
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(raw)
    return buf.getvalue()


def read(path: Path) -> tuple[dict[str, Any], list[list[Any]]]:
    """A table's header and its rows as the recorder makes them: [template, type, package, path,
    class, function, [ranges]]. (Format 1, one whole row per line, is read too.)"""
    head, _, body = gzip.decompress(path.read_bytes()).decode("utf-8").partition("\n")
    header = json.loads(head)
    lines = [json.loads(line) for line in body.splitlines() if line]
    if header.get("format") == 1:  # what a recorder before this one wrote: joined as rows
        return header, lines
    places, rows = lines[0], lines[1:]
    return header, [[r[0], r[1], *places[r[2]], r[3].split(",")] for r in rows]


def join(paths: list[Path]) -> bytes:
    """Tables recorded for different packages as one: the bytes one run over all would write."""
    rows: list[list[Any]] = []
    packages: set[str] = set()
    for path in paths:
        header, found = read(path)
        packages.update(header["releases"])
        rows += found
    return write(rows, sorted(packages))


# ---- the sources ----------------------------------------------------------------------------------
def source_root(package: str, version: str, cache: Path, download: bool) -> Path | None:
    """CACHE/<package>/<version>, holding <package>/...; fetched now when `download`."""
    if package == "vllm":
        from kvops.doctor.reading.vllm_release import cached, fetch

        have = cached(version, cache / "vllm")
        if have is None and download:
            have = fetch(version, cache=cache / "vllm")
        return have.root if have is not None else None
    root = cache / package / version
    if (root / package).is_dir() and (root / "RECORD").is_file():
        return root
    if not download:
        return None
    return _fetch_wheel(package, version, cache / package)


def _fetch_wheel(package: str, version: str, cache: Path) -> Path | None:
    cache.mkdir(parents=True, exist_ok=True, mode=0o700)
    with tempfile.TemporaryDirectory(prefix="kvops-wheel-", dir=cache) as tmp:
        base = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
        base += ["--disable-pip-version-check", "-q", "-d", tmp, f"{package}=={version}"]
        # a wheel for this interpreter, else one built for another CPython (same .py files)
        for extra in ([], ["--python-version", "3.12"], ["--python-version", "3.10"]):
            subprocess.run(base + extra, stdout=sys.stderr, stderr=sys.stderr, check=False)
            wheels = sorted(Path(tmp).glob("*.whl"))
            if wheels:
                break
        else:
            print(f"{package} {version}: no wheel on PyPI for this platform", file=sys.stderr)
            return None
        staging = Path(tempfile.mkdtemp(prefix=f"{version}-", dir=cache))
        with zipfile.ZipFile(wheels[0]) as zf:
            for name in zf.namelist():
                if name.endswith(".dist-info/RECORD") and name.count("/") == 1:
                    (staging / "RECORD").write_bytes(zf.read(name))
                elif name.startswith(f"{package}/") and name.endswith(".py"):
                    target = (staging / name).resolve()
                    if target.is_relative_to(staging.resolve()):
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(zf.read(name))
        manifest = {"package": package, "version": version, "wheel": wheels[0].name}
        (staging / "kvops-release.json").write_text(json.dumps(manifest) + "\n", encoding="utf-8")
        final = cache / version
        if final.exists():
            shutil.rmtree(staging, ignore_errors=True)
        else:
            staging.rename(final)
        return final


def iter_releases(packages: dict[str, tuple[str, ...]]) -> Iterator[tuple[str, str]]:
    for package, versions in packages.items():
        for version in versions:
            yield package, version


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--download", metavar="CACHE", help="fetch what is missing into CACHE/<package>/")
    group.add_argument("--sources", metavar="CACHE", help="CACHE/<package>/<version>/ already unpacked")
    group.add_argument("--join", nargs="+", metavar="TABLE", help="one table of tables of other packages")
    ap.add_argument("--releases", nargs="+", metavar="PKG==X", help="only these (a test's subset)")
    args = ap.parse_args(argv)
    if args.join:
        sys.stdout.buffer.write(join([Path(p) for p in args.join]))
        return 0
    cache = Path(args.download or args.sources).expanduser()
    wanted = dict(PACKAGES)
    if args.releases:
        chosen: dict[str, list[str]] = {}
        for item in args.releases:
            package, _, version = item.partition("==")
            if package not in PACKAGES or version not in PACKAGES[package]:
                print(f"gen_error_sites: {item}: not a release the table records", file=sys.stderr)
                return 2
            chosen.setdefault(package, []).append(version)
        wanted = {p: tuple(v for v in PACKAGES[p] if v in chosen[p]) for p in PACKAGES if p in chosen}
    per_release: dict[str, dict[str, set[Site]]] = {}
    missing = []
    for package, version in iter_releases(wanted):
        root = source_root(package, version, cache, bool(args.download))
        if root is None:
            missing.append(f"{package}=={version}")
            continue
        sites, unparsed = release_sites(root, package)
        per_release.setdefault(package, {})[version] = sites
        note = f" ({unparsed} files not parsed)" if unparsed else ""
        print(f"{package} {version}: {len(sites)} sites{note}", file=sys.stderr)
    if missing:  # a table without them would date their messages wrongly: write none
        print(f"gen_error_sites: no sources for {' '.join(missing)}; no table written", file=sys.stderr)
        return 1
    sys.stdout.buffer.write(merge(per_release))
    return 0


if __name__ == "__main__":
    sys.exit(main())
