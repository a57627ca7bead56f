"""The per-function call log every stub library keeps (stubs/stub_common.h), read from Python:
how often a library function was called, and by which thread last."""

from __future__ import annotations

import ctypes
import time


def call_log(lib: ctypes.CDLL) -> ctypes.CDLL:
    """`lib` (a stub library) with kvops_stub_calls and kvops_stub_last_tid answering a long."""
    lib.kvops_stub_calls.restype = ctypes.c_long
    lib.kvops_stub_last_tid.restype = ctypes.c_long
    return lib


def wait_for_calls(lib: ctypes.CDLL, fn: bytes, at_least: int, seconds: float = 5.0) -> None:
    """Until `fn` has been called `at_least` times in all, or `seconds` are over (the caller's
    assertions then say what is missing)."""
    deadline = time.monotonic() + seconds
    while lib.kvops_stub_calls(fn) < at_least and time.monotonic() < deadline:
        time.sleep(0.01)
