"""A background thread for driver calls too slow for the scrape path.

NVML's PCIe throughput reads a counter over 20 ms per direction; amdsmi's pci_throughput
sleeps 1 s in the kernel. collect() hands the sampler the devices it wants covered and
reads the latest figures; the thread starts on first use and samples every `interval`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

Rates = tuple[float | None, float | None]  # (transmit, receive) bytes per second


class BackgroundSampler:
    def __init__(self, sample: Callable[[Any], Rates], interval: float, name: str) -> None:
        self._sample = sample
        self._interval = interval
        self._name = name
        self._lock = threading.Lock()
        self._wanted: dict[str, Any] = {}  # uuid -> handle
        self._rates: dict[str, Rates] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def want(self, handles: dict[str, Any]) -> None:
        """Cover exactly these devices from now on; start the thread if there are any."""
        with self._lock:
            self._wanted = dict(handles)
            if handles and self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()

    def rates(self, uuid: str) -> Rates:
        with self._lock:
            return self._rates.get(uuid, (None, None))

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                wanted = dict(self._wanted)
            for uuid, handle in wanted.items():
                try:
                    rates = self._sample(handle)
                except Exception:  # a failing driver call: no figure this round
                    rates = (None, None)
                with self._lock:
                    self._rates[uuid] = rates
            self._stop.wait(self._interval)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
