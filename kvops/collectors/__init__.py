"""Hardware and host collectors: one vendor or source per module.

Each collector has a `name` (the `collector` label: "nvidia", "amd", "host") and a
`collect()` that returns its part of a Snapshot or raises; the exporter wraps every call in
its own error boundary and timeout, so a raising collector costs only its own series.
"""

from __future__ import annotations

from typing import Protocol

from kvops.snapshot import GpuSample, HostSample


class GpuCollector(Protocol):
    name: str

    def collect(self) -> list[GpuSample]: ...

    def close(self) -> None: ...


class HostCollectorProtocol(Protocol):
    name: str

    def collect(self) -> HostSample: ...
