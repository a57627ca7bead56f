"""Argument types the benchmark scripts share."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path


def positive(kind: type[int] | type[float]) -> Callable[[str], float]:
    """An argparse type: a number above 0 (argparse's one-line error and exit 2 otherwise)."""

    def read(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not value > 0 or value != value or value == float("inf"):
            raise argparse.ArgumentTypeError(f"expected a finite number above 0, got {text!r}")
        return value

    return read


def checkout(text: str) -> Path:
    """An argparse type: a checkout of kvops (--before DIR), resolved; one-line error otherwise."""
    path = Path(text).resolve()
    if not (path / "kvops" / "cli.py").is_file():
        raise argparse.ArgumentTypeError(f"{text}: not a checkout of kvops (no kvops/cli.py)")
    return path
