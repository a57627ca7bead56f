"""A GPU vendor library's start-up, shared by the NVIDIA and AMD collectors.

Loading NVML or amdsmi costs a dlopen and a driver call. On a host without the library (the
usual case for one of the two vendors) that would happen, and be logged, on every scrape, so
a failure is remembered and answered at once for RETRY_SECONDS before it is tried again (a
driver may come up after kvops did).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

RETRY_SECONDS = 30.0


class VendorLibrary:
    def __init__(self, load: Callable[[], Any], unavailable: type[Exception]) -> None:
        """`load` imports and initialises the module, raising `unavailable` with a one-line
        reason where it cannot."""
        self._load = load
        self._unavailable = unavailable
        self.module: Any = None
        self._error: str | None = None
        self._failed_at = 0.0

    def get(self) -> Any:
        """The initialised module, or `unavailable` raised with why not."""
        if self.module is not None:
            return self.module
        if self._error and time.monotonic() - self._failed_at < RETRY_SECONDS:
            raise self._unavailable(self._error)
        try:
            module = self._load()
        except self._unavailable as e:
            self._error, self._failed_at = str(e), time.monotonic()
            raise
        self.module, self._error = module, None
        return module

    def shut_down(self, call: Callable[[Any], Any], what: str) -> None:
        if self.module is None:
            return
        try:
            call(self.module)
        except Exception as e:  # shutting down: nothing left to degrade
            log.debug("%s: %s", what, e)
        self.module = None
