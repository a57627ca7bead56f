"""The `vllm serve` flags of each vLLM release, as recorded from that release's own parser.

Package data: kvops/doctor/reading/vllm_cli.json, written by kvops/doctor/gen_cli_schema.py. A release
without a recorded schema is read with the installed vllm's own parser when that is the release
judged (recorded once in a child interpreter, cached), else with the nearest recorded one (the
newest not after it, else the oldest) and a one-line note; no version reads the union of all.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

# argparse treats "-5" / "-.5" as a value when no option looks like a number (true for vLLM).
_NEGATIVE_NUMBER = re.compile(r"-\d+$|-\d*\.\d+$")


@dataclass(frozen=True)
class FlagSpec:
    """One flag as a release's parser defines it."""

    name: str  # canonical: the first --long option string
    names: tuple[str, ...]  # every option string, aliases and --no- forms included
    kind: str  # store | store_true/false/const | bool_optional | append | count | other:<Action>
    nargs: int | str | None  # argparse nargs: None (one value), "?", "*", "+", 0, N
    choices: tuple[str, ...] | None
    value_type: str | None  # str | int | float | json | bool | None (no value)
    default: Any

    @property
    def takes_value(self) -> bool:
        return self.nargs != 0 and self.kind not in ("store_true", "store_false", "store_const", "count")

    @property
    def optional_value(self) -> bool:
        return self.nargs == "?"

    @property
    def multi(self) -> bool:
        return self.nargs in ("+", "*") or (isinstance(self.nargs, int) and self.nargs > 1)

    def negative(self) -> str | None:
        """The --no-<flag> spelling BooleanOptionalAction adds, when this flag has one."""
        neg = "--no-" + self.name[2:]
        return neg if neg in self.names else None


@dataclass(frozen=True)
class Rewrites:
    """What FlexibleArgumentParser does to argv before argparse sees it."""

    underscores: bool = True  # --max_model_len == --max-model-len (up to the first '.')
    dotted_keys: bool = True  # --kv-transfer-config.kv_connector X -> JSON for --kv-transfer-config
    dotted_list_plus: bool = False  # --x.y+ a,b -> {"y": ["a", "b"]}
    o_level: str | None = None  # what -O3 becomes: "--optimization-level" or "-O.level" (compilation)
    config_yaml: bool = True  # --config FILE.yaml adds the file's keys as flags


@dataclass(frozen=True)
class Schema:
    version: str | None  # the release recorded; None = union of every release
    flags: dict[str, FlagSpec]  # every option string -> its spec
    rewrites: Rewrites
    note: str | None = None  # set when the schema is another release's

    def lookup(self, name: str) -> FlagSpec | None:
        return self.flags.get(name)

    def shown_version(self) -> str:
        return self.version or "any release"


def is_option(token: str) -> bool:
    """argparse's view: an option string, not a value (negative numbers are values)."""
    return token.startswith("-") and token != "-" and not _NEGATIVE_NUMBER.match(token)


def version_key(text: str) -> tuple[int, ...] | None:
    m = re.match(r"v?(\d+(?:\.\d+)*)", text.strip())
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    raw = resources.files("kvops.doctor.reading").joinpath("vllm_cli.json").read_text(encoding="utf-8")
    return json.loads(raw)


def releases() -> list[str]:
    return list(_data()["releases"])


def _expand(ranges: list[str], order: list[str]) -> set[str]:
    out: set[str] = set()
    for r in ranges:
        first, _, last = r.partition("..")
        i, j = order.index(first), order.index(last or first)
        out.update(order[i : j + 1])
    return out


@lru_cache(maxsize=64)
def _schema_of(version: str | None) -> Schema:
    data = _data()
    order = data["releases"]
    flags: dict[str, FlagSpec] = {}
    for name, variants in data["flags"].items():
        chosen = None
        for variant in variants:  # newest variant last: the union keeps the newest meaning
            if version is None or version in _expand(variant["releases"], order):
                chosen = variant
        if chosen is None:
            continue
        choices = chosen.get("choices")
        spec = FlagSpec(
            name=name,
            names=tuple(chosen["names"]),
            kind=chosen["kind"],
            nargs=chosen.get("nargs"),
            choices=tuple(choices) if choices is not None else None,
            value_type=chosen.get("type"),
            default=chosen.get("default"),
        )
        for alias in spec.names:
            flags.setdefault(alias, spec) if version is None else flags.__setitem__(alias, spec)
    rewrites = Rewrites()
    for rw in data["rewrites"]:
        if version is None or version in _expand(rw["releases"], order):
            rewrites = Rewrites(**{k: v for k, v in rw.items() if k != "releases"})
    return Schema(version, flags, rewrites)


