"""Many targets' fetches at once in the calling thread, on one libcurl multi handle.

A thread per target costs more than the fetch itself: with 16 simulated targets, sixteen
threads waking, taking the GIL and handing results back used 12.3-12.6 ms of CPU per round,
this loop (which leaves the waiting to libcurl) 9.1-9.3 ms (benchmarks/scrape_round.py).
The multi handle also keeps the connections alive between rounds, so it lives as long as
its user.

Transfers at once are capped (MAX_CONNECTIONS, or a quarter of the descriptors the process
may open): 30,000 targets were all handed to libcurl before the first perform(), which took
longer than a frame's deadline, then opened 30,000 sockets, past a 20,000 descriptor limit.
A job waits in this loop until a transfer ends; one still waiting at the deadline is reported
as not fetched, with the cap named.
"""

from __future__ import annotations

import contextlib
import resource
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

import pycurl

from kvops.transport.http import FetchError, HttpClient, Transfer

# libcurl ends each transfer at the deadline by itself (TIMEOUT_MS); this is the margin after
# which a transfer it has not ended yet is taken off the handle anyway.
_GRACE = 0.25
_IDLE_WAIT = 0.005  # when libcurl has no socket to wait on yet (resolving, say)
_POLL = 0.25  # the longest wait between looks at close()
MAX_CONNECTIONS = 1024  # open at once, whatever the descriptor limit
# A job is begun only with this much time left: begun later it only times out before connecting,
# and is then reported as a timeout instead of as not fetched for want of a free connection.
_MIN_START = 0.05
_FD_SHARE = 4  # at most a quarter of the descriptor limit (the exporter's clients, files, GPUs)


def connection_cap() -> int:
    """Connections a round may have open at once: MAX_CONNECTIONS, or a quarter of the soft
    descriptor limit where that is lower (at least 8)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(8, min(MAX_CONNECTIONS, soft // _FD_SHARE))


class _Once:
    """A fetch's `meanwhile`, called at most once (in the fetch loop, or after it)."""

    def __init__(self, fn: Callable[[], None] | None) -> None:
        self._fn = fn

    @property
    def pending(self) -> bool:
        return self._fn is not None

    def __call__(self) -> None:
        fn, self._fn = self._fn, None
        if fn is not None:
            fn()


# done(job index, the body or why not, seconds from the round's start)
Done = Callable[[int, "str | FetchError", float], None]


