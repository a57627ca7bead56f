"""One value at a time from a vendor library (NVML, amdsmi), as nvitop's single query wrapper does.

A GPU library fails per value: a field the board lacks (NotSupported) fails the same way on every
scrape, so it is remembered and not asked again; any other failure costs that value this time and
is logged once per GPU and value, so a scrape every 15 s does not flood the log; a few failures
(a GPU that fell off the bus) concern the whole GPU and go up to the collector.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import Enum
from typing import Any


class Failure(Enum):
    RAISE = "raise"  # goes up to the collector (a lost GPU)
    UNSUPPORTED = "unsupported"  # never asked again for this GPU
    TRANSIENT = "transient"  # this value, this time; logged once


class ValueQuery:
    """`ask(gpu, what, fn, *args)`: fn(*args), or None where the library would not say.

    `classify` sorts an exception (it is called with the library loaded, so it can name the
    library's own exception classes); `describe` makes its one log line.
    """

    def __init__(
        self,
        library: str,
        classify: Callable[[Exception], Failure],
        describe: Callable[[Exception], str] = str,
        logger: logging.Logger | None = None,
    ) -> None:
        self.library = library
        self._log = logger or logging.getLogger(__name__)
        self._classify = classify
        self._describe = describe
        self._unsupported: set[tuple[str, str]] = set()
        self._warned: set[tuple[str, str]] = set()

    def ask(self, gpu: str, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        if (gpu, what) in self._unsupported:
            return None
        try:
            return fn(*args)
        except Exception as e:
            kind = self._classify(e)
            if kind is Failure.RAISE:
                raise
            if kind is Failure.UNSUPPORTED:
                self._unsupported.add((gpu, what))
            else:
                self.warn_once(gpu, what, f"{self.library} {what} failed on GPU {gpu}: {self._describe(e)}")
        return None

    def unsupported(self, gpu: str, what: str) -> bool:
        return (gpu, what) in self._unsupported

    def mark_unsupported(self, gpu: str, what: str) -> None:
        self._unsupported.add((gpu, what))

    def warn_once(self, gpu: str, what: str, message: str) -> None:
        if (gpu, what) not in self._warned:
            self._warned.add((gpu, what))
            self._log.warning("%s", message)
