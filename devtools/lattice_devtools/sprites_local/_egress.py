"""The egress proxy: a sprite's only way out of its network namespace.

An HTTP forward proxy served on the server's own loop from a socket that listens inside the
sprite's namespace (`_netns`): `CONNECT host:port` for TLS and anything else, absolute-URI
requests (`GET http://host/path`) for plain HTTP. Each destination is judged by the sprite's
network policy (`_netpolicy`), resolved by the server, and judged again by address; the
connection then goes out from the host's side to the address that was judged. A refusal is
a 403 whose body says which rule (or the private-range rule) refused it.

Bounded: at most `max_connections` per sprite (more are answered 503 at once, never
queued), a request head of 64 KiB read within `head_timeout`, tunnels idle for
`idle_timeout` closed, and at most a few chunks buffered per direction (a slow reader
stops the writer: the relay waits for the kernel to take each chunk before it reads the
next). Policy changes apply live: new connections are judged by the current policy, and
`policy_changed` cuts open connections to names it now denies.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from lattice_devtools.sprites_local._netpolicy import (
    Address,
    Network,
    NetworkPolicy,
    address_refusal,
    ip_literal,
    local_name,
    normalise,
)

_log = logging.getLogger("lattice_devtools.sprites_local.egress")
HEAD_LIMIT = 64 * 1024
CHUNK = 256 * 1024
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "upgrade"}
)


@dataclass(frozen=True)
class EgressSettings:
    """What every sprite's proxy of one server shares."""

    allow_private: tuple[Network, ...] = ()
    """Non-global addresses the sprites may reach all the same (`--egress-allow-private`)."""
    max_connections: int = 256
    """Connections open through one sprite's proxy at once."""
    idle_timeout: float = 600.0
    """Seconds without a byte either way before a connection is closed."""
    connect_timeout: float = 30.0
    head_timeout: float = 30.0


class Refused(Exception):
    """The request gets this answer instead of a connection."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class ProxyRequest:
    method: str
    host: str
    port: int
    head: bytes
    """What to send upstream first (empty for CONNECT)."""


_REASONS = {
    400: "Bad Request",
    403: "Forbidden",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


def answer(status: int, message: str) -> bytes:
    body = (message + "\n").encode()
    return (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + body


def parse_request(head: bytes) -> ProxyRequest:
    """A proxy request head (up to and including the blank line), or Refused(400)."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise Refused(400, "not an HTTP/1 request line")
    method, target, version = parts
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise Refused(400, f"malformed header line {line[:60]!r}")
        headers.append((name, value.strip()))
    if method == "CONNECT":
        split = urlsplit("//" + target)
        host, port = _authority(split.hostname, _port(split), target)
        return ProxyRequest(method, host, port, b"")
    split = urlsplit(target)
    if split.scheme.lower() != "http" or not split.netloc:
        raise Refused(
            400,
            "this is the sprite's egress proxy: send absolute http:// URIs, or CONNECT "
            "host:port for TLS and anything else",
        )
    if split.username is not None or split.password is not None:
        raise Refused(400, "credentials in the URL are not forwarded")
    host, port = _authority(split.hostname, _port(split) or 80, target)
    path = split.path or "/"
    if split.query:
        path += "?" + split.query
    kept = [(n, v) for n, v in headers if n.lower() not in _HOP_BY_HOP]
    if not any(n.lower() == "host" for n, _ in kept):
        kept.insert(0, ("Host", split.netloc))
    text = f"{method} {path} {version}\r\n"
    text += "".join(f"{n}: {v}\r\n" for n, v in kept)
    text += "Connection: close\r\n\r\n"
    return ProxyRequest(method, host, port, text.encode("latin-1"))


def _port(split: Any) -> int | None:
    try:
        port: int | None = split.port
    except ValueError:
        raise Refused(400, "the port is not a number from 0 to 65535") from None
    return port


def _authority(host: str | None, port: int | None, target: str) -> tuple[str, int]:
    if not host or port is None or port == 0:
        raise Refused(400, f"no host:port in {target[:100]!r}")
    return host, port


@dataclass(eq=False)
class _Connection:
    """One client connection to the proxy (and its upstream once connected)."""

    client: asyncio.StreamWriter | None = None
    upstream: asyncio.StreamWriter | None = None
    host: str | None = None
    """The name it was allowed to reach (set once the upstream is connected)."""
    active: float = field(default_factory=time.monotonic)
    bytes_up: int = 0
    bytes_down: int = 0

    def cut(self) -> None:
        for writer in (self.client, self.upstream):
            if writer is not None:
                writer.transport.abort()


