"""Async REST calls to the Kubernetes API server."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any
from urllib.parse import quote

import aiohttp

from lattice_adapters.kube.config import KubeConfig

JsonObject = dict[str, Any]

# Kubernetes' own name rules: a namespace is a DNS-1123 label, object names DNS-1123 subdomains.
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class InvalidName(ValueError):
    """A name or namespace that Kubernetes would never accept (so it never reaches a URL)."""


def check_namespace(namespace: str) -> str:
    if len(namespace) > 63 or not _DNS1123_LABEL.fullmatch(namespace):
        raise InvalidName(
            f"invalid namespace {namespace!r}: must be a DNS-1123 label (lowercase letters, "
            "digits and '-', starting and ending with a letter or digit, at most 63 characters)"
        )
    return namespace


def check_name(name: str) -> str:
    if len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name):
        raise InvalidName(
            f"invalid name {name!r}: must be a DNS-1123 subdomain (lowercase letters, digits, "
            "'-' and '.', starting and ending with a letter or digit, at most 253 characters)"
        )
    return name


class KubeApiError(Exception):
    """The API server answered with an error status."""

    def __init__(self, status: int, reason: str, message: str, body: JsonObject | None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409


def resource_path(
    group: str,
    version: str,
    plural: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """The REST path of a resource collection or object (group "" is the core API).

    Names and namespaces are checked as Kubernetes checks them and every segment is escaped,
    so no input can add a query (`?dryRun=All`) or reach another path (`../`)."""
    segments = ["api", version] if group == "" else ["apis", group, version]
    if namespace is not None:
        segments += ["namespaces", check_namespace(namespace)]
    segments.append(plural)
    if name is not None:
        segments.append(check_name(name))
    if subresource is not None:
        segments.append(subresource)
    return "/" + "/".join(quote(s, safe="") for s in segments)


class KubeClient:
    """One aiohttp session to the API server; use as an async context manager."""

    def __init__(
        self,
        config: KubeConfig,
        *,
        user_agent: str = "lattice-operator",
        connections: int = 32,
        connect_timeout: float = 10.0,
        total_timeout: float = 60.0,
    ) -> None:
        self.config = config
        self._user_agent = user_agent
        self._connections = connections
        self._connect_timeout = connect_timeout
        self._total_timeout = total_timeout
        self._session: aiohttp.ClientSession | None = None
        # A request waits here for one of the pool's connections, untimed: under a load the
        # API server cannot keep up with, requests queue (in order) instead of failing after
        # the total timeout, which failed whole daemons (kopf then retried them a minute
        # later). The total timeout bounds each request once it has its connection.
        self._slots = asyncio.Semaphore(connections)

    async def __aenter__(self) -> KubeClient:
        connector = aiohttp.TCPConnector(ssl=self.config.ssl_context(), limit=self._connections)
        # trust_env=False: never route API traffic through environment proxies.
        # No base_url: it would drop a path prefix of the server (API proxies serve under one).
        # sock_connect, not connect: aiohttp's `connect` also counts the wait for a free pooled
        # connection, so a burst of requests queued behind the pool failed after 10 s as if
        # the API server were unreachable (hundreds of Intents at once did).
        self._session = aiohttp.ClientSession(
            connector=connector,
            trust_env=False,
            timeout=aiohttp.ClientTimeout(
                total=self._total_timeout, sock_connect=self._connect_timeout
            ),
            headers={"User-Agent": self._user_agent, "Accept": "application/json"},
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: JsonObject | list[Any] | None = None,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> JsonObject:
        if self._session is None:
            raise RuntimeError("KubeClient used outside its context")
        headers = {"Content-Type": content_type}
        token = self.config.bearer_token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = json.dumps(body) if body is not None else None
        url = self.config.server + path
        async with (
            self._slots,
            self._session.request(method, url, data=data, params=params, headers=headers) as resp,
        ):
            text = await resp.text(errors="replace")
            parsed: Any = None
            if text.strip().startswith("{"):
                try:
                    parsed = json.loads(text)
                except (json.JSONDecodeError, RecursionError):
                    parsed = None
            if resp.status < 400 and not isinstance(parsed, dict):
                raise KubeApiError(
                    resp.status,
                    "NotJSON",
                    f"{method} {path}: the API server's answer is not a JSON object "
                    f"({resp.content_type or 'no content type'})",
                    None,
                )
            if resp.status >= 400:
                message = parsed.get("message", text) if isinstance(parsed, dict) else text
                reason = parsed.get("reason", resp.reason or "") if isinstance(parsed, dict) else ""
                raise KubeApiError(resp.status, str(reason), str(message)[:2000], parsed)
            return parsed if isinstance(parsed, dict) else {}

    async def get(self, path: str, params: dict[str, str] | None = None) -> JsonObject:
        return await self.request("GET", path, params=params)

    async def create(self, path: str, body: JsonObject) -> JsonObject:
        return await self.request("POST", path, body=body)

    async def replace(self, path: str, body: JsonObject) -> JsonObject:
        """PUT: replace the object; with metadata.resourceVersion set, 409 if it changed."""
        return await self.request("PUT", path, body=body)

    async def merge_patch(self, path: str, body: JsonObject) -> JsonObject:
        return await self.request(
            "PATCH", path, body=body, content_type="application/merge-patch+json"
        )

    async def json_patch(self, path: str, ops: list[JsonObject]) -> JsonObject:
        return await self.request(
            "PATCH", path, body=ops, content_type="application/json-patch+json"
        )

    async def delete(self, path: str) -> JsonObject:
        return await self.request("DELETE", path)
