"""ValueQuery: the one per-value wrapper NVML and amdsmi calls go through."""

import logging

import pytest

from kvops.collectors.query import Failure, ValueQuery


class Lost(Exception):
    pass


class NotSupported(Exception):
    pass


def classify(e: Exception) -> Failure:
    if isinstance(e, Lost):
        return Failure.RAISE
    return Failure.UNSUPPORTED if isinstance(e, NotSupported) else Failure.TRANSIENT


def test_unsupported_is_not_asked_again() -> None:
    calls = []

    def fn() -> int:
        calls.append(1)
        raise NotSupported

    q = ValueQuery("NVML", classify)
    assert q.ask("gpu0", "replay", fn) is None
    assert q.ask("gpu0", "replay", fn) is None
    assert len(calls) == 1
    assert q.unsupported("gpu0", "replay") and not q.unsupported("gpu1", "replay")


def test_transient_failure_is_logged_once_and_asked_again(caplog: pytest.LogCaptureFixture) -> None:
    answers = iter([TimeoutError("busy"), TimeoutError("busy"), 7])

    def fn() -> int:
        a = next(answers)
        if isinstance(a, Exception):
            raise a
        return a

    q = ValueQuery("amdsmi", classify, logger=logging.getLogger("t"))
    with caplog.at_level(logging.WARNING, logger="t"):
        assert q.ask("gpu0", "metrics", fn) is None
        assert q.ask("gpu0", "metrics", fn) is None
        assert q.ask("gpu0", "metrics", fn) == 7
    assert [r.getMessage() for r in caplog.records] == ["amdsmi metrics failed on GPU gpu0: busy"]


def test_lost_gpu_goes_up() -> None:
    def fn() -> None:
        raise Lost

    with pytest.raises(Lost):
        ValueQuery("NVML", classify).ask("gpu0", "memory", fn)
