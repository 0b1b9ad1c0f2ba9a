"""The HTTP client of every REST call of the adapter, and the redacting WebSocket logger.

One `httpx.AsyncClient` per adapter. Its hooks:

- refuse any request whose origin is not the configured API URL, so no call can send
  traffic anywhere else (environment proxies are ignored too);
- turn every error answer (except 416, which a Range read handles) into our exception with
  the body parsed and `Retry-After` kept.

Its transport lets at most `CONNECTIONS` requests into httpcore's pool at once; the rest wait
in one FIFO of ours (`OneQueue`).

No client-signals headers (`Fly-Client-*`, an agent-detection User-Agent, which the official
SDKs add): a plain User-Agent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, MutableMapping
from typing import Any

import httpx

from lattice_adapters.sprites._credentials import SpritesCredentials
from lattice_adapters.sprites._translate import error_from_response, redact
from lattice_operator.ports.errors import InvalidRequest

USER_AGENT = "lattice-operator"
CONNECTIONS = 100
"""Requests to the Sprites API in flight at once (httpx's default pool size)."""


def origin_of(url: httpx.URL) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port filled in."""
    default = {"http": 80, "https": 443, "ws": 80, "wss": 443}.get(url.scheme)
    return url.scheme.replace("ws", "http", 1), url.host, url.port or default


def build_http_client(
    credentials: SpritesCredentials,
    *,
    timeout: float,
    transport: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncClient:
    """The client every HTTP call of the adapter goes through."""
    allowed = origin_of(httpx.URL(credentials.api_url))
    secret = credentials.token.get_secret_value()

    async def only_the_api(request: httpx.Request) -> None:
        if origin_of(request.url) != allowed:
            raise InvalidRequest(
                f"refusing to send {request.method} to {request.url.host!r}: "
                "only the configured Sprites API URL may be contacted"
            )

    async def raise_for_status(response: httpx.Response) -> None:
        if response.status_code < 400 or response.status_code == 416:
            return
        await response.aread()
        request = response.request
        raise error_from_response(
            response.status_code,
            response.headers,
            response.content,
            what=f"{request.method} {request.url.path}",
            secret=secret,
        )

    inner = transport or httpx.AsyncHTTPTransport(
        limits=httpx.Limits(max_connections=CONNECTIONS, max_keepalive_connections=20)
    )
    return httpx.AsyncClient(
        headers={"User-Agent": USER_AGENT},
        timeout=timeout,
        transport=OneQueue(inner, CONNECTIONS),
        trust_env=False,
        follow_redirects=False,
        event_hooks={"request": [only_the_api], "response": [raise_for_status]},
    )


class OneQueue(httpx.AsyncBaseTransport):
    """At most `slots` requests in the transport at once, each holding its slot until its
    response is closed; the others wait here, first come first served, for at most the
    request's pool timeout (then `httpx.PoolTimeout`, as the pool itself would raise).

    Why: httpcore's pool (1.0.9) walks its queued requests against every connection on each
    request and each release, and hands a freed connection to every queued request at once
    (all but one fail and queue again): with 1,000 active Runs reading their outboxes, ~1,000
    requests queued for 100 connections and that bookkeeping took ~76 % of the operator's CPU
    samples (docs/operating.md, "How far one replica goes"). Kept at or under the pool's size,
    its queue stays empty and a pass is short."""

    def __init__(self, inner: httpx.AsyncBaseTransport, slots: int) -> None:
        self._inner = inner
        self._slots = asyncio.Semaphore(slots)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout") or {}
        try:
            await asyncio.wait_for(self._slots.acquire(), timeouts.get("pool"))
        except TimeoutError:
            raise httpx.PoolTimeout(
                "no connection to the Sprites API became free within the pool timeout",
                request=request,
            ) from None
        try:
            response = await self._inner.handle_async_request(request)
        except BaseException:
            self._slots.release()
            raise
        stream = response.stream
        if isinstance(stream, httpx.ByteStream) or not isinstance(stream, httpx.AsyncByteStream):
            self._slots.release()  # a body already in memory holds no connection
            return response
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Releasing(stream, self._slots.release),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Releasing(httpx.AsyncByteStream):
    """A response body that gives its request's slot back once, when it is closed."""

    def __init__(self, stream: httpx.AsyncByteStream, release: Callable[[], None]) -> None:
        self._stream = stream
        self._release: Callable[[], None] | None = release

    def __aiter__(self) -> AsyncIterator[bytes]:
        # The body's own iterator, not a generator around it: one left unfinished (a read
        # stopped at its limit) would be closed later by a task of the event loop's.
        return self._stream.__aiter__()

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


class RedactingLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """A logger for websockets that masks the token (it logs request headers at DEBUG)."""

    def __init__(self, logger: logging.Logger, secret: str) -> None:
        super().__init__(logger, {})
        self._secret = secret

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if not self.isEnabledFor(level):
            return
        try:
            text = str(msg) % args if args else str(msg)
        except (TypeError, ValueError):
            text = f"{msg} {args!r}"
        kwargs.pop("extra", None)
        self.logger.log(level, redact(text, self._secret), **kwargs)

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        return msg, kwargs


__all__ = [
    "CONNECTIONS",
    "USER_AGENT",
    "OneQueue",
    "RedactingLogger",
    "build_http_client",
    "origin_of",
]
