"""A bounded pool of worker threads that start on demand and end when idle.

concurrent.futures keeps every thread it ever started until shutdown; after a burst of
connections the exporter would hold its peak thread count for ever. Here a worker idle for
`idle_exit` seconds ends, so threads return to their baseline after a flood; the first `keep`
stay. With none kept, a scraper that comes back every 15 or 60 s found no worker each time and
every scrape started a thread and ended it (56 us of CPU a start and join here, about 1 % of
the exporter's scrape).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class Workers:
    def __init__(self, size: int, name: str, idle_exit: float = 5.0, keep: int = 0) -> None:
        self.size = size
        self.name = name
        self.idle_exit = idle_exit
        self.keep = keep  # workers that wait for work however long it takes, once started
        self._cond = threading.Condition()
        self._items: deque[tuple[Callable[[Any], None], Any]] = deque()
        self._threads = 0
        self._idle = 0
        self._stopping = False

    def submit(self, fn: Callable[[Any], None], arg: Any) -> None:
        """Run fn(arg) on a worker; queued while all `size` workers are busy."""
        with self._cond:
            self._items.append((fn, arg))
            if self._idle >= len(self._items):
                self._cond.notify()
            elif self._threads < self.size:
                self._threads += 1
                threading.Thread(target=self._run, name=f"{self.name}-{self._threads}", daemon=True).start()

    @property
    def threads(self) -> int:
        return self._threads

    def _run(self) -> None:
        with self._cond:
            while True:
                while not self._items and not self._stopping:
                    self._idle += 1
                    woken = self._cond.wait(timeout=self.idle_exit)
                    self._idle -= 1
                    if not woken and not self._items and self._threads > self.keep:
                        self._threads -= 1
                        return
                if self._stopping:
                    self._threads -= 1
                    return
                fn, arg = self._items.popleft()
                self._cond.release()
                try:
                    fn(arg)
                except Exception:  # a bug in one job must not end the worker (or leak its slot)
                    log.exception("%s: a job failed", self.name)
                finally:
                    self._cond.acquire()

    def stop(self) -> list[Any]:
        """Workers end after their current job; queued jobs are dropped and their args
        returned (for the caller to release)."""
        with self._cond:
            self._stopping = True
            dropped = [arg for _, arg in self._items]
            self._items.clear()
            self._cond.notify_all()
        return dropped
