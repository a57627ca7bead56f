"""kvops.collectors.listeners: listening TCP sockets and their processes, from sock_diag."""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from kvops.collectors import listeners, procs


@pytest.fixture
def listening() -> Iterator[tuple[int, int]]:
    """An IPv4 and an IPv6 socket of this process, listening on ports the kernel chose."""
    v4 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    v6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    try:
        v4.bind(("127.0.0.1", 0))
        v4.listen()
        v6.bind(("::1", 0))
        v6.listen()
        yield v4.getsockname()[1], v6.getsockname()[1]
    finally:
        v4.close()
        v6.close()


def _psutil_listeners() -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for c in psutil.net_connections(kind="tcp"):
        if c.status == psutil.CONN_LISTEN and c.laddr and c.pid:
            out.setdefault(c.laddr.port, set()).add(c.pid)
    return out


def test_the_same_listeners_as_psutil_finds(listening: tuple[int, int]) -> None:
    v4, v6 = listening
    found = listeners.listening_by_port()
    assert found[v4] == {os.getpid()} and found[v6] == {os.getpid()}
    assert found == _psutil_listeners()


def test_a_connected_socket_is_not_a_listener(listening: tuple[int, int]) -> None:
    v4, _ = listening
    client = socket.create_connection(("127.0.0.1", v4))
    try:
        ports = {port for ports in listeners.listening_inodes().values() for port in ports}
        assert v4 in ports and client.getsockname()[1] not in ports
    finally:
        client.close()


def test_without_netlink_the_scan_asks_psutil(
    listening: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = socket.socket

    def no_netlink(family: int = -1, *args: Any, **kwargs: Any) -> socket.socket:
        if family == socket.AF_NETLINK:
            raise PermissionError(1, "Operation not permitted")  # a sandbox's seccomp, say
        return real(family, *args, **kwargs)

    monkeypatch.setattr(listeners.socket, "socket", no_netlink)
    with pytest.raises(listeners.Unavailable):
        listeners.listening_inodes()
    assert procs._listening_by_port()[listening[0]] == {os.getpid()}


class _Replies:
    """A netlink socket whose dump answers are the given datagrams."""

    def __init__(self, datagrams: list[bytes]) -> None:
        self.datagrams = datagrams

    def settimeout(self, _t: float) -> None:
        pass

    def sendto(self, _data: bytes, _address: object) -> None:
        pass

    def recv(self, _size: int) -> bytes:
        return self.datagrams.pop(0) if self.datagrams else b""

    def close(self) -> None:
        pass


def _message(kind: int, body: bytes) -> bytes:
    return struct.pack("=IHHII", 16 + len(body), kind, 0, 1, 0) + body


def _listener(port: int, inode: int, state: int = listeners.TCP_LISTEN) -> bytes:
    head = struct.pack("=BBBBH", socket.AF_INET, state, 0, 0, socket.htons(port))
    return _message(
        listeners.SOCK_DIAG_BY_FAMILY, head + bytes(46 + 16) + struct.pack("=I", inode) + bytes(4)
    )


@pytest.mark.parametrize(
    ("datagrams", "outcome"),
    [
        (
            [_listener(8000, 77) + _listener(9, 5, state=1), _message(listeners.NLMSG_DONE, b"\0" * 4)],
            [(8000, 77)],
        ),
        ([_listener(8000, 77)], "cut short"),  # no NLMSG_DONE: the socket closed under it
        ([_listener(8000, 77)[:30]], "malformed"),  # a length past the datagram
        ([_message(listeners.NLMSG_ERROR, b"\xff\xff\xff\xff")], "error"),
        ([struct.pack("=IHHII", 4, 20, 0, 1, 0)], "malformed"),  # a length below the header's
    ],
)
def test_a_reply_is_read_or_refused_whole(
    monkeypatch: pytest.MonkeyPatch, datagrams: list[bytes], outcome: object
) -> None:
    monkeypatch.setattr(listeners.socket, "socket", lambda *a: _Replies(list(datagrams)))
    if isinstance(outcome, list):
        assert listeners._dump(socket.AF_INET) == outcome
    else:
        with pytest.raises(listeners.Unavailable, match=str(outcome)):
            listeners._dump(socket.AF_INET)


def test_owners_from_fd_links(tmp_path: Path) -> None:
    fds = tmp_path / "proc" / "41" / "fd"
    fds.mkdir(parents=True)
    (fds / "3").symlink_to("socket:[900]")
    (fds / "4").symlink_to("socket:[901]")
    (fds / "5").symlink_to("/dev/null")
    other = tmp_path / "proc" / "42" / "fd"
    other.mkdir(parents=True)
    (other / "7").symlink_to("socket:[900]")  # inherited by a child: both hold it
    (tmp_path / "proc" / "self").mkdir()  # not a PID
    assert listeners.socket_owners({900}, str(tmp_path)) == {900: {41, 42}}
