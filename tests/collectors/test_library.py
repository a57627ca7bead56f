"""A vendor library's start-up: done once, a failure remembered for a while, then retried."""

from __future__ import annotations

import pytest

from kvops.collectors import library
from kvops.collectors.library import VendorLibrary


class Unavailable(RuntimeError):
    pass


def test_a_failure_is_answered_from_memory_until_the_retry_time(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(library.time, "monotonic", lambda: now[0])
    calls: list[str] = []
    outcome: list[object] = [Unavailable("NVML library not found")]

    def load():
        calls.append("load")
        if isinstance(outcome[0], Exception):
            raise outcome[0]
        return outcome[0]

    lib = VendorLibrary(load, Unavailable)
    for _ in range(3):
        with pytest.raises(Unavailable, match="NVML library not found"):
            lib.get()
    assert calls == ["load"]  # one dlopen, not one per scrape
    outcome[0] = "module"  # the driver came up
    now[0] += library.RETRY_SECONDS - 1
    with pytest.raises(Unavailable):
        lib.get()
    now[0] += 2
    assert lib.get() == "module" and lib.get() == "module"
    assert calls == ["load", "load"]


def test_shut_down_calls_the_library_once_and_the_next_get_loads_again():
    loaded: list[int] = []
    shut: list[object] = []
    lib = VendorLibrary(lambda: loaded.append(1) or "module", Unavailable)
    lib.shut_down(shut.append, "shutdown")  # never loaded: nothing to shut down
    assert shut == []
    lib.get()
    lib.shut_down(shut.append, "shutdown")
    lib.shut_down(shut.append, "shutdown")
    assert shut == ["module"]
    lib.get()
    assert loaded == [1, 1]


def test_a_failing_shutdown_is_logged_not_raised(caplog):
    lib = VendorLibrary(lambda: "module", Unavailable)
    lib.get()

    def boom(_module: object) -> None:
        raise OSError("driver gone")

    with caplog.at_level("DEBUG", logger="kvops.collectors.library"):
        lib.shut_down(boom, "nvmlShutdown")
    assert "nvmlShutdown: driver gone" in caplog.text
    assert lib.module is None
