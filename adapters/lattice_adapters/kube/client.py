"""Async REST calls to the Kubernetes API server."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any
from urllib.parse import quote

import aiohttp

from lattice_adapters.kube.api_errors import (
    Invalid,
    KubeApiError,
    PatchTestFailed,
    api_error,
    failed_tests,
)
from lattice_adapters.kube.config import KubeConfig
from lattice_adapters.kube.exec_plugin import Credentials

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
        self._entered = False
        self._key_pair: tuple[bytes, bytes] | None = None
        self._retired: list[aiohttp.ClientSession] = []
        self._timers: list[asyncio.TimerHandle] = []

    async def __aenter__(self) -> KubeClient:
        # The session is made by the first request, with the credentials it sends: an exec
        # plugin runs when a request needs it, not before.
        self._entered = True
        return self

    def _new_session(self, credentials: Credentials) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            ssl=self.config.ssl_context(credentials), limit=self._connections
        )
        # trust_env=False: API traffic goes through the kubeconfig's proxy-url only, never
        # through environment proxies.
        # No base_url: it would drop a path prefix of the server (API proxies serve under one).
        # sock_connect, not connect: aiohttp's `connect` also counts the wait for a free pooled
        # connection, so a burst of requests queued behind the pool failed after 10 s as if
        # the API server were unreachable (hundreds of Intents at once did).
        return aiohttp.ClientSession(
            connector=connector,
            trust_env=False,
            proxy=self.config.proxy_url,
            timeout=aiohttp.ClientTimeout(
                total=self._total_timeout, sock_connect=self._connect_timeout
            ),
            headers={"User-Agent": self._user_agent, "Accept": "application/json"},
        )

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for timer in self._timers:
            timer.cancel()
        sessions = [s for s in (self._session, *self._retired) if s is not None]
        self._session, self._retired, self._timers = None, [], []
        self._entered = False
        for session in sessions:
            await session.close()

    async def _credentials(self, stale: Credentials | None = None) -> Credentials:
        """The current credentials; with `stale` (refused by a 401), the plugin's next ones."""
        plugin = self.config.exec_plugin
        if plugin is None:
            return self.config.credentials()
        if stale is None and (cached := plugin.fresh()) is not None:
            return cached
        # A plugin may take seconds (a cloud CLI); the loop serves other requests meanwhile.
        if stale is not None:
            refreshed = await asyncio.to_thread(self.config.refresh, stale)
            return refreshed if refreshed is not None else stale
        return await asyncio.to_thread(self.config.credentials)

    def _session_for(self, credentials: Credentials) -> aiohttp.ClientSession:
        """The session whose TLS carries `credentials`' client certificate: a plugin that
        hands out a new certificate gets a new connector (the old one's connections keep
        the old certificate); the old session is closed once its requests had their time."""
        if not self._entered:
            raise RuntimeError("KubeClient used outside its context")
        if self._session is None:
            self._session = self._new_session(credentials)
            self._key_pair = credentials.key_pair
        elif credentials.key_pair != self._key_pair:
            old = self._session
            self._session = self._new_session(credentials)
            self._key_pair = credentials.key_pair
            self._retired.append(old)
            self._timers.append(
                asyncio.get_running_loop().call_later(
                    self._total_timeout + 1, lambda: asyncio.ensure_future(self._retire(old))
                )
            )
        return self._session

    async def _retire(self, session: aiohttp.ClientSession) -> None:
        if session in self._retired:
            self._retired.remove(session)
            await session.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: JsonObject | list[Any] | None = None,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> JsonObject:
        if not self._entered:
            raise RuntimeError("KubeClient used outside its context")
        data = json.dumps(body) if body is not None else None
        url = self.config.server + path
        credentials = await self._credentials()
        async with self._slots:
            status, reason, text, kind = await self._send(
                method, url, credentials, data, params, content_type
            )
            if status == 401 and self.config.exec_plugin is not None:
                # Credentials revoked or expired early: the plugin runs once more and the
                # request is sent once more (kubectl only refreshes for the next request).
                credentials = await self._credentials(stale=credentials)
                status, reason, text, kind = await self._send(
                    method, url, credentials, data, params, content_type
                )
        parsed: Any = None
        if text.strip().startswith("{"):
            try:
                parsed = json.loads(text)
            except (json.JSONDecodeError, RecursionError):
                parsed = None
        if status < 400 and not isinstance(parsed, dict):
            raise KubeApiError(
                status,
                "NotJSON",
                f"{method} {path}: the API server's answer is not a JSON object "
                f"({kind or 'no content type'})",
                None,
            )
        if status >= 400:
            # Typed by the Status (NotFound, Conflict, Invalid...); a body that is no Status
            # (a proxy's page) still gets the type of its code, with its text as the message.
            status_body = parsed if isinstance(parsed, dict) else None
            raise api_error(status, status_body, reason=reason, message=text)
        return parsed if isinstance(parsed, dict) else {}

    async def _send(
        self,
        method: str,
        url: str,
        credentials: Credentials,
        data: str | None,
        params: dict[str, str] | None,
        content_type: str,
    ) -> tuple[int, str, str, str]:
        headers = {"Content-Type": content_type}
        if credentials.token:
            headers["Authorization"] = f"Bearer {credentials.token}"
        session = self._session_for(credentials)
        async with session.request(
            method,
            url,
            data=data,
            params=params,
            headers=headers,
            server_hostname=self.config.tls_server_name,
        ) as resp:
            text = await resp.text(errors="replace")
            return resp.status, resp.reason or "", text, resp.content_type

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
        """PATCH with a JSON patch; its `test` operations are preconditions: PatchTestFailed
        if one does not hold (nothing is written then)."""
        try:
            return await self.request(
                "PATCH", path, body=ops, content_type="application/json-patch+json"
            )
        except Invalid as exc:
            if exc.causes or not any(op.get("op") == "test" for op in ops):
                raise
            # The answer does not say which operation failed (see PatchTestFailed): the
            # object as stored now does.
            failed = failed_tests(ops, await self.get(path))
            if not failed:
                raise
            raise PatchTestFailed(exc.status, exc.reason, exc.message, exc.body, failed) from exc

    async def delete(self, path: str) -> JsonObject:
        return await self.request("DELETE", path)
