"""The HTTP client of every REST call of the adapter, and the redacting WebSocket logger.

One `httpx.AsyncClient` per adapter. Its hooks:

- refuse any request whose origin is not the configured API URL, so no call can send
  traffic anywhere else (environment proxies are ignored too);
- turn every error answer (except 416, which a Range read handles) into our exception with
  the body parsed and `Retry-After` kept.

No client-signals headers (`Fly-Client-*`, an agent-detection User-Agent, which the official
SDKs add): a plain User-Agent.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any

import httpx

from lattice_adapters.sprites._credentials import SpritesCredentials
from lattice_adapters.sprites._translate import error_from_response, redact
from lattice_operator.ports.errors import InvalidRequest

USER_AGENT = "lattice-operator"


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

    return httpx.AsyncClient(
        headers={"User-Agent": USER_AGENT},
        timeout=timeout,
        transport=transport,
        trust_env=False,
        follow_redirects=False,
        event_hooks={"request": [only_the_api], "response": [raise_for_status]},
    )


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


__all__ = ["USER_AGENT", "RedactingLogger", "build_http_client", "origin_of"]