class EgressProxy:
    """One sprite's proxy, serving a socket that listens inside its namespace."""

    def __init__(
        self,
        sprite: str,
        settings: EgressSettings,
        policy: Callable[[], NetworkPolicy],
    ) -> None:
        self.sprite = sprite
        self.settings = settings
        self._policy = policy
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._conns: set[_Connection] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._refusing = 0
        self.counts = {"accepted": 0, "refused": 0, "over_limit": 0, "cut": 0}

    # -- lifecycle ------------------------------------------------------------------------
    def serve(self, sock: socket.socket) -> None:
        """Accept on `sock` from the running loop (synchronous: connections that arrive
        meanwhile wait in the socket's backlog)."""
        self._loop = asyncio.get_running_loop()
        self._sock = sock
        self._loop.add_reader(sock.fileno(), self._accept)

    def close(self) -> None:
        """Stop accepting and drop every connection (synchronous)."""
        if self._sock is not None and self._loop is not None:
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_reader(self._sock.fileno())
        self._sock = None
        for conn in list(self._conns):
            conn.cut()
        for task in list(self._tasks):
            task.cancel()

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    def policy_changed(self) -> int:
        """Cut the open connections to names the current policy denies; how many."""
        policy = self._policy()
        cut = 0
        for conn in list(self._conns):
            if conn.host is not None and not policy.judge(conn.host).allowed:
                _log.info("%s: egress to %s cut by a policy change", self.sprite, conn.host)
                conn.cut()
                cut += 1
        self.counts["cut"] += cut
        return cut

    # -- accepting ------------------------------------------------------------------------
    def _accept(self) -> None:
        sock = self._sock
        if sock is None:
            return
        for _ in range(64):
            try:
                client, _ = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                _log.warning("%s: egress proxy accept failed: %s", self.sprite, exc)
                return
            client.setblocking(False)
            if len(self._conns) < self.settings.max_connections:
                conn = _Connection()
                self._conns.add(conn)
                self.counts["accepted"] += 1
                self._spawn(self._handle(client, conn))
            elif self._refusing < self.settings.max_connections:
                self.counts["over_limit"] += 1
                self._refusing += 1
                self._spawn(self._over_limit(client))
            else:
                self.counts["over_limit"] += 1
                client.close()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        assert self._loop is not None
        task: asyncio.Task[None] = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _over_limit(self, client: socket.socket) -> None:
        limit = self.settings.max_connections
        try:
            reader, writer = await asyncio.open_connection(sock=client, limit=HEAD_LIMIT)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5.0)
            message = (
                f"too many connections: the sprite has {limit} open through its egress "
                "proxy, the limit (--egress-max-connections); close one and retry"
            )
            await _finish(reader, writer, answer(503, message))
        except OSError:
            client.close()
        finally:
            self._refusing -= 1

    # -- one connection -------------------------------------------------------------------
    async def _handle(self, client: socket.socket, conn: _Connection) -> None:
        reader: asyncio.StreamReader | None = None
        try:
            reader, writer = await asyncio.open_connection(sock=client, limit=HEAD_LIMIT)
            conn.client = writer
            try:
                head = await asyncio.wait_for(
                    reader.readuntil(b"\r\n\r\n"), self.settings.head_timeout
                )
            except asyncio.LimitOverrunError:
                raise Refused(400, "request head over 64 KiB") from None
            except (TimeoutError, asyncio.IncompleteReadError):
                return
            request = parse_request(head)
            up_reader, up_writer = await self._connect(request)
            conn.upstream = up_writer
            conn.host = normalise(request.host)
            # The policy may have changed while the name was resolved and connected.
            verdict = self._policy().judge(request.host)
            if not verdict.allowed:
                raise Refused(403, f"refused: {verdict.reason}")
            if request.method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                up_writer.write(request.head)
            await self._relay(conn, reader, writer, up_reader, up_writer)
        except Refused as refusal:
            self.counts["refused"] += 1
            _log.info("%s: egress refused: %s", self.sprite, refusal.message)
            if reader is not None and conn.client is not None:
                with contextlib.suppress(OSError, TimeoutError):
                    await _finish(reader, conn.client, answer(refusal.status, refusal.message))
        except (OSError, asyncio.IncompleteReadError):
            pass
        except Exception:
            # A bug here must not take the server down, nor go unseen.
            _log.exception("%s: egress proxy connection failed", self.sprite)
        finally:
            self._conns.discard(conn)
            conn.cut()
            if conn.client is None:
                client.close()

    async def _connect(
        self, request: ProxyRequest
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        host = request.host
        if ip_literal(host) is not None:
            raise Refused(
                403,
                f"raw IP destination {host} refused: name the host (the proxy resolves "
                "names and judges them by the network policy)",
            )
        verdict = self._policy().judge(host)
        if not verdict.allowed:
            raise Refused(403, f"refused: {verdict.reason}")
        addresses = await self._resolve(host, request.port)
        permitted: list[Address] = []
        refusals: list[str] = []
        for address in addresses:
            why = address_refusal(address, self.settings.allow_private)
            if why is None:
                permitted.append(address)
            else:
                refusals.append(why)
        if not permitted:
            raise Refused(403, f"{host} refused: {refusals[0]}")
        last = "no address"
        deadline = time.monotonic() + self.settings.connect_timeout
        for address in permitted:
            try:
                return await asyncio.wait_for(
                    asyncio.open_connection(str(address), request.port, limit=CHUNK),
                    max(0.1, deadline - time.monotonic()),
                )
            except TimeoutError:
                raise Refused(504, f"connecting to {host}:{request.port} timed out") from None
            except OSError as exc:
                last = f"{address}: {exc.strerror or exc}"
        raise Refused(502, f"cannot connect to {host}:{request.port} ({last})")

    async def _resolve(self, host: str, port: int) -> list[Address]:
        # Names below localhost are loopback (RFC 6761), whatever a resolver would say.
        lookup = "localhost" if local_name(host) else host
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(
                loop.getaddrinfo(lookup, port, type=socket.SOCK_STREAM),
                self.settings.connect_timeout,
            )
        except (OSError, TimeoutError) as exc:
            raise Refused(502, f"cannot resolve {host}: {exc}") from None
        found: list[Address] = []
        for _family, _type, _proto, _name, sockaddr in infos:
            address = ipaddress.ip_address(str(sockaddr[0]).partition("%")[0])
            if address not in found:
                found.append(address)
        if not found:
            raise Refused(502, f"cannot resolve {host}")
        return found

    async def _relay(
        self,
        conn: _Connection,
        client_reader: asyncio.StreamReader,
        client: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        upstream: asyncio.StreamWriter,
    ) -> None:
        pumps = {
            asyncio.ensure_future(_pump(client_reader, upstream, conn, up=True)),
            asyncio.ensure_future(_pump(up_reader, client, conn, up=False)),
        }
        idle = self.settings.idle_timeout
        try:
            while pumps:
                left = conn.active + idle - time.monotonic()
                if left <= 0:
                    _log.info("%s: egress to %s idle, closed", self.sprite, conn.host)
                    return
                done, pumps = await asyncio.wait(pumps, timeout=left)
                if any(not t.cancelled() and t.exception() is not None for t in done):
                    return  # one side failed (reset): the other goes too
        finally:
            for task in pumps:
                task.cancel()


async def _pump(
    source: asyncio.StreamReader, sink: asyncio.StreamWriter, conn: _Connection, *, up: bool
) -> None:
    while data := await source.read(CHUNK):
        conn.active = time.monotonic()
        if up:
            conn.bytes_up += len(data)
        else:
            conn.bytes_down += len(data)
        sink.write(data)
        await sink.drain()  # backpressure: nothing more is read until the sink takes it
    if sink.can_write_eof():
        with contextlib.suppress(OSError):
            sink.write_eof()


async def _finish(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes) -> None:
    """Answer and close without losing the answer to a reset: half-close, then discard
    what the client still sends for a moment."""
    writer.write(data)
    try:
        await asyncio.wait_for(writer.drain(), 5.0)
        if writer.can_write_eof():
            writer.write_eof()
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            await asyncio.wait_for(_discard(reader), 2.0)
    except (OSError, TimeoutError):
        pass
    finally:
        writer.transport.abort()


async def _discard(reader: asyncio.StreamReader) -> None:
    while await reader.read(HEAD_LIMIT):
        pass


__all__ = [
    "EgressProxy",
    "EgressSettings",
    "ProxyRequest",
    "Refused",
    "answer",
    "parse_request",
]
