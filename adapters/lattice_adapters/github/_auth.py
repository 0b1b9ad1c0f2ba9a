"""The forge credential: a fine-grained token from a Secret, or a GitHub App's installation
tokens (made from the App's private key, cached, and refreshed before they expire).

The same token authenticates the REST calls and the operator's git pushes; it never leaves
the operator (no sprite, status, Event or log line ever sees it).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncGenerator, Generator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

import httpx
import jwt
from githubkit import GitHub
from githubkit.auth.base import BaseAuthStrategy
from githubkit.exception import GitHubException

from lattice_adapters.github._errors import translate
from lattice_operator.clock import Clock, SystemClock
from lattice_operator.ports.errors import CredentialsMissing, ProtocolError

if TYPE_CHECKING:
    from githubkit import GitHubCore


class TokenSource(Protocol):
    """Where the operator's GitHub token comes from."""

    async def token(self) -> str: ...

    async def aclose(self) -> None: ...


@dataclass
class StaticToken:
    """A fine-grained personal access token (or any token given as is)."""

    value: str

    def __post_init__(self) -> None:
        if not self.value.strip():
            raise CredentialsMissing("the GitHub token is empty")
        self.value = self.value.strip()

    async def token(self) -> str:
        return self.value

    async def aclose(self) -> None:
        return None


class AppInstallationTokens:
    """Installation tokens of a GitHub App, cached until `refresh_margin` before expiry.

    GitHub's installation tokens live an hour; a new one is asked for (with a JWT signed by
    the App's key, valid ten minutes) only when the cached one is about to expire, and one
    caller at a time asks."""

    def __init__(
        self,
        *,
        app_id: str,
        private_key: str,
        installation_id: int,
        api_url: str,
        clock: Clock | None = None,
        refresh_margin: float = 300.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not app_id or not private_key.strip():
            raise CredentialsMissing("a GitHub App needs its id and private key")
        self._app_id = app_id
        self._key = private_key
        self._installation = installation_id
        self._clock = clock or SystemClock()
        self._margin = timedelta(seconds=refresh_margin)
        self._lock = asyncio.Lock()
        self._cached: tuple[str, datetime] | None = None
        self.issued = 0
        """Installation tokens asked for so far (the cache's misses)."""
        self._client = GitHub(
            _Bearer(self._jwt),
            base_url=api_url,
            auto_retry=False,
            http_cache=False,
            async_transport=transport,
        )

    def _jwt(self) -> str:
        # Issued a minute in the past: GitHub refuses a JWT from a clock ahead of its own.
        now = self._clock.now()
        claims = {
            "iss": self._app_id,
            "iat": int((now - timedelta(seconds=60)).timestamp()),
            "exp": int((now + timedelta(seconds=540)).timestamp()),
        }
        return jwt.encode(claims, self._key, algorithm="RS256")

    @property
    def expires_at(self) -> datetime | None:
        """When the cached token expires (None: none cached)."""
        return self._cached[1] if self._cached else None

    async def token(self) -> str:
        async with self._lock:
            cached = self._cached
            if cached is not None and self._clock.now() < cached[1] - self._margin:
                return cached[0]
            try:
                response = await self._client.rest.apps.async_create_installation_access_token(
                    self._installation
                )
            except GitHubException as exc:
                raise translate(exc, "creating an installation token") from None
            data: Any = response.raw_response.json()
            try:
                value = str(data["token"])
                expires = datetime.fromisoformat(str(data["expires_at"]).replace("Z", "+00:00"))
            except (KeyError, TypeError, ValueError) as exc:
                raise ProtocolError(f"the installation token answer is malformed: {exc}") from None
            self._cached = (value, expires)
            self.issued += 1
            return value

    async def aclose(self) -> None:
        self._cached = None


@dataclass
class _Bearer(BaseAuthStrategy):
    """`Authorization: Bearer <JWT>` (GitHub App endpoints), a fresh JWT per request."""

    make: Any

    def get_auth_flow(self, github: GitHubCore[Any]) -> httpx.Auth:
        return _HeaderAuth(lambda: f"Bearer {self.make()}")


class _HeaderAuth(httpx.Auth):
    def __init__(self, header: Any) -> None:
        self._header = header

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = self._header()
        yield request


@dataclass
class SourceAuth(BaseAuthStrategy):
    """githubkit's auth strategy over a `TokenSource` (asked on every request: cheap when
    cached)."""

    source: TokenSource

    def get_auth_flow(self, github: GitHubCore[Any]) -> httpx.Auth:
        return _SourceFlow(self.source)


class _SourceFlow(httpx.Auth):
    def __init__(self, source: TokenSource) -> None:
        self._source = source

    def sync_auth_flow(
        self, request: httpx.Request
    ) -> Generator[httpx.Request, httpx.Response, None]:
        raise RuntimeError("the forge adapter is async only")

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        request.headers["Authorization"] = f"token {await self._source.token()}"
        yield request


def git_auth_header(token: str) -> str:
    """The HTTP header git sends to push with a token (GitHub's documented form)."""
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return f"Authorization: Basic {basic}"


__all__ = ["AppInstallationTokens", "SourceAuth", "StaticToken", "TokenSource", "git_auth_header"]
