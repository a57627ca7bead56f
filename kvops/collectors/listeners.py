"""Which processes hold a listening TCP socket on which port (Linux), asked of the kernel's
sock_diag netlink interface for listening sockets only.

psutil.net_connections(kind="tcp"), which this replaces where netlink answers, reads
/proc/net/tcp and tcp6, and to write those the kernel walks every bucket of its established-
connection hash table, sized from the host's memory, whatever few sockets it holds: 9.7 ms of
CPU for the two files on this 2-core VM with ~20 sockets, 11.5 ms for the whole psutil call,
against 30 us for the two netlink dumps of listening sockets (IPv4 and IPv6; best of 200).
A process-tree scan (kvops.collectors.procs) asks at start-up and then every 30 s to 5 min.
pyroute2 speaks sock_diag too, but would be a dependency for one request and one reply format.

The sockets' owners are then found as psutil finds them: each process's /proc/PID/fd links
("socket:[inode]"); a process whose fds cannot be read (another user's, without privileges)
is passed over, as psutil passes it over.
"""

from __future__ import annotations

import os
import socket
import struct

# linux/netlink.h, linux/sock_diag.h, linux/inet_diag.h
NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
TCP_LISTEN = 10
_NLMSGHDR = struct.Struct("=IHHII")  # length, type, flags, sequence, port id
_REQUEST = struct.Struct("=BBBBI48x")  # inet_diag_req_v2: family, protocol, ext, pad, states, id
_MSG_HEAD = struct.Struct("=BBBBH")  # inet_diag_msg: family, state, timer, retrans, id.sport (network order)
_INODE_AT = 4 + 48 + 16  # inet_diag_msg: its head, its inet_diag_sockid, expires to uid
_INODE = struct.Struct("=I")
_MAX_REPLY_BYTES = 64 << 20  # a dump is a few KB a hundred sockets: bounded all the same
_TIMEOUT = 2.0  # the kernel answers at once; a broken netlink never holds a scan longer


class Unavailable(Exception):
    """No sock_diag answer (not Linux, netlink refused by a sandbox): use another way."""


def _dump(family: int) -> list[tuple[int, int]]:
    """(port, inode) of each listening TCP socket of `family`."""
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)  # type: ignore[attr-defined]
    except (AttributeError, OSError) as exc:
        raise Unavailable(str(exc)) from None
    try:
        sock.settimeout(_TIMEOUT)
        request = _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, 1 << TCP_LISTEN)
        header = _NLMSGHDR.pack(
            _NLMSGHDR.size + len(request), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 1, 0
        )
        sock.sendto(header + request, (0, 0))
        found: list[tuple[int, int]] = []
        received = 0
        while True:
            data = sock.recv(65536)
            received += len(data)
            if not data or received > _MAX_REPLY_BYTES:
                raise Unavailable("sock_diag reply cut short or too long")
            at = 0
            while at + _NLMSGHDR.size <= len(data):
                length, kind, _flags, _seq, _port = _NLMSGHDR.unpack_from(data, at)
                if length < _NLMSGHDR.size or at + length > len(data):
                    raise Unavailable("malformed sock_diag message")
                if kind == NLMSG_DONE:
                    return found
                if kind == NLMSG_ERROR:
                    raise Unavailable("sock_diag answered an error")
                body = at + _NLMSGHDR.size
                if length >= _NLMSGHDR.size + _INODE_AT + _INODE.size:
                    _fam, state, _timer, _retrans, sport = _MSG_HEAD.unpack_from(data, body)
                    if state == TCP_LISTEN:
                        found.append((socket.ntohs(sport), _INODE.unpack_from(data, body + _INODE_AT)[0]))
                at += (length + 3) & ~3  # NLMSG_ALIGN
    except OSError as exc:
        raise Unavailable(str(exc)) from None
    finally:
        sock.close()


def listening_inodes() -> dict[int, set[int]]:
    """Inode -> ports of every listening TCP socket (IPv4 and IPv6). Raises Unavailable."""
    inodes: dict[int, set[int]] = {}
    for family in (socket.AF_INET, socket.AF_INET6):
        for port, inode in _dump(family):
            inodes.setdefault(inode, set()).add(port)
    return inodes


def socket_owners(inodes: set[int], root: str = "/") -> dict[int, set[int]]:
    """Inode -> PIDs whose open files include that socket, for the inodes asked about."""
    owners: dict[int, set[int]] = {}
    proc = os.path.join(root, "proc")
    try:
        names = os.listdir(proc)
    except OSError:
        return owners
    for name in names:
        if not (name.isascii() and name.isdigit()):
            continue
        fd_dir = os.path.join(proc, name, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:  # gone, or another user's: passed over
            continue
        for fd in fds:
            try:
                link = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if link.startswith("socket:[") and link.endswith("]"):
                inode = link[8:-1]
                if inode.isdigit() and int(inode) in inodes:
                    owners.setdefault(int(inode), set()).add(int(name))
    return owners


def listening_by_port() -> dict[int, set[int]]:
    """Port -> PIDs holding a listening TCP socket on it, on this host. Raises Unavailable."""
    inodes = listening_inodes()
    out: dict[int, set[int]] = {}
    for inode, pids in socket_owners(set(inodes)).items():
        for port in inodes[inode]:
            out.setdefault(port, set()).update(pids)
    return out
