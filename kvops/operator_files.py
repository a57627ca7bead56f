"""Reading the files an operator points kvops at: the exporter's --config, --web-config, token
and CA files, and the user config.

Each is read with a size cap (`--config /dev/zero` must not read forever), YAML is checked
before it is built (no aliases: a 472-byte billion-laughs would expand to gigabytes; nesting
bounded: PyYAML's composer recurses), and every failure is one UsageError line (exit 2).
A config anyone on the host may write decides which file is sent as a bearer token to which
host: it is read with a one-line warning; a secret (token, password) file anyone may write is
refused.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from kvops.errors import UsageError
from kvops.termsafe import visible

log = logging.getLogger(__name__)

MAX_CONFIG_BYTES = 1024 * 1024  # a config of a thousand targets is ~100 KiB
MAX_SECRET_BYTES = 64 * 1024
MAX_YAML_DEPTH = 32  # the deepest legitimate document (a target's options) is 3 levels
READ_CHUNK_BYTES = 64 * 1024  # a cap's worth is never asked of read() at once


def read_bounded(file: BinaryIO, cap: int) -> bytes | None:
    """At most `cap` bytes of an open file, read by chunks; None when it holds more (a FIFO or
    /dev/zero never ends, so the size is learnt by reading, not from stat)."""
    chunks: list[bytes] = []
    held = 0
    while held <= cap:
        chunk = file.read(min(READ_CHUNK_BYTES, cap + 1 - held))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        held += len(chunk)
    return None


def read_capped(path: object, what: str, cap: int) -> bytes:
    """The bytes of `path`, or UsageError if it cannot be read or holds more than `cap` bytes."""
    return _read(path, what, cap)[0]


def _read(path: object, what: str, cap: int) -> tuple[bytes, int]:
    """read_capped's bytes and the file's mode (st_mode of what was opened, links followed)."""
    if not isinstance(path, str) or not path:
        raise UsageError(f"{what}: expected a file path, got {kind(path)}")
    try:
        with open(path, "rb") as file:
            mode = os.fstat(file.fileno()).st_mode
            data = read_bounded(file, cap)
    except OSError as exc:
        raise UsageError(f"{what} {path}: {exc.strerror or exc}") from None
    except ValueError:  # an embedded NUL in the path
        raise UsageError(f"{what} {path!r}: not a valid path") from None
    if data is None:
        raise UsageError(f"{what} {path}: larger than {cap} bytes, not read")
    return data, mode


def world_writable(mode: int) -> bool:
    """A regular file any user may write (a device such as /dev/null is not a config)."""
    return stat.S_ISREG(mode) and bool(mode & stat.S_IWOTH)


def read_text(path: object, what: str, cap: int = MAX_CONFIG_BYTES, secret: bool = False) -> str:
    """The UTF-8 text of `path`. A world-writable file is warned about, or refused if `secret`."""
    data, mode = _read(path, what, cap)
    if world_writable(mode):
        shown = f"{what} {visible(path)}: world-writable (mode {stat.S_IMODE(mode):04o})"
        if secret:
            raise UsageError(f"{shown}: any user could change the credential sent; not read (chmod o-w it)")
        log.warning("%s: any user on this host can change it; run chmod o-w on it", shown)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} {path}: not UTF-8 text (byte {exc.start})") from None


def load_yaml_mapping(path: str, what: str) -> dict[str, Any]:
    """The YAML mapping in `path` (empty file: {}). Aliases and deep nesting are refused."""
    text = read_text(path, what)
    try:
        _check_events(text, path, what)
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"{what} {path}: not valid YAML ({_where(exc)})") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise UsageError(f"{what} {path}: expected a mapping at the top level, got {kind(doc)}")
    return doc


def _check_events(text: str, path: str, what: str) -> None:
    # The parser is iterative (a state stack), so this walk is safe on any input; only the
    # composer that builds the objects after it recurses.
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            raise UsageError(f"{what} {path}: YAML aliases (*name) are not accepted; write the value out")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise UsageError(f"{what} {path}: nested deeper than {MAX_YAML_DEPTH} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    return f"line {mark.line + 1}" if mark is not None else type(exc).__name__


def read_secret(path: object, what: str) -> str:
    """A token file's content, stripped; refused if empty or holding control characters (a CR/LF
    would end the Authorization header and start another one)."""
    token = read_text(path, what, MAX_SECRET_BYTES, secret=True).strip()
    if not token:
        raise UsageError(f"{what} {path}: empty")
    if not token.isprintable():
        raise UsageError(f"{what} {path}: holds control characters (a token is one line)")
    return token


def check_file(path: object, what: str) -> str:
    """`path` as str when it names a regular readable file of at most MAX_CONFIG_BYTES."""
    read_capped(path, what, MAX_CONFIG_BYTES)
    assert isinstance(path, str)
    if not Path(path).is_file():
        raise UsageError(f"{what} {path}: not a regular file")
    return path


def kind(value: object) -> str:
    """How a YAML value of the wrong type is named in an error message."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if value is None or value == "":
        return "nothing"
    return type(value).__name__
