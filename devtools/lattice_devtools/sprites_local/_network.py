"""One sprite's network: its namespace and the egress proxy listening inside it.

Made when the sprite's first process starts (the container joins the namespace), gone when
the sprite stops (cold, restore, delete, server stop): its processes are dead by then, and
closing the proxy's socket and the server's descriptor lets the kernel free the namespace.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any

from lattice_devtools.sprites_local._egress import EgressProxy, EgressSettings
from lattice_devtools.sprites_local._netns import PROXY_PORT, close_namespace, new_namespace
from lattice_devtools.sprites_local._netpolicy import NetworkPolicy

PROXY_URL = f"http://127.0.0.1:{PROXY_PORT}"
NO_PROXY = "localhost,127.0.0.1,::1"


def proxy_environment() -> dict[str, str]:
    """What points a sprite's programs at its proxy (curl reads the lower-case names,
    most others either)."""
    env = {name: PROXY_URL for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")}
    env |= {name.lower(): value for name, value in env.items()}
    env |= {"NO_PROXY": NO_PROXY, "no_proxy": NO_PROXY}
    return env


class SpriteNetwork:
    """The namespace (a descriptor the server holds) and the proxy serving it."""

    def __init__(
        self, sprite: str, settings: EgressSettings, policy: Callable[[], NetworkPolicy]
    ) -> None:
        self.proxy = EgressProxy(sprite, settings, policy)
        self.fd: int | None = None
        self._sock: socket.socket | None = None

    def ensure(self) -> int:
        """The namespace's descriptor, made (with the proxy serving) unless it exists.
        Raises NetnsError. Call from the server's loop."""
        if self.fd is None:
            fd, sock = new_namespace()
            try:
                self.proxy.serve(sock)
            except BaseException:
                close_namespace(fd, sock)
                raise
            self.fd, self._sock = fd, sock
        return self.fd

    def stop(self) -> None:
        """Drop every proxied connection and let the namespace go."""
        self.proxy.close()
        if self.fd is not None and self._sock is not None:
            close_namespace(self.fd, self._sock)
        self.fd, self._sock = None, None

    def policy_changed(self) -> int:
        return self.proxy.policy_changed()

    def describe(self) -> dict[str, Any]:
        return {
            "namespace": os.readlink(f"/proc/self/fd/{self.fd}") if self.fd is not None else None,
            "proxy": PROXY_URL,
            "open_connections": self.proxy.open_connections,
            **self.proxy.counts,
        }


__all__ = ["NO_PROXY", "PROXY_URL", "SpriteNetwork", "proxy_environment"]
