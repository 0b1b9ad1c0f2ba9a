"""Shared pieces of the request handlers: the state key, JSON errors, NDJSON streaming."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from lattice_adapters._duration import parse_duration
from lattice_devtools.sprites_local._sprite import SpriteRuntime
from lattice_devtools.sprites_local._state import ServerState

STATE: web.AppKey[ServerState] = web.AppKey("state", ServerState)
M = TypeVar("M", bound=BaseModel)


class ApiError(Exception):
    """Answer the request with this status and JSON body (raised anywhere in a handler)."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": message, **extra}


def state_of(request: web.Request) -> ServerState:
    return request.app[STATE]


def sprite_of(request: web.Request) -> SpriteRuntime:
    """The sprite named in the path, or a 404."""
    name = request.match_info["name"]
    sprite = state_of(request).sprites.get(name)
    if sprite is None:
        raise ApiError(404, "sprite not found")
    return sprite


async def parse_body(request: web.Request, model: type[M], *, default: bytes = b"{}") -> M:
    """The JSON body as `model`, or a 400 that says what is wrong."""
    raw = await request.read()
    try:
        return model.model_validate_json(raw or default)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "body"
        raise ApiError(400, f"invalid request body: {where}: {first.get('msg')}") from None


def query_duration(request: web.Request, name: str, default: float) -> float:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        return parse_duration(raw)
    except ValueError:
        raise ApiError(400, f"invalid {name} duration {raw!r}") from None


def query_bool(request: web.Request, *names: str) -> bool:
    return any(request.query.get(n, "").lower() in ("true", "1", "yes") for n in names)


async def stream_ndjson(
    request: web.Request, events: AsyncIterator[dict[str, Any]]
) -> web.StreamResponse:
    """A 200 `application/x-ndjson` response, one line per event, flushed as produced."""
    response = web.StreamResponse(
        status=200, headers={"Content-Type": "application/x-ndjson", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    async for event in events:
        await response.write(json.dumps(event).encode() + b"\n")
    await response.write_eof()
    return response


__all__ = [
    "STATE",
    "ApiError",
    "parse_body",
    "query_bool",
    "query_duration",
    "sprite_of",
    "state_of",
    "stream_ndjson",
]