def nearest(version: str) -> str | None:
    """The recorded release used for `version`: itself, else the newest before it, else the oldest."""
    known = releases()
    if version in known:
        return version
    want = version_key(version)
    if want is None:
        return None
    before = [r for r in known if (version_key(r) or ()) <= want]
    return before[-1] if before else known[0]


def from_record(record: dict[str, Any], version: str) -> Schema:
    """A Schema from one release's record (gen_cli_schema --record output)."""
    flags: dict[str, FlagSpec] = {}
    for flag in record["flags"]:
        names = tuple(flag["names"])
        name = names[0] if names[0].startswith("--") else names[-1]
        choices = flag.get("choices")
        spec = FlagSpec(
            name=name,
            names=names,
            kind=flag["kind"],
            nargs=flag.get("nargs"),
            choices=tuple(choices) if choices is not None else None,
            value_type=flag.get("type"),
            default=flag.get("default"),
        )
        flags.update(dict.fromkeys(names, spec))
    return Schema(version, flags, Rewrites(**record["rewrites"]))


def installed_vllm() -> tuple[str, Path] | None:
    """(version, folder holding vllm/) of an importable vllm, found without importing it."""
    import importlib.metadata as md
    import importlib.util

    try:
        spec = importlib.util.find_spec("vllm")
        version = md.version("vllm")
    except (ImportError, ValueError, md.PackageNotFoundError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return version, Path(next(iter(spec.submodule_search_locations))).parent


def live_schema(version: str, parent: Path, timeout: float = 180.0) -> Schema | None:
    """The installed vllm's own parser, recorded in a child interpreter (gen_cli_schema --record)
    and cached under the user's cache directory; None when it cannot be read here."""
    import os
    import subprocess
    import sys

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kvops" / "vllm-cli"
    saved = cache / f"{re.sub(r'[^A-Za-z0-9.+_-]', '_', version)}.json"
    try:
        return from_record(json.loads(saved.read_text(encoding="utf-8")), version)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    print(f"reading the flags of the installed vLLM {version} (once, cached in {cache})", file=sys.stderr)
    try:
        child = subprocess.run(
            [sys.executable, "-m", "kvops.doctor.gen_cli_schema", "--record", str(parent)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        record = json.loads(child.stdout) if child.returncode == 0 else None
        schema = from_record(record, version) if record else None
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, TypeError):
        return None
    if schema is not None:
        try:
            cache.mkdir(parents=True, exist_ok=True)
            saved.write_text(child.stdout, encoding="utf-8")
        except OSError:
            pass  # a read-only home: the next run records again
    return schema


@lru_cache(maxsize=8)
def _live(version: str) -> Schema | None:
    installed = installed_vllm()
    if installed is None or installed[0] != version:
        return None
    return live_schema(*installed)


def for_version(version: str | None) -> Schema:
    """The schema that judges a command for `version` (None: any release). When `version` is a
    build kvops ships no table for and it is the importable vllm, that vllm's own parser is used."""
    if version is None:
        return _schema_of(None)
    live = _live(version) if version not in releases() else None
    if live is not None:
        return live
    use = nearest(version)
    if use is None:
        schema = _schema_of(None)
        note = f"vLLM version {version!r} unreadable: flags checked against every known release"
        return Schema(None, schema.flags, schema.rewrites, note)
    schema = _schema_of(use)
    if use != version:
        note = f"kvops has no flag list for vLLM {version}: read with vLLM {use}'s"
        return Schema(use, schema.flags, schema.rewrites, note)
    return schema


def releases_with(flag: str) -> list[str]:
    """Recorded releases in which `flag` (any spelling) exists."""
    data = _data()
    order = data["releases"]
    hits: set[str] = set()
    for variants in data["flags"].values():
        for variant in variants:
            if flag in variant["names"]:
                hits |= _expand(variant["releases"], order)
    return [r for r in order if r in hits]
