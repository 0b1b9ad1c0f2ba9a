"""REST handlers: sprites, sessions (list, kill), checkpoints, services, policies."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from lattice_devtools.sprites_local._common import (
    ApiError,
    parse_body,
    query_duration,
    sprite_of,
    state_of,
    stream_ndjson,
)
from lattice_devtools.sprites_local._confined import read_confined_at
from lattice_devtools.sprites_local._session import Session, parse_signal
from lattice_devtools.sprites_local._sprite import SpriteRuntime
from lattice_devtools.sprites_local._state import SpriteExists, decode_token, encode_token
from lattice_devtools.sprites_local._wire import (
    SERVICE_NAME,
    SERVICE_NAME_RULE,
    CheckpointBody,
    CreateSpriteBody,
    NetworkPolicyBody,
    ServiceBody,
    ServiceDefinition,
    ServiceSignalBody,
    UpdateSpriteBody,
    utcnow,
)

routes = web.RouteTableDef()
SPRITE = "/v1/sprites/{name:[^/]+}"


# -- sprites ------------------------------------------------------------------------------
@routes.get("/v1/sprites")
async def list_sprites(request: web.Request) -> web.Response:
    state = state_of(request)
    prefix = request.query.get("prefix", "")
    try:
        limit = int(request.query.get("max_results", "50"))
    except ValueError:
        raise ApiError(400, "max_results must be an integer") from None
    if not 1 <= limit <= 500:
        raise ApiError(400, "max_results must be between 1 and 500")
    names = sorted(n for n in state.sprites if n.startswith(prefix))
    token = request.query.get("continuation_token")
    if token:
        last = decode_token(token)
        if last is None:
            raise ApiError(400, "invalid continuation_token")
        names = [n for n in names if n > last]
    page, has_more = names[:limit], len(names) > limit
    counts = state.counts()
    org = {
        "name": state.config.organization,
        **counts,
        "running_limit": 100,
        "warm_limit": 100,
    }
    return web.json_response(
        {
            "sprites": [state.sprites[n].to_json() for n in page],
            "has_more": has_more,
            "next_continuation_token": encode_token(page[-1]) if has_more else None,
            **org,
            "org": org,
        }
    )


@routes.post("/v1/sprites")
async def create_sprite(request: web.Request) -> web.Response:
    body = await parse_body(request, CreateSpriteBody)
    try:
        sprite = await state_of(request).create(body)
    except SpriteExists:
        raise ApiError(409, f"sprite {body.name!r} already exists") from None
    return web.json_response(sprite.to_json(), status=201)


@routes.get(SPRITE)
async def get_sprite(request: web.Request) -> web.Response:
    return web.json_response(sprite_of(request).to_json())


@routes.put(SPRITE)
async def update_sprite(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    body = await parse_body(request, UpdateSpriteBody)
    record = sprite.record
    if body.url_settings is not None:
        if body.url_settings.auth is not None:
            record.url_settings.auth = body.url_settings.auth
        if body.url_settings.private_access is not None:
            record.url_settings.private_access = body.url_settings.private_access
    if body.clear_labels:
        record.labels = []
    if body.labels is not None:
        record.labels = list(body.labels)
    record.updated_at = utcnow()
    sprite.save()
    return web.json_response(sprite.to_json())


@routes.delete(SPRITE)
async def delete_sprite(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    await state_of(request).delete(sprite.name)
    return web.Response(status=204)


@routes.post(SPRITE + "/upgrade")
async def upgrade_sprite(request: web.Request) -> web.Response:
    sprite_of(request)
    return web.Response(status=204)


# -- sessions -----------------------------------------------------------------------------
def list_sessions(sprite: SpriteRuntime) -> web.Response:
    sessions = sorted(sprite.sessions.values(), key=lambda s: int(s.id))
    entries = [s.entry().model_dump() for s in sessions if not s.finished.is_set()]
    return web.json_response({"count": len(entries), "sessions": entries})


def session_of(sprite: SpriteRuntime, session_id: str) -> Session:
    session = sprite.sessions.get(session_id)
    if session is None or session.finished.is_set():
        raise web.HTTPNotFound(text=f"session not found: {session_id}")
    return session


@routes.post(SPRITE + "/exec/{session_id}/kill")
async def kill_session(request: web.Request) -> web.StreamResponse:
    sprite = sprite_of(request)
    session = session_of(sprite, request.match_info["session_id"])
    name = request.query.get("signal", "SIGTERM")
    number = parse_signal(name)
    if number is None:
        raise ApiError(400, f"unknown signal {name!r}")
    grace = query_duration(request, "timeout", 10.0)
    label = name.upper() if name.upper().startswith("SIG") else f"SIG{name.upper()}"
    return await stream_ndjson(request, _kill_events(session, number, label, grace))


async def _kill_events(
    session: Session, number: int, label: str, grace: float
) -> AsyncIterator[dict[str, Any]]:
    yield {
        "type": "signal",
        "message": f"Signaling {label} to process group {session.pgid}",
        "signal": label,
        "pid": session.pgid,
    }
    session.kill(number)
    if grace <= 0:
        yield {"type": "complete", "exit_code": session.exit_code}
        return
    try:
        await asyncio.wait_for(session.finished.wait(), grace)
        yield {"type": "exited", "message": "Process exited"}
    except TimeoutError:
        yield {"type": "timeout", "message": f"Timeout after {grace:g}s, sending SIGKILL"}
        session.kill(9)
        try:
            await asyncio.wait_for(session.finished.wait(), 5.0)
            yield {"type": "killed", "message": "Process killed"}
        except TimeoutError:
            yield {"type": "error", "message": "Warning: process may not have terminated"}
    yield {"type": "complete", "exit_code": session.exit_code}


# -- checkpoints --------------------------------------------------------------------------
@routes.post(SPRITE + "/checkpoint")
async def create_checkpoint(request: web.Request) -> web.StreamResponse:
    sprite = sprite_of(request)
    body = await parse_body(request, CheckpointBody)
    return await stream_ndjson(request, sprite.checkpoint_events(body.comment))


@routes.get(SPRITE + "/checkpoints")
async def list_checkpoints(request: web.Request) -> web.Response:
    records = sprite_of(request).checkpoints.list()
    return web.json_response([r.model_dump(mode="json") for r in records])


@routes.get(SPRITE + "/checkpoints/{checkpoint_id}")
async def get_checkpoint(request: web.Request) -> web.Response:
    record = sprite_of(request).checkpoints.get(request.match_info["checkpoint_id"])
    if record is None:
        raise ApiError(404, "checkpoint not found")
    return web.json_response(record.model_dump(mode="json"))


@routes.post(SPRITE + "/checkpoints/{checkpoint_id}/restore")
async def restore_checkpoint(request: web.Request) -> web.StreamResponse:
    sprite = sprite_of(request)
    checkpoint_id = request.match_info["checkpoint_id"]
    if sprite.checkpoints.get(checkpoint_id) is None:
        raise ApiError(404, "checkpoint not found")
    return await stream_ndjson(request, sprite.restore_events(checkpoint_id))


@routes.delete(SPRITE + "/checkpoints/{checkpoint_id}")
async def delete_checkpoint(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    checkpoint_id = request.match_info["checkpoint_id"]
    async with sprite.checkpoints.lock:
        if sprite.checkpoints.get(checkpoint_id) is None:
            raise ApiError(404, "checkpoint not found")
        if sprite.checkpoints.current() == checkpoint_id:
            raise ApiError(409, "the checkpoint the sprite is on cannot be deleted")
        await sprite.checkpoints.delete(checkpoint_id)
    return web.Response(status=204)


# -- services -----------------------------------------------------------------------------
def _service_name(name: str) -> str:
    if not SERVICE_NAME.fullmatch(name):
        raise ApiError(400, f"invalid service name {name[:80]!r}: {SERVICE_NAME_RULE}")
    return name


def _definition(sprite: SpriteRuntime, name: str) -> ServiceDefinition:
    definition = sprite.services.get(_service_name(name))
    if definition is None:
        raise ApiError(404, f"service {name!r} not found")
    return definition


@routes.get(SPRITE + "/services")
async def list_services(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    return web.json_response(
        [sprite.services.describe(d.name) for d in sprite.services.definitions()]
    )


@routes.get(SPRITE + "/services/{service}")
async def get_service(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    definition = _definition(sprite, request.match_info["service"])
    return web.json_response(sprite.services.describe(definition.name))


@routes.put(SPRITE + "/services/{service}")
async def put_service(request: web.Request) -> web.StreamResponse:
    sprite = sprite_of(request)
    name = _service_name(request.match_info["service"])
    body = await parse_body(request, ServiceBody)
    owner = sprite.services.http_port_owner(body.http_port, name)
    if owner is not None:
        raise ApiError(409, f"service {owner!r} already has an HTTP port configured")
    await sprite.services.put(ServiceDefinition(name=name, **body.model_dump()))
    await sprite.services.start(name)
    duration = query_duration(request, "duration", 0.0)
    return await stream_ndjson(request, sprite.services.follow(name, duration))


@routes.delete(SPRITE + "/services/{service}")
async def delete_service(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    definition = _definition(sprite, request.match_info["service"])
    await sprite.services.delete(definition.name)
    return web.Response(status=204)


@routes.post(SPRITE + "/services/{service}/start")
async def start_service(request: web.Request) -> web.StreamResponse:
    sprite = sprite_of(request)
    definition = _definition(sprite, request.match_info["service"])
    await sprite.services.start(definition.name)
    duration = query_duration(request, "duration", 0.0)
    return await stream_ndjson(request, sprite.services.follow(definition.name, duration))


@routes.post(SPRITE + "/services/{service}/stop")
async def stop_service(request: web.Request) -> web.StreamResponse:
    sprite = sprite_of(request)
    definition = _definition(sprite, request.match_info["service"])
    grace = query_duration(request, "timeout", 10.0)

    async def events() -> AsyncIterator[dict[str, Any]]:
        yield {"type": "stopping", "timestamp": _ms()}
        code = await sprite.services.stop(definition.name, remember=True, grace=grace)
        yield {"type": "stopped", "exit_code": code, "timestamp": _ms()}
        yield {"type": "complete", "timestamp": _ms()}

    return await stream_ndjson(request, events())


@routes.post(SPRITE + "/services/{service}/restart")
async def restart_service(request: web.Request) -> web.StreamResponse:
    sprite = sprite_of(request)
    definition = _definition(sprite, request.match_info["service"])
    await sprite.services.stop(definition.name, remember=False)
    await sprite.services.start(definition.name)
    duration = query_duration(request, "duration", 0.0)
    return await stream_ndjson(request, sprite.services.follow(definition.name, duration))


@routes.post(SPRITE + "/services/signal")
async def signal_service(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    body = await parse_body(request, ServiceSignalBody)
    _definition(sprite, body.name)
    number = parse_signal(body.signal)
    if number is None:
        raise ApiError(400, f"unknown signal {body.signal!r}")
    if not sprite.services.signal(body.name, number):
        raise ApiError(409, f"service {body.name!r} is not running")
    return web.Response(status=204)


@routes.get(SPRITE + "/services/{service}/logs")
async def service_logs(request: web.Request) -> web.StreamResponse:
    """The last `lines` lines of the service's log, then (for `duration`, 0: not at all) its
    new lines as they are written; stdout events, then complete."""
    sprite = sprite_of(request)
    definition = _definition(sprite, request.match_info["service"])
    try:
        lines = int(request.query.get("lines", "100"))
    except ValueError:
        raise ApiError(400, "lines must be an integer") from None
    follow = query_duration(request, "duration", 0.0)
    log = sprite.dot / "logs" / "services" / f"{definition.name}.log"

    async def events() -> AsyncIterator[dict[str, Any]]:
        size = _log_size(sprite, definition.name)
        start = max(0, size - LOG_TAIL)
        data = read_confined_at(sprite.dot, log, start, size - start)
        offset = start + len(data)
        text = data.decode(errors="replace")
        for line in text.splitlines(keepends=True)[-lines:] if lines > 0 else []:
            yield {"type": "stdout", "data": line, "timestamp": _ms()}
        deadline = time.monotonic() + follow
        pending = b""
        while follow > 0 and time.monotonic() < deadline:
            transport = request.transport
            if transport is None or transport.is_closing():
                return
            chunk = read_confined_at(sprite.dot, log, offset)
            if not chunk:
                await asyncio.sleep(LOG_POLL)
                continue
            offset += len(chunk)
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                yield {
                    "type": "stdout",
                    "data": raw.decode(errors="replace") + "\n",
                    "timestamp": _ms(),
                }
        if pending:
            yield {"type": "stdout", "data": pending.decode(errors="replace"), "timestamp": _ms()}
        yield {"type": "complete", "timestamp": _ms()}

    return await stream_ndjson(request, events())


LOG_POLL = 0.1
"""Seconds between looks at a followed log."""
LOG_TAIL = 16 * 1024 * 1024
"""The most of a log the buffered part reads."""


def _log_size(sprite: SpriteRuntime, name: str) -> int:
    try:
        return (sprite.dot / "logs" / "services" / f"{name}.log").lstat().st_size
    except OSError:
        return 0


def _ms() -> int:
    return int(time.time() * 1000)


# -- policies -----------------------------------------------------------------------------
@routes.get(SPRITE + "/policy/network")
async def get_network_policy(request: web.Request) -> web.Response:
    return web.json_response({"rules": sprite_of(request).policy()})


@routes.post(SPRITE + "/policy/network")
async def set_network_policy(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    body = await parse_body(request, NetworkPolicyBody)
    sprite.set_policy([r.model_dump(exclude_none=True) for r in body.rules])
    return web.Response(status=204)


@routes.get(SPRITE + "/policy/{kind:privileges|resources}")
async def get_opaque_policy(request: web.Request) -> web.Response:
    sprite_of(request)
    return web.json_response({})


@routes.route("*", SPRITE + "/policy/{kind:privileges|resources}")
async def change_opaque_policy(request: web.Request) -> web.Response:
    # Stored nowhere: these policies have no published schema.
    sprite_of(request)
    return web.Response(status=204)


__all__ = ["list_sessions", "routes", "session_of"]
