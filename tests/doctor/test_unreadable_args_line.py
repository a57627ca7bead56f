"""A log's `non-default args:` line that is not a Python literal is unreadable, never a crash, and
no doctor error path prints a log's terminal escapes (issue 41, medium item 3)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kvops.doctor.reading import cmdline
from kvops.errors import UsageError

Run = Callable[..., tuple[int, str, str]]
# ESC c (reset the terminal), BEL, an 8-bit CSI that recolours: what a hostile log carries
ESCAPES = "\x1bc\x07\x9b31m"
START = "INFO 01-01 00:00:00 [utils.py:1] non-default args: "


def _log(tmp_path: Path, args_line: str) -> str:
    path = tmp_path / "vllm.log"
    path.write_text(
        f"INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.14.0\n{START}{args_line}\n"
    )
    return str(path)


@pytest.mark.parametrize(
    ("args_line", "said"),
    [
        (
            f"{{'model': 'x{ESCAPES}', 'max_model_len': 1.2.3}}",
            "'max_model_len': 1.2.3 is not a Python literal",
        ),
        ("{'model': 'x', 'max_model_len': " + "9" * 5000 + "}", "'max_model_len' is a number of 5,000"),
        ("{'model': 'x', 'max_model_len': " + "9" * 60 + "}", "more than 40 digits"),
        ("{'model': 'x', 'max_model_len': 1e999}", "(not a finite number)"),
        ("{'model': 'x', 'a': " + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
        ("{'model': 'x', 'a': " + "{'b': " * 2000 + "1" + "}" * 2000 + "}", "nested too deeply"),
    ],
    ids=["not-a-literal", "5000-digits", "60-digits", "inf", "deep-list", "deep-dict"],
)
def test_an_unreadable_args_line_is_one_note(kvops: Run, tmp_path: Path, args_line: str, said: str) -> None:
    path = _log(tmp_path, args_line)
    code, out, err = kvops("doctor", "--log", path, "--json")
    assert code == 0 and err == "", err
    notes = json.loads(out)["notes"]
    unread = [n for n in notes if n.startswith("the log's non-default args line could not be read")]
    assert len(unread) == 1 and said in unread[0], notes
    code, text, err = kvops("doctor", "--log", path)
    assert code == 0 and "Traceback" not in text + err
    assert not any(c in text + err for c in "\x1b\x07\x9b")


def test_a_readable_args_line_with_an_objects_repr_still_rebuilds() -> None:
    """The pairs read when the dict holds a repr (vLLM logs objects too): unchanged."""
    cmd = cmdline.from_non_default_args(
        "{'model': 'm', 'compilation_config': Config(a=1), 'max_model_len': 4096}"
    )
    assert cmd is not None and cmd.get("--max-model-len") == "4096" and cmd.model == "m"


def test_the_reason_shows_the_logs_text_visibly() -> None:
    with pytest.raises(UsageError) as info:
        cmdline.from_non_default_args(f"{{'model': 'm', 'max_model_len': 1.2.3, 'x': Obj('{ESCAPES}')}}")
    assert not any(c in str(info.value) for c in "\x1b\x07\x9b")


def test_an_internal_error_is_one_visible_line(
    kvops: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any doctor bug an input provokes: one line on stderr, the input's escapes made visible,
    exit 1, never a traceback with the raw text."""
    from kvops.doctor.judging import diagnose

    def broken(*_args: object, **_kwargs: object) -> None:
        raise KeyError(f"a key from the log {ESCAPES}")

    monkeypatch.setattr(diagnose, "diagnose", broken)
    code, out, err = kvops("doctor", "--log", _log(tmp_path, "{'model': 'x'}"))
    assert code == 1 and out == ""
    assert err.startswith("kvops doctor: internal error at test_unreadable_args_line.py:")
    assert "\\x1bc\\x07\\x9b31m" in err and len(err.strip().splitlines()) == 1
    assert not any(c in err for c in "\x1b\x07\x9b")


def test_a_usage_error_quoting_a_file_shows_it_visibly(kvops: Run, tmp_path: Path) -> None:
    code, _out, err = kvops("doctor", "--model", str(tmp_path / f"m{ESCAPES}"))
    assert code == 2 and "model config not found" in err
    assert not any(c in err for c in "\x1b\x07\x9b")
