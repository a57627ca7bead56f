"""A bind() shim for the real-Mooncake tests: every listener the master and the clients open
lands on loopback. A TEST DEVICE ONLY, like the stand-in CUDA libraries.

0.3.13.post1's master binds its built-in metadata server to 0.0.0.0 whatever
`-http_metadata_server_host` says, and the client's transfer engine binds its TCP listener and
handshake port to every address (MC_TCP_BIND_ADDRESS does not change either). The project's tests
listen on 127.0.0.1 only, so this library, preloaded (LD_PRELOAD) into those processes, turns a
bind to the IPv4 wildcard into 127.0.0.1 and one to the IPv6 wildcard into ::ffff:127.0.0.1 (the
socket stays dual-stack, so the clients' IPv4 connections to 127.0.0.1 still reach it). Built
with the system C compiler at test time, never committed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

SOURCE = r"""/* kvops test device only: binds to a wildcard address land on loopback */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static bind_fn real_bind;
    if (!real_bind) real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
    if (addr && addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        struct sockaddr_in v4;
        memcpy(&v4, addr, sizeof v4);
        if (v4.sin_addr.s_addr == htonl(INADDR_ANY)) {
            v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            return real_bind(fd, (const struct sockaddr *)&v4, sizeof v4);
        }
    }
    if (addr && addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 v6;
        memcpy(&v6, addr, sizeof v6);
        if (memcmp(&v6.sin6_addr, &in6addr_any, sizeof in6addr_any) == 0) {
            static const unsigned char mapped[16] = {0,0,0,0,0,0,0,0,0,0,0xff,0xff,127,0,0,1};
            memcpy(&v6.sin6_addr, mapped, sizeof mapped);
            return real_bind(fd, (const struct sockaddr *)&v6, sizeof v6);
        }
    }
    return real_bind(fd, addr, len);
}
"""


def build(out_dir: Path) -> Path:
    """Compile the shim into out_dir; return the library's path (for LD_PRELOAD)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    source = out_dir / "kvops-loopback-bind.c"
    source.write_text(SOURCE)
    target = out_dir / "kvops-loopback-bind.so"
    cmd = ["gcc", "-shared", "-fPIC", "-o", str(target), str(source), "-ldl"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return target
