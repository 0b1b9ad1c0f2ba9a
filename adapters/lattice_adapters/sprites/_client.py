"""The Sprites API client under the adapter: one wrapper, one REST call, typed answers.

`SpritesClient.call` is the one wrapper every adapter method goes through: httpx,
websockets and OS exceptions become `lattice_operator.ports.errors`, retried per
`RetryPolicy` where that is safe. `request` is the one REST call under it (any answer but a
2xx raises ours); `get` reads the answer into a `_wire` model, `progress` reads a whole
NDJSON progress stream. The HTTP client itself (origin pinning, error hooks) is `_http`.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, JsonValue

from lattice_adapters.sprites._credentials import SpritesCredentials
from lattice_adapters.sprites._http import build_http_client
from lattice_adapters.sprites._retry import RetryPolicy, Sleep, call_with_retry
from lattice_adapters.sprites._translate import error_from_response, translate_exception
from lattice_adapters.sprites._wire import StreamLine, parse, parse_line, progress_lines
from lattice_operator.clock import Clock
from lattice_operator.ports.errors import AdapterError, ProtocolError

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
Params = Mapping[str, str]


class SpritesClient:
    """Calls to one Sprites API with one token."""

    def __init__(
        self,
        credentials: SpritesCredentials,
        *,
        retry: RetryPolicy,
        timeout: float,
        clock: Clock,
        sleep: Sleep,
        rng: random.Random,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.api_url = credentials.api_url
        self.secret = credentials.token.get_secret_value()
        self.http = build_http_client(credentials, timeout=timeout, transport=transport)
        self._retry = retry
        self._clock = clock
        self._sleep = sleep
        self._rng = rng

    async def aclose(self) -> None:
        await self.http.aclose()

    async def call(
        self, what: str, operation: Callable[[], Awaitable[T]], *, idempotent: bool
    ) -> T:
        """The one wrapper: our exceptions only, retried where the policy allows."""

        async def attempt() -> T:
            try:
                return await operation()
            except AdapterError:
                raise
            except Exception as exc:
                raise translate_exception(exc, what=what, secret=self.secret) from None

        return await call_with_retry(
            self._retry,
            attempt,
            idempotent=idempotent,
            clock=self._clock,
            sleep=self._sleep,
            rng=self._rng,
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        what: str,
        idempotent: bool,
        params: Params | None = None,
        json: JsonValue = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        http_timeout: float | None = None,
    ) -> httpx.Response:
        """One REST call, its whole answer read; any answer but a 2xx raises ours."""

        async def attempt() -> httpx.Response:
            response = await self.http.request(
                method,
                self.url(path),
                params=params,
                json=json,
                content=content,
                headers={**self.auth(), **(headers or {})},
                timeout=http_timeout if http_timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )
            # The client's hook raised for 4xx and 5xx, except 416: that and 3xx land here.
            if not response.is_success:
                raise error_from_response(
                    response.status_code,
                    response.headers,
                    response.content,
                    what=what,
                    secret=self.secret,
                )
            return response

        return await self.call(what, attempt, idempotent=idempotent)

    async def get(self, model: type[M], path: str, *, what: str, params: Params | None = None) -> M:
        response = await self.request("GET", path, what=what, idempotent=True, params=params)
        return parse(model, response.content, what=what)

    async def progress(
        self,
        method: str,
        path: str,
        *,
        what: str,
        idempotent: bool,
        http_timeout: float,
        json: JsonValue = None,
    ) -> list[StreamLine]:
        """A call whose 200 answer is an NDJSON progress stream, read to its end."""
        response = await self.request(
            method, path, what=what, idempotent=idempotent, json=json, http_timeout=http_timeout
        )
        return list(progress_lines(response.text))

    @staticmethod
    def sprite_path(name: str, *rest: str) -> str:
        """`/v1/sprites/{name}/…`, each segment quoted."""
        parts = [quote(name, safe="")] + [quote(p, safe="") for p in rest]
        return "/v1/sprites/" + "/".join(parts)

    def url(self, path: str) -> str:
        return self.api_url + path

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secret}"}

    @staticmethod
    def validate(validate: Callable[[bytes], T], body: bytes, *, what: str) -> T:
        """`body` through a pydantic validator; what it refuses is a `ProtocolError`."""
        try:
            return validate(body)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise ProtocolError(f"{what}: unexpected answer: {type(exc).__name__}") from None

    @staticmethod
    async def lines(response: httpx.Response) -> AsyncIterator[StreamLine]:
        """The lines of a streamed NDJSON answer as they arrive; a line that is not JSON is
        a `ProtocolError`."""
        async for raw in response.aiter_lines():
            line = parse_line(raw)
            if line is not None:
                yield line


__all__ = ["SpritesClient"]
