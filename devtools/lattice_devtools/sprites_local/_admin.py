"""Test controls under `/_local` (token-protected like everything else).

GET    /_local/faults                  the fault switches (see `_faults`)
POST   /_local/faults                  merge the given switches into the current ones
DELETE /_local/faults                  all switches off
GET    /_local/sprites/{name}          internal state: status, session pids, service pids
POST   /_local/sprites/{name}/cold     go cold now (sessions lost without exit frames)
POST   /_local/sprites/{name}/drop     drop exec sockets now (?session=ID for one session)
"""

from __future__ import annotations

from aiohttp import web
from pydantic import ValidationError

from lattice_devtools.sprites_local._common import ApiError, sprite_of, state_of
from lattice_devtools.sprites_local._faults import Faults
from lattice_devtools.sprites_local._rest import routes


@routes.get("/_local/faults")
async def get_faults(request: web.Request) -> web.Response:
    return web.json_response(state_of(request).faults.model_dump())


@routes.post("/_local/faults")
async def set_faults(request: web.Request) -> web.Response:
    state = state_of(request)
    try:
        changes = await request.json()
        if not isinstance(changes, dict):
            raise ValueError("a JSON object is required")
        state.faults = Faults.model_validate({**state.faults.model_dump(), **changes})
    except RecursionError:
        raise ApiError(400, "invalid faults: nested too deeply") from None
    except (ValueError, ValidationError) as exc:
        raise ApiError(400, f"invalid faults: {exc}") from None
    return web.json_response(state.faults.model_dump())


@routes.delete("/_local/faults")
async def reset_faults(request: web.Request) -> web.Response:
    state = state_of(request)
    state.faults = Faults()
    return web.json_response(state.faults.model_dump())


@routes.get("/_local/sprites/{name}")
async def describe_sprite(request: web.Request) -> web.Response:
    return web.json_response(sprite_of(request).describe())


@routes.post("/_local/sprites/{name}/cold")
async def go_cold(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    await sprite.go_cold()
    return web.json_response(sprite.describe())


@routes.post("/_local/sprites/{name}/drop")
async def drop_sockets(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    wanted = request.query.get("session")
    if wanted is not None and wanted not in sprite.sessions:
        raise ApiError(404, f"session not found: {wanted}")
    dropped = 0
    for session in list(sprite.sessions.values()):
        if wanted is None or session.id == wanted:
            dropped += session.drop_sockets()
    return web.json_response({"dropped": dropped})


__all__ = ["drop_sockets", "get_faults", "go_cold", "set_faults"]
