"""A network namespace per sprite: loopback only, nothing routed out of it.

The namespace is made by a short-lived thread of the server (`unshare(CLONE_NEWNET)`
changes only the calling thread's namespace), which brings `lo` up and creates, binds and
listens a TCP socket there on 127.0.0.1:`PROXY_PORT` before it exits. A socket keeps the
namespace it was made in, so the server, on its own loop in the host's namespace, accepts
the sprite's proxy connections on it and opens the outbound ones from the host's side. No
veth, bridge, route or address exists outside: the proxy is the sprite's only way out.

The server holds a descriptor of the namespace; sprite processes `setns` into it (runc
joins it for the container's init), and it lives as long as that descriptor, the socket or
a process in it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import fcntl
import os
import socket
import struct
import threading

CLONE_NEWNET = 0x40000000
PROXY_PORT = 3128
"""Where the egress proxy listens inside every sprite (127.0.0.1)."""
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_IFREQ = "16sh22x"

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_libc.unshare.argtypes = [ctypes.c_int]


class NetnsError(RuntimeError):
    """A sprite's network namespace cannot be made (and why)."""


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        request = struct.pack(_IFREQ, b"lo", 0)
        _, flags = struct.unpack(_IFREQ, fcntl.ioctl(probe.fileno(), _SIOCGIFFLAGS, request))
        if not flags & _IFF_UP:
            fcntl.ioctl(probe.fileno(), _SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | _IFF_UP))


def _listener(port: int, backlog: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def new_namespace(port: int = PROXY_PORT, backlog: int = 128) -> tuple[int, socket.socket]:
    """A new network namespace (a descriptor of it) with `lo` up and a listening socket
    on 127.0.0.1:`port` inside it. Blocking, about a millisecond."""
    result: list[tuple[int, socket.socket]] = []
    failure: list[str] = []

    def work() -> None:
        # This thread ends here: whatever namespace it is left in dies with it.
        step = "unshare(CLONE_NEWNET)"
        fd = -1
        try:
            if _libc.unshare(CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
            step = "open the namespace"
            fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            step = "bring lo up"
            _loopback_up()
            step = f"listen on 127.0.0.1:{port} inside it"
            result.append((fd, _listener(port, backlog)))
        except OSError as exc:
            if fd >= 0:
                os.close(fd)
            failure.append(f"{step}: {exc.strerror or exc}")

    thread = threading.Thread(target=work, name="sprite-netns", daemon=True)
    thread.start()
    thread.join()
    if not result:
        reason = failure[0] if failure else "unknown failure"
        raise NetnsError(
            f"cannot give the sprite a network namespace of its own ({reason}): this needs "
            "root (CAP_SYS_ADMIN)"
        )
    return result[0]


def close_namespace(fd: int, sock: socket.socket) -> None:
    sock.close()
    with contextlib.suppress(OSError):
        os.close(fd)


def namespace_path(fd: int) -> str:
    """A path naming the namespace for another process (runc joins it by path)."""
    return f"/proc/{os.getpid()}/fd/{fd}"


__all__ = [
    "CLONE_NEWNET",
    "PROXY_PORT",
    "NetnsError",
    "close_namespace",
    "namespace_path",
    "new_namespace",
]
