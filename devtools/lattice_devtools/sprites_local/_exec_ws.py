"""The exec WebSocket: start a command or attach to a session, then relay frames.

`GET /v1/sprites/{name}/exec` with an upgrade starts a command (`cmd` required) or, with
`?id=`, attaches (legacy form); `GET /v1/sprites/{name}/exec/{id}` attaches. Without an
upgrade the same paths list the sessions / describe one session.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time

from aiohttp import WSMsgType, web
from pydantic import ValidationError

from lattice_adapters._duration import parse_duration
from lattice_devtools.sprites_local._common import ApiError, query_bool, sprite_of, state_of
from lattice_devtools.sprites_local._launcher import LauncherError
from lattice_devtools.sprites_local._rest import list_sessions, routes, session_of
from lattice_devtools.sprites_local._session import (
    STDERR,
    Attachment,
    ExecParams,
    Session,
    SpawnError,
    parse_signal,
)
from lattice_devtools.sprites_local._sprite import SpriteRuntime
from lattice_devtools.sprites_local._wire import (
    ENVIRONMENT_VERSION,
    ClientMessage,
    ExitMessage,
    SessionInfoMessage,
)

MAX_MESSAGE = 10 * 1024 * 1024
_log = logging.getLogger("lattice_devtools.sprites_local.exec")


def _is_upgrade(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == "websocket"


@routes.get("/v1/sprites/{name:[^/]+}/exec")
async def exec_endpoint(request: web.Request) -> web.StreamResponse:
    sprite = sprite_of(request)
    if not _is_upgrade(request):
        return list_sessions(sprite)
    legacy_id = request.query.get("id")
    if legacy_id:
        return await _attach(request, sprite, legacy_id)
    return await _exec(request, sprite, _exec_params(request))


@routes.get("/v1/sprites/{name:[^/]+}/exec/{session_id}")
async def session_endpoint(request: web.Request) -> web.StreamResponse:
    sprite = sprite_of(request)
    session_id = request.match_info["session_id"]
    if not _is_upgrade(request):
        return web.json_response(session_of(sprite, session_id).entry().model_dump())
    return await _attach(request, sprite, session_id)


def _exec_params(request: web.Request) -> ExecParams:
    query = request.query
    argv = query.getall("cmd", []) or query.getall("cmd[]", [])
    if not argv:
        raise ApiError(400, "missing cmd (or an id to attach to)")
    tty = query_bool(request, "tty")
    try:
        cols = int(query.get("cols", "80"))
        rows = int(query.get("rows", "24"))
    except ValueError:
        raise ApiError(400, "cols and rows must be integers") from None
    env: dict[str, str] | None = None
    if "env" in query:
        env = {}
        for item in query.getall("env"):
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise ApiError(400, f"invalid env entry {item!r} (want KEY=VALUE)")
            env[key] = value
    raw_limit = query.get("max_run_after_disconnect")
    if raw_limit is None or raw_limit == "":
        limit = 0.0 if tty else 10.0
    else:
        try:
            limit = parse_duration(raw_limit)
        except ValueError:
            raise ApiError(400, f"invalid max_run_after_disconnect {raw_limit!r}") from None
    stdin_raw = query.get("stdin")
    stdin = tty if stdin_raw is None else stdin_raw.lower() == "true"
    texts = [
        *argv,
        *(env or {}),
        *(env or {}).values(),
        query.get("dir", ""),
        query.get("path", ""),
    ]
    if any("\x00" in text for text in texts):
        raise ApiError(400, "NUL bytes are not allowed in cmd, env, dir or path")
    return ExecParams(
        argv=list(argv),
        env=env,
        workdir=query.get("dir") or None,
        path=query.get("path") or None,
        tty=tty,
        cols=max(1, min(cols, 65535)),
        rows=max(1, min(rows, 65535)),
        stdin=stdin,
        max_run_after_disconnect=limit,
    )


def _socket(request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse(
        max_msg_size=MAX_MESSAGE, compress=False, autoping=True, heartbeat=None
    )
    ws.headers["X-Sprite-Capabilities"] = "signal"
    ws.headers["Sprite-Version"] = ENVIRONMENT_VERSION
    return ws


async def _exec(
    request: web.Request, sprite: SpriteRuntime, params: ExecParams
) -> web.StreamResponse:
    if not _socket(request).can_prepare(request).ok:
        raise ApiError(400, "expected a WebSocket upgrade")
    transport = request.transport
    faults = sprite.server.faults
    slow = faults.applies_to(sprite.name)
    if slow and faults.exec_start_delay:
        await asyncio.sleep(faults.exec_start_delay)  # the client may give up meanwhile
    try:
        session, attachment = await sprite.start_session(params, transport)
    except SpawnError as exc:
        return await _failed_start(request, sprite, params, exc)
    except LauncherError as exc:
        if "chdir" in str(exc):
            raise ApiError(400, f"working directory {params.workdir!r} is not usable") from None
        _log.error("%s", exc)
        raise ApiError(500, str(exc)) from None
    ws = _socket(request)
    try:
        if slow and faults.exec_answer_delay:
            await asyncio.sleep(faults.exec_answer_delay)  # the command runs meanwhile
        await ws.prepare(request)
    except BaseException:
        # A client gone before the answer leaves the command running, as a dropped socket
        # does (`max_run_after_disconnect`).
        session.detach(attachment)
        raise
    await _relay(ws, request, session, attachment)
    return ws


async def _failed_start(
    request: web.Request, sprite: SpriteRuntime, params: ExecParams, error: SpawnError
) -> web.WebSocketResponse:
    """A command that cannot start ends like it would in a shell: a message and 127/126."""
    ws = _socket(request)
    await ws.prepare(request)
    info = SessionInfoMessage(
        session_id=state_of(request).next_session_id(),
        command=" ".join(params.argv),
        created=int(time.time()),
        cols=params.cols if params.tty else 0,
        rows=params.rows if params.tty else 0,
        is_owner=True,
        tty=params.tty,
        scrollback_bytes=0,
    )
    await ws.send_str(info.model_dump_json())
    message = f"{error}\r\n" if params.tty else f"{error}\n"
    if params.tty:
        await ws.send_bytes(message.encode())
        await ws.send_str(ExitMessage(exit_code=error.status).model_dump_json())
    else:
        await ws.send_bytes(bytes([STDERR]) + message.encode())
        await ws.send_bytes(bytes([3, error.status]))
    await ws.close()
    return ws


async def _attach(
    request: web.Request, sprite: SpriteRuntime, session_id: str
) -> web.StreamResponse:
    session = sprite.sessions.get(session_id)
    if session is None or session.finished.is_set():
        raise web.HTTPNotFound(text=f"session not found: {session_id}")
    ws = _socket(request)
    await ws.prepare(request)
    if session.finished.is_set():  # it ended while the handshake ran
        await ws.close()
        return ws
    attachment = session.attach(request.transport, fresh=False)
    await _relay(ws, request, session, attachment)
    return ws


async def _relay(
    ws: web.WebSocketResponse, request: web.Request, session: Session, attachment: Attachment
) -> None:
    """Send the attachment's frames while reading the client's, until either side ends."""
    receiver = asyncio.get_running_loop().create_task(_receive(ws, session, attachment))
    sprite_name = request.match_info["name"]
    try:
        while True:
            item = await attachment.get()
            if item is None:
                break
            if item[0] == "out":
                payload = item[2] if session.params.tty else bytes([item[1]]) + item[2]
                await ws.send_bytes(payload)
            elif item[0] == "text":
                await ws.send_str(item[1])
            else:
                await _send_exit(ws, request, session, item[1], sprite_name)
                break
    except (ConnectionError, RuntimeError):
        pass  # the client went away; the session goes on
    finally:
        receiver.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await receiver
        session.detach(attachment)


async def _send_exit(
    ws: web.WebSocketResponse, request: web.Request, session: Session, code: int, sprite: str
) -> None:
    faults = state_of(request).faults
    applies = faults.applies_to(sprite)
    transport = request.transport
    if applies and faults.drop_before_exit:
        if transport is not None:
            transport.abort()
        return
    if session.params.tty:
        await ws.send_str(ExitMessage(exit_code=code).model_dump_json())
    else:
        await ws.send_bytes(bytes([3, code]))
    if applies and faults.close_without_close_frame:
        await _flush(transport)
        if transport is not None:
            transport.abort()
        return
    if applies and faults.close_delay:
        await asyncio.sleep(faults.close_delay)
    await ws.close()


async def _flush(transport: asyncio.BaseTransport | None) -> None:
    """Wait until the transport has written everything (abort would discard it)."""
    if not isinstance(transport, asyncio.WriteTransport):
        return
    for _ in range(200):
        if transport.is_closing() or transport.get_write_buffer_size() == 0:
            return
        await asyncio.sleep(0.005)


async def _receive(ws: web.WebSocketResponse, session: Session, attachment: Attachment) -> None:
    try:
        async for message in ws:
            if message.type == WSMsgType.BINARY:
                data: bytes = message.data
                if session.params.tty:
                    await session.write_stdin(data)
                elif data and data[0] == 0:
                    if session.params.stdin:
                        await session.write_stdin(data[1:])
                elif data and data[0] == 4:
                    session.close_stdin()
            elif message.type == WSMsgType.TEXT:
                _control(session, message.data)
            elif message.type in (WSMsgType.CLOSE, WSMsgType.ERROR):
                break
    finally:
        attachment.close()


def _control(session: Session, text: str) -> None:
    try:
        message = ClientMessage.model_validate(json.loads(text))
    except (ValueError, ValidationError):
        return
    if message.type == "resize" and message.cols and message.rows:
        session.resize(message.cols, message.rows)
    elif message.type == "signal" and message.signal:
        number = parse_signal(message.signal)
        if number is not None:
            session.kill(number)


__all__ = ["exec_endpoint", "session_endpoint"]
