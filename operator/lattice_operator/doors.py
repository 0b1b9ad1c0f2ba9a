"""The operator's own HTTP doors (the stream, /metrics, the GitHub receiver) on asyncio, with
bounded cost.

aiohttp alone keeps a connection that sends half a request, or none, for its keep-alive
time (3,630 s) and accepts any number of them. Here a connection must send its first
request's headers within `header_timeout`, may wait `idle_timeout` between requests, and
one over `max_connections` is answered 503 and closed: a slow or silent client holds one
socket and a little memory for seconds, never a thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiohttp import web

from lattice_operator.settings import ConnectionLimits

_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nRetry-After: 1\r\n"
    b"Connection: close\r\nContent-Length: 21\r\n\r\ntoo many connections\n"
)


class BoundedSite(web.BaseSite):
    """A TCP site of an AppRunner whose connections are bounded as ConnectionLimits says.

    The runner must be made with `runner_options(limits)` (aiohttp's own idle timeout)."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        limits: ConnectionLimits,
        on_busy: Callable[[], None] | None = None,
    ):
        super().__init__(runner)
        self._host, self._port, self.limits = host, port, limits
        self._on_busy = on_busy
        self.open = 0
        """Connections accepted and not yet closed (refused ones not counted)."""
        self.bound_port = port

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self.bound_port}"

    async def start(self) -> None:
        await super().start()
        loop = asyncio.get_running_loop()
        self._server = server = await loop.create_server(self._accept, self._host, self._port)
        self.bound_port = server.sockets[0].getsockname()[1]

    def _accept(self) -> asyncio.Protocol:
        if self.open >= self.limits.max_connections:
            if self._on_busy is not None:
                self._on_busy()
            return _Busy(self.limits.header_timeout)
        handler = self._runner.server
        assert handler is not None, "runner not set up"
        # Counted here, not in connection_made: asyncio makes the protocols of a batch of
        # accepted sockets before it tells any of them, which would let a burst past the bound.
        self.open += 1
        return _Guarded(handler(), self)


def runner_options(limits: ConnectionLimits) -> dict[str, Any]:
    """AppRunner keyword arguments: aiohttp closes a connection idle between requests (or
    whose next request's headers are incomplete) after its keep-alive timeout."""
    return {"keepalive_timeout": limits.idle_timeout}


class _Guarded(asyncio.Protocol):
    """aiohttp's protocol for one connection, closed if its first request's headers do not
    arrive within the header timeout (aiohttp's own timer covers later requests)."""

    def __init__(self, inner: asyncio.Protocol, site: BoundedSite) -> None:
        self._inner, self._site = inner, site
        self._timer: asyncio.TimerHandle | None = None
        self._tail = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._site.limits.header_timeout, transport.abort)
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._timer is not None:
            seen = self._tail + data
            if b"\r\n\r\n" in seen or b"\n\n" in seen:
                self._timer.cancel()
                self._timer = None
            self._tail = seen[-3:]
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._site.open -= 1
        if self._timer is not None:
            self._timer.cancel()
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class _Busy(asyncio.Protocol):
    """One connection too many: 503, then closed once its request arrived (closing before
    would reset the connection and lose the answer) or after the header timeout."""

    def __init__(self, timeout: float) -> None:
        self._timeout = timeout
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        transport.write(_BUSY)
        self._timer = asyncio.get_running_loop().call_later(self._timeout, transport.close)

    def data_received(self, data: bytes) -> None:
        self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()


def metrics_app(registry: Any) -> web.Application:
    """/metrics as prometheus_client serves it (any path, the format the Accept header asks
    for, gzip when accepted, `name[]` to restrict), from the event loop."""
    from prometheus_client.exposition import choose_encoder, gzip_accepted

    async def metrics(request: web.Request) -> web.Response:
        if request.path == "/favicon.ico":
            return web.Response(body=b"")
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        names = request.query.getall("name[]", [])
        chosen = registry.restricted_registry(names) if names else registry
        output = encoder(chosen)
        headers = {"Content-Type": content_type}
        if gzip_accepted(request.headers.get("Accept-Encoding", "")):
            import gzip

            output = gzip.compress(output)
            headers["Content-Encoding"] = "gzip"
        return web.Response(body=output, headers=headers)

    app = web.Application()
    app.router.add_get("/{path:.*}", metrics)
    return app


async def serve_metrics(
    registry: Any, host: str, port: int, limits: ConnectionLimits
) -> web.AppRunner:
    """Start /metrics on the running loop; `cleanup()` the runner to stop it."""
    runner = web.AppRunner(
        metrics_app(registry), access_log=None, shutdown_timeout=1.0, **runner_options(limits)
    )
    await runner.setup()
    await BoundedSite(runner, host, port, limits).start()
    return runner


__all__ = ["BoundedSite", "ConnectionLimits", "metrics_app", "runner_options", "serve_metrics"]
