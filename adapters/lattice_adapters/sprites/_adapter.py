"""`SpritesAdapter`: the `SpriteBackend` port over our own small Sprites client.

Every call is ours, on the wire form the official SDKs and the API reference use (the
contract suite drives the same tests through sprites-py and through this adapter, against the
local server and, with a token, the real API):

- REST calls (sprites, sessions, files, checkpoints, services, network policy) through
  `_client` and one `httpx.AsyncClient` (`_http`: pinned to the API URL, errors raised as
  ours with the body and `Retry-After` kept); answers are parsed into the typed models of
  `_wire`;
- exec and attach over the exec WebSocket (`_exec`), the HTTP exec with aiohttp
  (`_exec_post`);
- kill, ranged reads, lstat, checkpoint delete and service logs: calls the SDK never had.

Why not sprites-py: its public surface covers under half of the port (no detachable exec,
kill, ranged read, lstat, checkpoint delete or service logs), it cannot be given an HTTP
client (so pinning the origin and keeping `Retry-After` meant replacing its private
`_client`), it swallows `{"type":"error"}` lines of 200 streams, and its objects are untyped.
See docs/sprites-backend.md.

Every method goes through `SpritesClient.call` (`_client`), the one wrapper: it translates
httpx, websockets and OS exceptions into `lattice_operator.ports.errors` and retries per
`RetryPolicy` where that is safe; `SpritesClient.request` is the one REST call under it.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
import random
import re
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Self, cast
from urllib.parse import urlencode

import httpx
from pydantic import JsonValue

from lattice_adapters._duration import format_duration
from lattice_adapters.sprites._client import SpritesClient
from lattice_adapters.sprites._credentials import SpritesCredentials
from lattice_adapters.sprites._exec import WsExecSession
from lattice_adapters.sprites._exec_post import PostExecSession, exec_post_params
from lattice_adapters.sprites._http import RedactingLogger
from lattice_adapters.sprites._retry import RetryPolicy, Sleep
from lattice_adapters.sprites._translate import translate_exception
from lattice_adapters.sprites._wire import (
    CheckpointsWire,
    FileListWire,
    PolicyWire,
    ServicesWire,
    ServiceWire,
    SessionListWire,
    SpriteListWire,
    SpriteWire,
    finish_stream,
    parse,
    service_events,
)
from lattice_operator.api.v1alpha1.sprite import NetworkRule, SpriteService, UrlAuth
from lattice_operator.clock import Clock, SystemClock
from lattice_operator.ports.errors import (
    AdapterError,
    InvalidRequest,
    NotFound,
    ProtocolError,
)
from lattice_operator.ports.sprites import (
    CheckpointInfo,
    FileStat,
    KillEvent,
    KillResult,
    ServiceEvent,
    ServiceInfo,
    SessionInfo,
    SpriteInfo,
    SpritePage,
)

_CHECKPOINT_ID = re.compile(r"\b(v\d+)\b")
CREATE_TIMEOUT = 120.0
"""Seconds for a sprite create (the SDKs' value: the backend may wait for capacity)."""
SERVICE_TIMEOUT = 120.0
"""Seconds for a service put, start or stop (the SDKs' value: the answer streams progress)."""
_log = logging.getLogger("lattice_adapters.sprites")
_ws_log = logging.getLogger("lattice_adapters.sprites.websocket")


class SpritesAdapter:
    """The Sprites API (Fly.io or the local server) behind the `SpriteBackend` port."""

    def __init__(
        self,
        credentials: SpritesCredentials,
        *,
        retry: RetryPolicy | None = None,
        timeout: float = 30.0,
        stream_timeout: float = 300.0,
        clock: Clock | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._credentials = credentials
        self._secret = credentials.token.get_secret_value()
        self._timeout = timeout
        self._stream_timeout = stream_timeout
        self._api = SpritesClient(
            credentials,
            retry=retry or RetryPolicy(),
            timeout=timeout,
            clock=clock or SystemClock(),
            sleep=sleep,
            rng=rng or random.Random(),
            transport=transport,
        )
        self._ws_logger = RedactingLogger(_ws_log, self._secret)

    @property
    def api_url(self) -> str:
        """The API base URL this adapter talks to."""
        return self._credentials.api_url

    def __repr__(self) -> str:
        return f"SpritesAdapter(api_url={self.api_url!r})"

    async def aclose(self) -> None:
        await self._api.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- sprites --------------------------------------------------------------------------
    async def create_sprite(
        self, name: str, *, url_auth: UrlAuth = "sprite", labels: Sequence[str] = ()
    ) -> SpriteInfo:
        body: dict[str, JsonValue] = {"name": name, "url_settings": {"auth": url_auth}}
        if labels:
            body["labels"] = list(labels)
        what = f"create sprite {name!r}"
        response = await self._api.request(
            "POST",
            "/v1/sprites",
            what=what,
            idempotent=False,
            json=body,
            http_timeout=CREATE_TIMEOUT,
        )
        return parse(SpriteWire, response.content, what=what).info()

    async def get_sprite(self, name: str) -> SpriteInfo:
        what = f"get sprite {name!r}"
        return (await self._api.get(SpriteWire, self._api.sprite_path(name), what=what)).info()

    async def list_sprites(
        self,
        *,
        prefix: str | None = None,
        page_size: int = 50,
        continuation_token: str | None = None,
    ) -> SpritePage:
        params = {"max_results": str(page_size)} if page_size else {}
        if continuation_token:
            params["continuation_token"] = continuation_token
        if prefix:
            params["prefix"] = prefix
        page = await self._api.get(
            SpriteListWire, "/v1/sprites", what="list sprites", params=params
        )
        return SpritePage(
            sprites=tuple(sprite.info() for sprite in page.sprites),
            has_more=bool(page.has_more and page.next_continuation_token),
            next_token=page.next_continuation_token or None,
            running=page.running,
            warm=page.warm,
            cold=page.cold,
        )

    async def iter_sprites(self, *, prefix: str | None = None) -> AsyncIterator[SpriteInfo]:
        token: str | None = None
        while True:
            page = await self.list_sprites(prefix=prefix, page_size=100, continuation_token=token)
            for sprite in page.sprites:
                yield sprite
            if not page.has_more:
                return
            token = page.next_token

    async def update_sprite(
        self,
        name: str,
        *,
        url_auth: UrlAuth | None = None,
        labels: Sequence[str] | None = None,
    ) -> SpriteInfo:
        if url_auth is None and labels is None:
            return await self.get_sprite(name)
        body: dict[str, JsonValue] = {}
        if url_auth:
            body["url_settings"] = {"auth": url_auth}
        if labels is not None:
            body["labels"] = list(labels)
        what = f"update sprite {name!r}"
        response = await self._api.request(
            "PUT", self._api.sprite_path(name), what=what, idempotent=True, json=body
        )
        return parse(SpriteWire, response.content, what=what).info()

    async def delete_sprite(self, name: str) -> None:
        await self._api.request(
            "DELETE", self._api.sprite_path(name), what=f"delete sprite {name!r}", idempotent=True
        )

    # -- exec -----------------------------------------------------------------------------
    async def exec(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
        tty: bool = False,
        cols: int = 80,
        rows: int = 24,
        stdin: bool = True,
        max_run_after_disconnect: float | None = None,
    ) -> WsExecSession:
        if not argv:
            raise InvalidRequest("exec needs a command")
        params: list[tuple[str, str]] = [("cmd", arg) for arg in argv]
        params.append(("path", argv[0]))
        for key, value in (env or {}).items():
            params.append(("env", f"{key}={value}"))
        if workdir:
            params.append(("dir", workdir))
        if tty:
            params += [("tty", "true"), ("cols", str(cols)), ("rows", str(rows))]
        params.append(("stdin", "true" if stdin else "false"))
        if max_run_after_disconnect is not None:
            params.append(("max_run_after_disconnect", format_duration(max_run_after_disconnect)))
        what = f"exec in {name!r}"
        url = self._ws_url(self._api.sprite_path(name, "exec"), params)

        async def op() -> WsExecSession:
            return await self._open_ws(url, what=what, attached=False, name=name)

        # Not idempotent: retried only when the request never reached the backend.
        return await self._api.call(what, op, idempotent=False)

    async def attach(self, name: str, session_id: str) -> WsExecSession:
        what = f"attach to session {session_id!r} in {name!r}"
        url = self._ws_url(self._api.sprite_path(name, "exec", session_id), [("stdin", "true")])

        async def op() -> WsExecSession:
            return await self._open_ws(url, what=what, attached=True, name=name)

        return await self._api.call(what, op, idempotent=True)

    async def _open_ws(self, url: str, *, what: str, attached: bool, name: str) -> WsExecSession:
        holder: list[WsExecSession] = []

        async def fallback(signal: str) -> None:
            await self.kill_session(name, holder[0].session_id, signal=signal, grace=0)

        session = await WsExecSession.open(
            url,
            self._api.auth(),
            attached=attached,
            what=what,
            secret=self._secret,
            logger=cast(logging.Logger, self._ws_logger),
            open_timeout=self._timeout,
            signal_fallback=fallback,
        )
        holder.append(session)
        return session

    def _ws_url(self, path: str, params: list[tuple[str, str]]) -> str:
        base = self.api_url
        scheme = "wss" if base.startswith("https") else "ws"
        return f"{scheme}{base[base.index(':') :]}{path}?{urlencode(params)}"

    async def list_sessions(self, name: str) -> list[SessionInfo]:
        listing = await self._api.get(
            SessionListWire,
            self._api.sprite_path(name, "exec"),
            what=f"list sessions of {name!r}",
        )
        return [session.info() for session in listing.sessions]

    async def kill_session(
        self, name: str, session_id: str, *, signal: str = "SIGTERM", grace: float = 10.0
    ) -> KillResult:
        what = f"kill session {session_id!r} in {name!r}"
        # Query parameters: the server ignores a JSON body (which the sync SDK sends).
        params = {"signal": signal, "timeout": format_duration(grace)}

        async def op() -> KillResult:
            url = self._api.url(self._api.sprite_path(name, "exec", session_id, "kill"))
            events: list[KillEvent] = []
            exit_code: int | None = None
            async with self._api.http.stream(
                "POST",
                url,
                params=params,
                headers=self._api.auth(),
                timeout=httpx.Timeout(self._timeout, read=grace + self._timeout),
            ) as response:
                async for line in self._api.lines(response):
                    if line.type == "complete" and isinstance(line.exit_code, int):
                        exit_code = line.exit_code
                    message = line.message or line.error or ""
                    events.append(KillEvent(type=line.type, message=str(message)))
            return KillResult(exit_code=exit_code, events=tuple(events))

        return await self._api.call(what, op, idempotent=True)

    # -- files ----------------------------------------------------------------------------
    async def read_file(
        self, name: str, path: str, *, offset: int = 0, limit: int | None = None
    ) -> bytes:
        if offset < 0:
            raise InvalidRequest("offset must not be negative")
        if limit is not None and limit < 0:
            raise InvalidRequest("limit must not be negative")
        if limit == 0:
            return b""

        async def op() -> bytes:
            headers = self._api.auth()
            if limit is not None:
                headers["Range"] = f"bytes={offset}-{offset + limit - 1}"
            elif offset:
                headers["Range"] = f"bytes={offset}-"
            async with self._api.http.stream(
                "GET",
                self._api.url(self._api.sprite_path(name, "fs", "read")),
                params={"path": path, "workingDir": "/"},
                headers=headers,
            ) as response:
                if response.status_code == 416:
                    return b""
                # A server that ignored the Range sends the whole file: skip to the offset
                # here and stop reading at the limit (the rest is never received).
                skip = 0 if response.status_code == 206 else offset
                end = None if limit is None else skip + limit
                data = bytearray()
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if end is not None and len(data) >= end:
                        break
                return bytes(data[skip:end])

        return await self._api.call(f"read {path!r} in {name!r}", op, idempotent=True)

    async def write_file(
        self, name: str, path: str, data: bytes, *, mode: int = 0o644, atomic: bool = True
    ) -> None:
        target = _absolute(path)
        what = f"write {path!r} in {name!r}"
        if not atomic:
            await self._write(name, target, data, mode=mode, what=what)
            return
        parent, leaf = posixpath.split(target)
        temp = posixpath.join(parent, f".{leaf}.tmp-{uuid.uuid4().hex[:12]}")
        await self._write(name, temp, data, mode=mode, what=what)
        try:
            await self._rename(name, temp, target, what=what)
        except AdapterError:
            try:
                await self._delete(name, temp, what=f"delete {temp!r} in {name!r}")
            except AdapterError as exc:  # the rename error is the one that matters
                _log.debug("could not remove %s: %s", temp, type(exc).__name__)
            raise

    async def _write(self, name: str, path: str, data: bytes, *, mode: int, what: str) -> None:
        await self._api.request(
            "PUT",
            self._api.sprite_path(name, "fs", "write"),
            what=what,
            idempotent=True,
            params={"path": path, "workingDir": "/", "mode": f"{mode:04o}", "mkdirParents": "true"},
            content=data,
            headers={"Content-Type": "application/octet-stream"},
        )

    async def _rename(self, name: str, source: str, dest: str, *, what: str) -> None:
        body: dict[str, JsonValue] = {"source": source, "dest": dest, "workingDir": "/"}
        await self._api.request(
            "POST",
            self._api.sprite_path(name, "fs", "rename"),
            what=what,
            idempotent=True,
            json=body,
        )

    async def _delete(self, name: str, path: str, *, what: str) -> None:
        await self._api.request(
            "DELETE",
            self._api.sprite_path(name, "fs", "delete"),
            what=what,
            idempotent=True,
            params={"path": path, "workingDir": "/", "recursive": "false"},
        )

    async def rename(self, name: str, source: str, dest: str) -> None:
        what = f"rename {source!r} in {name!r}"
        source = _absolute(source)
        # A relative destination names a sibling of the source (as in the SDKs).
        if not dest.startswith("/"):
            dest = posixpath.join(posixpath.dirname(source), dest)
        await self._rename(name, source, dest, what=what)

    async def delete_file(self, name: str, path: str) -> None:
        await self._delete(name, _absolute(path), what=f"delete {path!r} in {name!r}")

    async def stat(self, name: str, path: str) -> FileStat:
        listing = await self._api.get(
            FileListWire,
            self._api.sprite_path(name, "fs", "list"),
            what=f"stat {path!r} in {name!r}",
            params={"path": path, "workingDir": "/"},
        )
        entries = listing.entries or []
        requested = (listing.path or path).rstrip("/") or "/"
        if len(entries) == 1 and entries[0].path.rstrip("/") == requested:
            return entries[0].stat()
        # A directory lists its children: describe the directory itself.
        return FileStat(
            path=requested, name=requested.rsplit("/", 1)[-1] or "/", size=0, is_dir=True
        )

    async def lstat(self, name: str, path: str) -> FileStat:
        # The API has no lstat: a directory's listing describes its links as links.
        parent, _, leaf = path.rstrip("/").rpartition("/")
        if not leaf:
            return await self.stat(name, path)
        wanted = f"{parent}/{leaf}"
        listing = await self._api.get(
            FileListWire,
            self._api.sprite_path(name, "fs", "list"),
            what=f"lstat {path!r} in {name!r}",
            params={"path": parent or "/", "workingDir": "/"},
        )
        for entry in listing.entries or []:
            # By path: a file's listing is the file itself, whose name may be `leaf`.
            if entry.path.rstrip("/") == wanted:
                return entry.stat()
        raise NotFound(f"{path} not found")

    # -- checkpoints ----------------------------------------------------------------------
    async def create_checkpoint(self, name: str, comment: str = "") -> CheckpointInfo:
        what = f"checkpoint {name!r}"
        body: dict[str, JsonValue] = {"comment": comment} if comment else {}
        # Not idempotent: a second attempt would create a second checkpoint.
        lines = await self._api.progress(
            "POST",
            self._api.sprite_path(name, "checkpoint"),
            what=what,
            idempotent=False,
            http_timeout=self._stream_timeout,
            json=body,
        )
        match = _CHECKPOINT_ID.search(finish_stream(lines, what=what))
        checkpoint_id = match.group(1) if match else None
        checkpoints = await self.list_checkpoints(name)
        if checkpoint_id is None:
            if not checkpoints:
                raise ProtocolError(f"{what}: no checkpoint id in the stream and none listed")
            return checkpoints[0]
        for checkpoint in checkpoints:
            if checkpoint.id == checkpoint_id:
                return checkpoint
        return CheckpointInfo(id=checkpoint_id, comment=comment)

    async def list_checkpoints(self, name: str) -> list[CheckpointInfo]:
        what = f"list checkpoints of {name!r}"
        response = await self._api.request(
            "GET", self._api.sprite_path(name, "checkpoints"), what=what, idempotent=True
        )
        items = self._api.validate(CheckpointsWire.validate_json, response.content, what=what)
        checkpoints = [item.info() for item in items]
        return sorted(
            checkpoints,
            key=lambda c: c.create_time.timestamp() if c.create_time else 0.0,
            reverse=True,
        )

    async def restore_checkpoint(self, name: str, checkpoint_id: str) -> None:
        what = f"restore {name!r} to {checkpoint_id!r}"
        # Restoring the same checkpoint twice converges on the same files.
        lines = await self._api.progress(
            "POST",
            self._api.sprite_path(name, "checkpoints", checkpoint_id, "restore"),
            what=what,
            idempotent=True,
            http_timeout=self._stream_timeout,
        )
        finish_stream(lines, what=what)

    async def delete_checkpoint(self, name: str, checkpoint_id: str) -> None:
        # The CLI deletes checkpoints, but neither the SDKs nor the API reference have a call
        # for it: the REST form of the other checkpoint paths (unverified against the real API).
        await self._api.request(
            "DELETE",
            self._api.sprite_path(name, "checkpoints", checkpoint_id),
            what=f"delete checkpoint {checkpoint_id!r} of {name!r}",
            idempotent=True,
        )

    # -- services -------------------------------------------------------------------------
    async def list_services(self, name: str) -> list[ServiceInfo]:
        what = f"list services of {name!r}"
        response = await self._api.request(
            "GET", self._api.sprite_path(name, "services"), what=what, idempotent=True
        )
        listing = self._api.validate(ServicesWire.validate_json, response.content, what=what)
        services = listing if isinstance(listing, list) else listing.services
        return [service.info() for service in services]

    async def put_service(self, name: str, service: SpriteService) -> list[ServiceEvent]:
        what = f"put service {service.name!r} in {name!r}"
        body: dict[str, JsonValue] = {"cmd": service.cmd}
        if service.args:
            body["args"] = list(service.args)
        if service.needs:
            body["needs"] = list(service.needs)
        if service.http_port is not None:
            body["http_port"] = service.http_port
        body["env"] = dict(service.env)
        if service.dir is not None:
            body["dir"] = service.dir
        lines = await self._api.progress(
            "PUT",
            self._api.sprite_path(name, "services", service.name),
            what=what,
            idempotent=True,
            http_timeout=SERVICE_TIMEOUT,
            json=body,
        )
        return service_events(lines, what=what)

    async def start_service(self, name: str, service_name: str) -> list[ServiceEvent]:
        return await self._service_action(name, service_name, "start")

    async def stop_service(self, name: str, service_name: str) -> list[ServiceEvent]:
        return await self._service_action(name, service_name, "stop")

    async def _service_action(
        self, name: str, service_name: str, action: str
    ) -> list[ServiceEvent]:
        what = f"{action} service {service_name!r} in {name!r}"
        lines = await self._api.progress(
            "POST",
            self._api.sprite_path(name, "services", service_name, action),
            what=what,
            idempotent=True,
            http_timeout=SERVICE_TIMEOUT,
        )
        return service_events(lines, what=what)

    async def delete_service(self, name: str, service_name: str) -> None:
        await self._api.request(
            "DELETE",
            self._api.sprite_path(name, "services", service_name),
            what=f"delete service {service_name!r} in {name!r}",
            idempotent=True,
        )

    # -- run modes: HTTP exec and a service's log -------------------------------------------
    async def exec_post(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
        stdin: bytes | None = None,
    ) -> PostExecSession:
        what = f"HTTP exec in {name!r}"
        params = exec_post_params(argv, env, workdir, stdin is not None)
        url = self._api.url(self._api.sprite_path(name, "exec"))

        async def op() -> PostExecSession:
            return await PostExecSession.open(
                url,
                params,
                self._api.auth(),
                body=stdin,
                what=what,
                secret=self._secret,
                connect_timeout=self._timeout,
            )

        # Not idempotent: retried only when the request never reached the backend.
        return await self._api.call(what, op, idempotent=False)

    async def get_service(self, name: str, service_name: str) -> ServiceInfo:
        service = await self._api.get(
            ServiceWire,
            self._api.sprite_path(name, "services", service_name),
            what=f"get service {service_name!r} of {name!r}",
        )
        return service.info()

    async def service_logs(
        self, name: str, service_name: str, *, lines: int = 0, follow: float = 0.0
    ) -> AsyncIterator[ServiceEvent]:
        what = f"logs of service {service_name!r} in {name!r}"
        params = {"lines": str(lines)}
        if follow > 0:
            params["duration"] = format_duration(follow)
        url = self._api.url(self._api.sprite_path(name, "services", service_name, "logs"))
        # Not through `_call`: a generator cannot be retried once it has yielded.
        try:
            async with self._api.http.stream(
                "GET",
                url,
                params=params,
                headers=self._api.auth(),
                timeout=httpx.Timeout(self._timeout, read=follow + self._timeout),
            ) as response:
                async for line in self._api.lines(response):
                    yield line.event()
        except AdapterError:
            raise
        except Exception as exc:
            raise translate_exception(exc, what=what, secret=self._secret) from None

    # -- network policy -------------------------------------------------------------------
    async def get_network_policy(self, name: str) -> list[NetworkRule]:
        policy = await self._api.get(
            PolicyWire,
            self._api.sprite_path(name, "policy", "network"),
            what=f"get network policy of {name!r}",
        )
        return policy.network_rules()

    async def set_network_policy(self, name: str, rules: Sequence[NetworkRule]) -> None:
        body: dict[str, JsonValue] = {
            "rules": [rule.model_dump(mode="json", exclude_none=True) for rule in rules]
        }
        await self._api.request(
            "POST",
            self._api.sprite_path(name, "policy", "network"),
            what=f"set network policy of {name!r}",
            idempotent=True,
            json=body,
        )


def _absolute(path: str) -> str:
    """A path inside the sprite as the SDKs send it: relative to `/`, normalised."""
    return posixpath.normpath(path if path.startswith("/") else "/" + (path or "."))


__all__ = ["SpritesAdapter"]