class MultiFetcher:
    """One round at a time: kvops.scrape.runner runs rounds in single flight, so a second
    caller never waits here in practice; the lock only keeps the handle safe."""

    def __init__(self, max_connections: int = 0) -> None:
        """`max_connections`: at most this many transfers at once (libcurl queues the rest);
        0, no bound (the scrape rounds: one connection per target)."""
        self._multi = pycurl.CurlMulti()
        # Beyond the cap a transfer waits in libcurl's queue; idle connections past it are closed.
        # A caller's own bound (the fleet view's few queries) can only lower it.
        cap = connection_cap()
        self.max_connections = min(max_connections, cap) if max_connections else cap
        self._multi.setopt(pycurl.M_MAX_TOTAL_CONNECTIONS, self.max_connections)
        self._lock = threading.Lock()
        self._closing = False  # close() during a round: the round stops and closes the handle

    def fetch(
        self,
        jobs: Sequence[tuple[HttpClient, str]],
        deadline: float,
        done: Done,
        meanwhile: Callable[[], None] | None = None,
    ) -> None:
        """Fetch every job; as each ends, call done(job index, body text or the FetchError that
        says why not, seconds it took) in this thread, while the others go on.
        `meanwhile` is called once in this thread, when the requests are sent and the answers
        not yet read (or at the end, if none is awaited): the caller's own short work, done
        while the targets write their pages instead of on another thread. It must not raise."""
        once = _Once(meanwhile)
        try:
            with self._lock:
                if self._closing:
                    for index in range(len(jobs)):
                        done(index, FetchError("closed"), 0.0)
                else:
                    try:
                        self._round(jobs, deadline, done, once)
                    finally:
                        if self._closing:
                            self._multi.close()
        finally:  # called once, whatever happened to the fetches
            once()

    def _round(
        self,
        jobs: Sequence[tuple[HttpClient, str]],
        deadline: float,
        done: Done,
        meanwhile: _Once,
    ) -> None:
        multi = self._multi
        started = time.monotonic()
        running: dict[int, tuple[int, Transfer]] = {}  # id(handle) -> (job index, transfer)
        waiting = deque(range(len(jobs)))  # jobs not begun: over the cap, in order

        def settle(index: int, outcome: str | FetchError) -> None:
            done(index, outcome, time.monotonic() - started)

        def begin(index: int, transfer: Transfer) -> None:
            try:
                transfer.start(deadline)
            except FetchError as exc:
                settle(index, exc)
                return
            multi.add_handle(transfer.client.handle)
            running[id(transfer.client.handle)] = (index, transfer)

        def finish(handle: pycurl.Curl, error: pycurl.error | None) -> None:
            multi.remove_handle(handle)
            index, transfer = running.pop(id(handle))
            try:
                text = transfer.done(error)
            except FetchError as exc:
                settle(index, exc)
                return
            if text is None:  # a redirect within the origin: go again
                begin(index, transfer)
            else:
                settle(index, text)

        def admit() -> None:
            """Begin waiting jobs while under the cap; at the deadline, the rest are not fetched."""
            while (
                waiting and len(running) < self.max_connections and time.monotonic() < deadline - _MIN_START
            ):
                index = waiting.popleft()
                begin(index, Transfer(*jobs[index]))
            if waiting and time.monotonic() >= deadline - _MIN_START:  # none of them can begin now
                reason = (f"not fetched by the deadline: {len(jobs)} targets, at most "
                          f"{self.max_connections} fetched at once")  # fmt: skip
                while waiting:
                    settle(waiting.popleft(), FetchError(reason))

        try:
            self._run(running, finish, deadline, admit, meanwhile)
        finally:  # a failure half-way must not leave handles on the multi handle, or claimed
            left = list(running.values())
            running.clear()
            for index, transfer in left:
                with contextlib.suppress(pycurl.error):
                    multi.remove_handle(transfer.client.handle)
                transfer.abandon()
                settle(index, FetchError("internal error while fetching"))
            while waiting:
                settle(waiting.popleft(), FetchError("internal error while fetching"))

    def _run(
        self,
        running: dict[int, tuple[int, Transfer]],
        finish: Callable[..., None],
        deadline: float,
        admit: Callable[[], None],
        meanwhile: _Once,
    ) -> None:
        multi = self._multi
        while True:
            admit()  # as transfers end, the next jobs begin
            if not running:
                break
            while multi.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
                pass
            while True:
                queued, ok, failed = multi.info_read()
                for handle in ok:
                    finish(handle, None)
                for handle, code, message in failed:
                    finish(handle, pycurl.error(code, message))
                if not queued:
                    break
            if not running:  # all ended: begin the next jobs, or stop
                continue
            if meanwhile.pending:  # the requests are out, no answer read yet
                meanwhile()
                continue  # answers that came meanwhile are read before any wait
            left = deadline + _GRACE - time.monotonic()
            if left <= 0 or self._closing:
                reason = "closed" if self._closing else "deadline"
                for handle_id in list(running):
                    _, transfer = running[handle_id]
                    finish(transfer.client.handle, pycurl.error(pycurl.E_OPERATION_TIMEDOUT, reason))
                admit()  # past the deadline: the jobs still waiting are settled, not begun
                break
            wanted_ms = multi.timeout()  # when libcurl's own timers (timeouts, retries) are due
            wait = min(left, _POLL if wanted_ms < 0 else wanted_ms / 1000, _POLL)
            if wait > 0 and multi.select(wait) == -1:
                time.sleep(min(wait, _IDLE_WAIT))

    def close(self) -> None:
        """Never waits for a round (a UI quitting during a hung scrape): a running round sees
        the flag within _POLL seconds, gives up and closes the handle itself."""
        self._closing = True
        if self._lock.acquire(blocking=False):
            try:
                self._multi.close()
            finally:
                self._lock.release()
