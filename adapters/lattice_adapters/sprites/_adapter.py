"""`SpritesAdapter`: the `SpriteBackend` port over the official sprites-py SDK.

What comes from the SDK (`sprites.AsyncSpritesClient` and `AsyncSprite`): sprite create /
get / list / update / delete, session listing, file write and rename, checkpoint create /
list / restore, services and network policy.

Gaps in sprites-py 0.7.2 filled here at the HTTP/WebSocket level:

- exec: see `_exec` (no detach, no `max_run_after_disconnect`, no in-band signals, no
  session id before the end, scrollback mixed into stdout in the SDK);
- kill: the async SDK has none, and the sync one sends `signal`/`timeout` in a JSON body the
  server ignores; we send them as query parameters and parse the NDJSON progress;
- read from an offset or at most a limit: the SDK reads whole files; we send `Range: bytes=N-`
  or `bytes=N-M` (206 expected; a 200 is sliced client-side, read no further than the limit;
  416 means nothing new);
- stat: the SDK takes the first entry of a listing, which is a child for a directory;
  lstat (none in the SDK) finds the path's entry in its directory's listing;
- checkpoint and service streams: the SDK returns the NDJSON lines and swallows an
  `{"type":"error"}` line inside a 200; we raise `OperationFailed`, and we read the new
  checkpoint's id out of the `complete` line (listing as a fallback);
- error answers: the SDK keeps neither `Retry-After` nor the structured body on REST calls;
  the shared HTTP client's hook raises our exceptions before the SDK sees the response.

Every public method translates httpx, websockets and SDK exceptions into
`lattice_operator.ports.errors`, and retries per `RetryPolicy` where that is safe.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar, cast
from urllib.parse import quote, urlencode

import httpx
import sprites
from pydantic import ValidationError

from lattice_adapters._duration import format_duration
from lattice_adapters.sprites._credentials import SpritesCredentials
from lattice_adapters.sprites._exec import WsExecSession
from lattice_adapters.sprites._exec_post import PostExecSession, exec_post_params
from lattice_adapters.sprites._http import RedactingLogger, build_http_client
from lattice_adapters.sprites._retry import RetryPolicy, Sleep, call_with_retry
from lattice_adapters.sprites._translate import translate_exception
from lattice_operator.api.v1alpha1.sprite import BackendStatus, NetworkRule, SpriteService, UrlAuth
from lattice_operator.clock import Clock, SystemClock
from lattice_operator.ports.errors import (
    AdapterError,
    InvalidRequest,
    NotFound,
    OperationFailed,
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

T = TypeVar("T")
_CHECKPOINT_ID = re.compile(r"\b(v\d+)\b")
_STATUSES: frozenset[str] = frozenset({"cold", "warm", "running"})
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
        self._retry = retry or RetryPolicy()
        self._timeout = timeout
        self._stream_timeout = stream_timeout
        self._clock = clock or SystemClock()
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._http = build_http_client(credentials, timeout=timeout, transport=transport)
        self._sdk = sprites.AsyncSpritesClient(
            token=self._secret, base_url=credentials.api_url, timeout=timeout
        )
        # The SDK's own client would send client-signals headers and honour proxies; ours
        # is pinned to the API URL and raises our errors (see _http).
        self._sdk_own_http: httpx.AsyncClient = self._sdk._client
        self._sdk._client = self._http
        self._ws_logger = RedactingLogger(_ws_log, self._secret)

    @property
    def api_url(self) -> str:
        """The API base URL this adapter talks to."""
        return self._credentials.api_url

    def __repr__(self) -> str:
        return f"SpritesAdapter(api_url={self.api_url!r})"

    async def aclose(self) -> None:
        await self._http.aclose()
        await self._sdk_own_http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- plumbing -------------------------------------------------------------------------
    async def _call(
        self, what: str, operation: Callable[[], Awaitable[T]], *, idempotent: bool
    ) -> T:
        async def attempt() -> T:
            try:
                return await operation()
            except AdapterError:
                raise
            except Exception as exc:
                raise translate_exception(exc, what=what, secret=self._secret) from None

        return await call_with_retry(
            self._retry,
            attempt,
            idempotent=idempotent,
            clock=self._clock,
            sleep=self._sleep,
            rng=self._rng,
        )

    def _sprite_path(self, name: str, *rest: str) -> str:
        parts = [quote(name, safe="")] + [quote(p, safe="") for p in rest]
        return "/v1/sprites/" + "/".join(parts)

    def _url(self, path: str) -> str:
        return self.api_url + path

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._secret}"}

    # -- sprites --------------------------------------------------------------------------
    async def create_sprite(
        self, name: str, *, url_auth: UrlAuth = "sprite", labels: Sequence[str] = ()
    ) -> SpriteInfo:
        async def op() -> SpriteInfo:
            sprite = await self._sdk.create_sprite(
                name,
                url_settings=sprites.URLSettings(auth=url_auth),
                labels=list(labels) or None,
            )
            return _sprite_from_handle(sprite)

        return await self._call(f"create sprite {name!r}", op, idempotent=False)

    async def get_sprite(self, name: str) -> SpriteInfo:
        async def op() -> SpriteInfo:
            return _sprite_from_handle(await self._sdk.get_sprite(name))

        return await self._call(f"get sprite {name!r}", op, idempotent=True)

    async def list_sprites(
        self,
        *,
        prefix: str | None = None,
        page_size: int = 50,
        continuation_token: str | None = None,
    ) -> SpritePage:
        async def op() -> SpritePage:
            page = await self._sdk.list_sprites(
                sprites.ListOptions(
                    prefix=prefix, max_results=page_size, continuation_token=continuation_token
                )
            )
            return SpritePage(
                sprites=tuple(_sprite_from_info(info) for info in page.sprites),
                has_more=bool(page.has_more and page.next_continuation_token),
                next_token=page.next_continuation_token or None,
                running=page.running,
                warm=page.warm,
                cold=page.cold,
            )

        return await self._call("list sprites", op, idempotent=True)

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

        async def op() -> SpriteInfo:
            sprite = await self._sdk.update_sprite(
                name,
                url_settings=sprites.URLSettings(auth=url_auth) if url_auth else None,
                labels=list(labels) if labels is not None else None,
            )
            return _sprite_from_handle(sprite)

        return await self._call(f"update sprite {name!r}", op, idempotent=True)

    async def delete_sprite(self, name: str) -> None:
        async def op() -> None:
            await self._sdk.destroy_sprite(name)

        await self._call(f"delete sprite {name!r}", op, idempotent=True)

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
        url = self._ws_url(self._sprite_path(name, "exec"), params)

        async def op() -> WsExecSession:
            return await self._open_ws(url, what=what, attached=False, name=name)

        # Not idempotent: retried only when the request never reached the backend.
        return await self._call(what, op, idempotent=False)

    async def attach(self, name: str, session_id: str) -> WsExecSession:
        what = f"attach to session {session_id!r} in {name!r}"
        url = self._ws_url(self._sprite_path(name, "exec", session_id), [("stdin", "true")])

        async def op() -> WsExecSession:
            return await self._open_ws(url, what=what, attached=True, name=name)

        return await self._call(what, op, idempotent=True)

    async def _open_ws(self, url: str, *, what: str, attached: bool, name: str) -> WsExecSession:
        holder: list[WsExecSession] = []

        async def fallback(signal: str) -> None:
            await self.kill_session(name, holder[0].session_id, signal=signal, grace=0)

        session = await WsExecSession.open(
            url,
            self._auth(),
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
        async def op() -> list[SessionInfo]:
            sessions = await self._sdk.sprite(name).list_sessions()
            return [
                SessionInfo(
                    id=str(s.id),
                    command=str(s.command or ""),
                    workdir=str(s.workdir or ""),
                    tty=bool(s.tty),
                    created=s.created,
                    is_active=bool(s.is_active),
                    last_activity=s.last_activity,
                )
                for s in sessions
            ]

        return await self._call(f"list sessions of {name!r}", op, idempotent=True)

    async def kill_session(
        self, name: str, session_id: str, *, signal: str = "SIGTERM", grace: float = 10.0
    ) -> KillResult:
        what = f"kill session {session_id!r} in {name!r}"
        params = {"signal": signal, "timeout": format_duration(grace)}

        async def op() -> KillResult:
            url = self._url(self._sprite_path(name, "exec", session_id, "kill"))
            events: list[KillEvent] = []
            exit_code: int | None = None
            async with self._http.stream(
                "POST",
                url,
                params=params,
                headers=self._auth(),
                timeout=httpx.Timeout(self._timeout, read=grace + self._timeout),
            ) as response:
                async for data in _ndjson(response):
                    kind = str(data.get("type", ""))
                    if kind == "complete" and isinstance(data.get("exit_code"), int):
                        exit_code = data["exit_code"]
                    message = data.get("message") or data.get("error") or ""
                    events.append(KillEvent(type=kind, message=str(message)))
            return KillResult(exit_code=exit_code, events=tuple(events))

        return await self._call(what, op, idempotent=True)

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
            headers = self._auth()
            if limit is not None:
                headers["Range"] = f"bytes={offset}-{offset + limit - 1}"
            elif offset:
                headers["Range"] = f"bytes={offset}-"
            async with self._http.stream(
                "GET",
                self._url(self._sprite_path(name, "fs", "read")),
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

        return await self._call(f"read {path!r} in {name!r}", op, idempotent=True)

    async def write_file(
        self, name: str, path: str, data: bytes, *, mode: int = 0o644, atomic: bool = True
    ) -> None:
        fs = self._sdk.sprite(name).filesystem("/")
        target = fs / path
        what = f"write {path!r} in {name!r}"
        if not atomic:

            async def direct() -> None:
                await target.write_bytes(data, mode=mode, mkdir_parents=True)

            await self._call(what, direct, idempotent=True)
            return
        temp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:12]}"

        async def write_temp() -> None:
            await temp.write_bytes(data, mode=mode, mkdir_parents=True)

        async def rename() -> None:
            await temp.rename(str(target))

        await self._call(what, write_temp, idempotent=True)
        try:
            await self._call(what, rename, idempotent=True)
        except AdapterError:
            try:
                await temp.unlink(missing_ok=True)
            except Exception as exc:  # the rename error is the one that matters
                _log.debug("could not remove %s: %s", temp, type(exc).__name__)
            raise

    async def rename(self, name: str, source: str, dest: str) -> None:
        path = self._sdk.sprite(name).filesystem("/") / source

        async def op() -> None:
            await path.rename(dest)

        await self._call(f"rename {source!r} in {name!r}", op, idempotent=True)

    async def delete_file(self, name: str, path: str) -> None:
        target = self._sdk.sprite(name).filesystem("/") / path

        async def op() -> None:
            await target.unlink(missing_ok=True)

        await self._call(f"delete {path!r} in {name!r}", op, idempotent=True)

    async def stat(self, name: str, path: str) -> FileStat:
        async def op() -> FileStat:
            response = await self._http.get(
                self._url(self._sprite_path(name, "fs", "list")),
                params={"path": path, "workingDir": "/"},
                headers=self._auth(),
            )
            listing = response.json()
            entries = listing.get("entries") or []
            requested = str(listing.get("path") or path).rstrip("/") or "/"
            if len(entries) == 1 and str(entries[0].get("path", "")).rstrip("/") == requested:
                return _file_stat(entries[0])
            # A directory lists its children: describe the directory itself.
            return FileStat(
                path=requested, name=requested.rsplit("/", 1)[-1] or "/", size=0, is_dir=True
            )

        return await self._call(f"stat {path!r} in {name!r}", op, idempotent=True)

    async def lstat(self, name: str, path: str) -> FileStat:
        # The API has no lstat: a directory's listing describes its links as links.
        parent, _, leaf = path.rstrip("/").rpartition("/")
        if not leaf:
            return await self.stat(name, path)
        wanted = f"{parent}/{leaf}"

        async def op() -> FileStat:
            response = await self._http.get(
                self._url(self._sprite_path(name, "fs", "list")),
                params={"path": parent or "/", "workingDir": "/"},
                headers=self._auth(),
            )
            for entry in response.json().get("entries") or []:
                # By path: a file's listing is the file itself, whose name may be `leaf`.
                if str(entry.get("path", "")).rstrip("/") == wanted:
                    return _file_stat(entry)
            raise NotFound(f"{path} not found")

        return await self._call(f"lstat {path!r} in {name!r}", op, idempotent=True)

    # -- checkpoints ----------------------------------------------------------------------
    async def create_checkpoint(self, name: str, comment: str = "") -> CheckpointInfo:
        what = f"checkpoint {name!r}"

        async def op() -> str | None:
            stream = await self._sdk.sprite(name).create_checkpoint(
                comment, timeout=self._stream_timeout
            )
            complete = _finish_stream(list(stream), what=what)
            match = _CHECKPOINT_ID.search(complete)
            return match.group(1) if match else None

        # Not idempotent: a second attempt would create a second checkpoint.
        checkpoint_id = await self._call(what, op, idempotent=False)
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
        async def op() -> list[CheckpointInfo]:
            items = await self._sdk.sprite(name).list_checkpoints()
            checkpoints = [
                CheckpointInfo(
                    id=str(item.id),
                    create_time=item.create_time,
                    comment=item.comment or "",
                    source_id=str(item.history[-1]) if item.history else None,
                )
                for item in items
            ]
            return sorted(
                checkpoints,
                key=lambda c: c.create_time.timestamp() if c.create_time else 0.0,
                reverse=True,
            )

        return await self._call(f"list checkpoints of {name!r}", op, idempotent=True)

    async def restore_checkpoint(self, name: str, checkpoint_id: str) -> None:
        what = f"restore {name!r} to {checkpoint_id!r}"

        async def op() -> None:
            stream = await self._sdk.sprite(name).restore_checkpoint(
                checkpoint_id, timeout=self._stream_timeout
            )
            _finish_stream(list(stream), what=what)

        # Restoring the same checkpoint twice converges on the same files.
        await self._call(what, op, idempotent=True)

    async def delete_checkpoint(self, name: str, checkpoint_id: str) -> None:
        # The CLI deletes checkpoints, but neither the SDKs nor the API reference have a call
        # for it: the REST form of the other checkpoint paths (unverified against the real API).
        async def op() -> None:
            await self._http.delete(
                self._url(self._sprite_path(name, "checkpoints", checkpoint_id)),
                headers=self._auth(),
            )

        await self._call(f"delete checkpoint {checkpoint_id!r} of {name!r}", op, idempotent=True)

    # -- services -------------------------------------------------------------------------
    async def list_services(self, name: str) -> list[ServiceInfo]:
        async def op() -> list[ServiceInfo]:
            return [_service_info(s) for s in await self._sdk.sprite(name).list_services()]

        return await self._call(f"list services of {name!r}", op, idempotent=True)

    async def put_service(self, name: str, service: SpriteService) -> list[ServiceEvent]:
        what = f"put service {service.name!r} in {name!r}"

        async def op() -> list[ServiceEvent]:
            stream = await self._sdk.sprite(name).create_service(
                service.name,
                service.cmd,
                args=list(service.args),
                needs=list(service.needs),
                http_port=service.http_port,
                env=dict(service.env),
                dir=service.dir,
            )
            return _service_events(list(stream), what=what)

        return await self._call(what, op, idempotent=True)

    async def start_service(self, name: str, service_name: str) -> list[ServiceEvent]:
        what = f"start service {service_name!r} in {name!r}"

        async def op() -> list[ServiceEvent]:
            stream = await self._sdk.sprite(name).start_service(service_name)
            return _service_events(list(stream), what=what)

        return await self._call(what, op, idempotent=True)

    async def stop_service(self, name: str, service_name: str) -> list[ServiceEvent]:
        what = f"stop service {service_name!r} in {name!r}"

        async def op() -> list[ServiceEvent]:
            stream = await self._sdk.sprite(name).stop_service(service_name)
            return _service_events(list(stream), what=what)

        return await self._call(what, op, idempotent=True)

    async def delete_service(self, name: str, service_name: str) -> None:
        async def op() -> None:
            await self._sdk.sprite(name).delete_service(service_name)

        await self._call(f"delete service {service_name!r} in {name!r}", op, idempotent=True)

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
        url = self._url(self._sprite_path(name, "exec"))

        async def op() -> PostExecSession:
            return await PostExecSession.open(
                url,
                params,
                self._auth(),
                body=stdin,
                what=what,
                secret=self._secret,
                connect_timeout=self._timeout,
            )

        # Not idempotent: retried only when the request never reached the backend.
        return await self._call(what, op, idempotent=False)

    async def get_service(self, name: str, service_name: str) -> ServiceInfo:
        async def op() -> ServiceInfo:
            return _service_info(await self._sdk.sprite(name).get_service(service_name))

        return await self._call(f"get service {service_name!r} of {name!r}", op, idempotent=True)

    async def service_logs(
        self, name: str, service_name: str, *, lines: int = 0, follow: float = 0.0
    ) -> AsyncIterator[ServiceEvent]:
        what = f"logs of service {service_name!r} in {name!r}"
        params = {"lines": str(lines)}
        if follow > 0:
            params["duration"] = format_duration(follow)
        url = self._url(self._sprite_path(name, "services", service_name, "logs"))
        try:
            async with self._http.stream(
                "GET",
                url,
                params=params,
                headers=self._auth(),
                timeout=httpx.Timeout(self._timeout, read=follow + self._timeout),
            ) as response:
                async for data in _ndjson(response):
                    code = data.get("exit_code")
                    text = data.get("data")
                    yield ServiceEvent(
                        type=str(data.get("type", "")),
                        data=text if isinstance(text, str) else None,
                        exit_code=code if isinstance(code, int) else None,
                    )
        except AdapterError:
            raise
        except Exception as exc:
            raise translate_exception(exc, what=what, secret=self._secret) from None

    # -- network policy -------------------------------------------------------------------
    async def get_network_policy(self, name: str) -> list[NetworkRule]:
        async def op() -> list[NetworkRule]:
            policy = await self._sdk.sprite(name).get_network_policy()
            rules: list[NetworkRule] = []
            for rule in policy.rules:
                try:
                    rules.append(
                        NetworkRule(domain=rule.domain, action=rule.action, include=rule.include)
                    )
                except ValidationError as exc:
                    raise ProtocolError(
                        f"unexpected network rule: {exc.error_count()} errors"
                    ) from None
            return rules

        return await self._call(f"get network policy of {name!r}", op, idempotent=True)

    async def set_network_policy(self, name: str, rules: Sequence[NetworkRule]) -> None:
        policy = sprites.NetworkPolicy(
            rules=[
                sprites.PolicyRule(domain=r.domain, action=r.action, include=r.include)
                for r in rules
            ]
        )

        async def op() -> None:
            await self._sdk.sprite(name).update_network_policy(policy)

        await self._call(f"set network policy of {name!r}", op, idempotent=True)


# -- conversions ----------------------------------------------------------------------------
def _status(value: object) -> BackendStatus:
    if value not in _STATUSES:
        raise ProtocolError(f"unknown sprite status {value!r}")
    return cast(BackendStatus, value)


def _url_auth(settings: Any) -> UrlAuth | None:
    auth = getattr(settings, "auth", None)
    return cast(UrlAuth, auth) if auth in ("sprite", "public") else None


def _sprite_from_info(info: sprites.SpriteInfo) -> SpriteInfo:
    return SpriteInfo(
        id=info.id,
        name=info.name,
        organization=info.organization or "",
        url=info.url,
        url_auth=_url_auth(info.url_settings),
        status=_status(info.status),
        labels=tuple(info.labels or ()),
        created_at=info.created_at,
        updated_at=info.updated_at,
        last_running_at=info.last_running_at,
        last_warming_at=info.last_warming_at,
    )


def _sprite_from_handle(sprite: sprites.AsyncSprite) -> SpriteInfo:
    return SpriteInfo(
        id=sprite.id or "",
        name=sprite.name,
        organization=sprite.organization_name or "",
        url=sprite.url,
        url_auth=_url_auth(sprite.url_settings),
        status=_status(sprite.status),
        labels=tuple(sprite.labels or ()),
        created_at=sprite.created_at,
        updated_at=sprite.updated_at,
        last_running_at=sprite.last_running_at,
        last_warming_at=sprite.last_warming_at,
    )


def _file_stat(entry: Mapping[str, Any]) -> FileStat:
    mod_time: datetime | None = None
    raw_time = entry.get("modTime")
    if isinstance(raw_time, str) and raw_time:
        try:
            mod_time = datetime.fromisoformat(raw_time.replace("Z", "+00:00"))
        except ValueError:
            mod_time = None
    path = str(entry.get("path", ""))
    return FileStat(
        path=path,
        name=str(entry.get("name") or path.rsplit("/", 1)[-1]),
        size=int(entry.get("size") or 0),
        mode=str(entry.get("mode") or "0644"),
        is_dir=bool(entry.get("isDir", False)),
        is_symlink=entry.get("type") == "symlink",
        mod_time=mod_time,
    )


def _finish_stream(messages: list[sprites.StreamMessage], *, what: str) -> str:
    """The text of the `complete` line; an `error` line raises, a missing end too."""
    for message in messages:
        if message.type == "error":
            raise OperationFailed(f"{what}: {message.error or message.data or 'error'}")
    for message in messages:
        if message.type == "complete":
            return str(message.data or "")
    raise ProtocolError(f"{what}: the progress stream ended without a complete line")


def _service_events(events: list[Any], *, what: str) -> list[ServiceEvent]:
    result = [
        ServiceEvent(
            type=str(e.type),
            data=e.data if isinstance(e.data, str) else None,
            exit_code=e.exit_code if isinstance(e.exit_code, int) else None,
        )
        for e in events
    ]
    for event in result:
        if event.type == "error":
            raise OperationFailed(f"{what}: {event.data or 'error'}")
    return result


def _service_info(service: Any) -> ServiceInfo:
    state = service.state
    try:
        spec = SpriteService(
            name=service.name,
            cmd=service.cmd,
            args=list(service.args or []),
            env=dict(service.env or {}),
            dir=service.dir,
            http_port=service.http_port,
            needs=list(service.needs or []),
        )
    except ValidationError as exc:
        raise ProtocolError(f"unexpected service definition: {exc.error_count()} errors") from None
    status = getattr(state, "status", None) or "unknown"
    if status not in ("stopped", "starting", "running", "stopping", "failed"):
        status = "unknown"
    return ServiceInfo(
        spec=spec,
        status=status,
        pid=getattr(state, "pid", None),
        restart_count=int(getattr(state, "restart_count", 0) or 0),
        started_at=getattr(state, "started_at", None),
        error=getattr(state, "error", None) or None,
    )


async def _ndjson(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    async for line in response.aiter_lines():
        line = line.strip()
        if not line:
            continue
        try:
            data = json.loads(line)
        except ValueError:
            raise ProtocolError(f"not NDJSON: {line[:80]!r}") from None
        if isinstance(data, dict):
            yield data


__all__ = ["SpritesAdapter"]
