"""Property (issue 16): for serve lines generated from the shipped CLI schema of each supported
release — every flag kind (switches and their --no- forms, one value, optional value, nargs="+",
JSON, choices, numbers), shell quoting, `=` and space forms — parse -> render -> parse is the
identity, and a fix changes only the flags it names."""

from __future__ import annotations

import json
import shlex

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvops.doctor.reading import cli_schema, cmdline
from kvops.doctor.reading.cli_schema import FlagSpec

RELEASES = cli_schema.releases()
# Secret flags render as $NAME (tested in test_cmdline_schema.py); -O is rewritten to its target.
_SKIP = {"--api-key", "--hf-token"}

_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\\"),
    min_size=1,
    max_size=10,
).filter(lambda v: not v.startswith("-") and v.strip() == v and v.lower() not in ("true", "false"))


def specs(release: str) -> list[FlagSpec]:
    schema = cli_schema.for_version(release)
    unique = {id(s): s for s in schema.flags.values()}.values()
    return sorted((s for s in unique if s.name not in _SKIP and s.kind != "help"), key=lambda s: s.name)


def _value(spec: FlagSpec) -> st.SearchStrategy[str]:
    if spec.choices:
        return st.sampled_from(spec.choices)
    if spec.value_type == "json":
        leaf = st.one_of(st.integers(-5, 10**6), st.booleans(), _text)
        return st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), leaf, max_size=3).map(
            json.dumps
        )
    if spec.value_type == "int":
        return st.integers(0, 10**6).map(str)
    if spec.value_type == "float":
        return st.floats(0, 1e4, allow_nan=False).map(lambda f: f"{f:g}")
    return _text


def _quote(word: str) -> str:
    """shlex.quote, but `...` and the like quoted too: written bare, a paste's elision (by design)."""
    return f"'{word}'" if word in cmdline.ELISIONS else shlex.quote(word)


@st.composite
def serve_line(draw: st.DrawFn, release: str | None = None) -> tuple[str, str, list[FlagSpec]]:
    release = release or draw(st.sampled_from(RELEASES))
    chosen = draw(
        st.lists(st.sampled_from(specs(release)), min_size=1, max_size=8, unique_by=lambda s: s.name)
    )
    parts = ["vllm", "serve", _quote(draw(_text))]
    for spec in chosen:
        if not spec.takes_value:
            neg = spec.negative()
            parts.append(neg if neg and draw(st.booleans()) else spec.name)
            continue
        name = draw(
            st.sampled_from([n for n in spec.names if n.startswith("--") and not n.startswith("--no-")])
        )
        if draw(st.booleans()):
            name = name.replace("-", "_")[:2].replace("_", "-") + name[2:].replace(
                "-", "_"
            )  # --max_model_len
        if spec.multi:
            values = draw(st.lists(_value(spec), min_size=1, max_size=3))
            parts += [name, *map(_quote, values)]
        elif draw(st.booleans()):
            parts.append(_quote(f"{name}={draw(_value(spec))}"))
        else:
            parts += [name, _quote(draw(_value(spec)))]
    return release, " ".join(parts), chosen


def view(c: cmdline.ServeCommand) -> tuple[object, ...]:
    return (c.model, c.extra, [(a.flag, a.values) for a in c.args], [(p.kind, p.flag) for p in c.problems])


@pytest.mark.parametrize("release", RELEASES)
@given(data=st.data())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_parse_render_parse_is_the_identity(release: str, data: st.DataObject) -> None:
    release, line, chosen = data.draw(serve_line(release))
    first = cmdline.parse(line, release)
    assert first.problems == (), (line, first.problems)
    assert len(first.args) == len(chosen)  # every flag found, none split or merged
    again = cmdline.parse(first.render(), release)
    assert view(again) == view(first)


@given(serve_line(), st.data())
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_fix_changes_only_the_flags_it_names(
    case: tuple[str, str, list[FlagSpec]], data: st.DataObject
) -> None:
    release, line, chosen = case
    c = cmdline.parse(line, release)
    names = [s.name for s in chosen]
    remove = data.draw(st.lists(st.sampled_from(names), max_size=2, unique=True))
    add_spec = data.draw(st.sampled_from([s for s in specs(release) if s.takes_value and not s.multi]))
    add_value = data.draw(_value(add_spec))
    fixed = cmdline.parse(c.with_fix(remove=remove, add=[f"{add_spec.name}={add_value}"]).render(), release)
    named = {*remove, add_spec.name}
    named |= {"--no-" + n[2:] for n in named}

    def untouched(cmd: cmdline.ServeCommand) -> list[tuple[str, tuple[str, ...]]]:
        return [(a.flag, a.values) for a in cmd.args if a.flag not in named]

    assert untouched(fixed) == untouched(c)
    assert fixed.model == c.model and fixed.env == c.env
    assert fixed.get(add_spec.name) == add_value
    assert not any(fixed.has(f) for f in remove if f != add_spec.name)


_FIXED = {"json": '{"a": 1, "b": "x y"}', "int": "7", "float": "0.5", "bool": "true"}


@pytest.mark.parametrize("release", RELEASES)
def test_every_flag_of_every_release_in_one_line(release: str) -> None:
    """Exhaustive companion of the property: all of a release's flags at once, = and space forms."""
    parts = ["vllm", "serve", "org/model"]
    chosen = specs(release)
    for i, spec in enumerate(chosen):
        if not spec.takes_value:
            parts.append(spec.negative() if spec.negative() and i % 3 == 0 else spec.name)
            continue
        value = spec.choices[0] if spec.choices else _FIXED.get(spec.value_type or "", "a b's")
        if spec.multi:
            parts += [spec.name, shlex.quote(value), shlex.quote(value)]
        elif i % 2:
            parts.append(shlex.quote(f"{spec.name}={value}"))
        else:
            parts += [spec.name, shlex.quote(value)]
    first = cmdline.parse(" ".join(parts), release)
    assert first.problems == () and len(first.args) == len(chosen) and first.model == "org/model"
    assert view(cmdline.parse(first.render(), release)) == view(first)


def test_a_quoted_elision_is_a_value_and_a_bare_one_an_elision() -> None:
    quoted = cmdline.parse("vllm serve m --ignore-patterns '...' '[...]'", "0.30.0")
    assert quoted.problems == () and quoted.args[0].values == ("...", "[...]") and not quoted.elided
    bare = cmdline.parse("vllm serve m --ignore-patterns ... --max-model-len 8", "0.30.0")
    assert [p.kind for p in bare.problems] == ["missing-value"]
    assert cmdline.parse(quoted.render(), "0.30.0").args == quoted.args  # written back quoted
