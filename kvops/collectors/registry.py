"""The hardware and host collectors kvops runs, by name: `--no-collector`'s choices and the
collectors a scrape round starts with (kvops.scrape.runner runs them, without knowing which).

Each turns on by itself and reports success 0 where its library does not work. The modules are
imported when the collectors are made, so `kvops --help` loads no vendor library.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kvops.snapshot import Collector


def _host() -> Collector:
    from kvops.collectors.host import HostCollector

    return HostCollector()


def _nvidia() -> Collector:
    from kvops.collectors.nvidia import NvidiaCollector

    return NvidiaCollector()


def _amd() -> Collector:
    from kvops.collectors.amd import AmdCollector

    return AmdCollector()


# name (the `collector` label) -> its maker, in the order a round lists them.
COLLECTORS: dict[str, Callable[[], Collector]] = {"host": _host, "nvidia": _nvidia, "amd": _amd}
NAMES: tuple[str, ...] = tuple(COLLECTORS)


def default_collectors(disabled: Iterable[str] = ()) -> list[Collector]:
    """Every collector but the `disabled` ones."""
    off = set(disabled)
    return [make() for name, make in COLLECTORS.items() if name not in off]
