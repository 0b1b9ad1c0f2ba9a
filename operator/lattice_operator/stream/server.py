"""The stream over HTTP: Server-Sent Events at /events, the live page at /.

    GET /events[?namespace=NS]     Authorization: Bearer <a Kubernetes token>
                                   Last-Event-ID: <id> (or ?lastEventId=) to resume

401 without a valid token, 429 (Retry-After) when the client's address has sent too many
tokens the API server had to review, 403 when the caller may `get` none of Intents, Runs and Sprites
(in NS, or cluster-wide); then `text/event-stream`: `id:`, `event:` (the envelope's type) and
`data:` (the envelope as JSON) per event, a comment line as keep-alive. Each event is sent
only if the caller may `get` its object. A subscriber that stops reading is cut off.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from importlib import resources
from typing import Any

from aiohttp import web

from lattice_operator.clock import Clock
from lattice_operator.stream.access import AccessCache, Identity, TooManyReviews
from lattice_operator.stream.envelope import StreamEvent, Subject
from lattice_operator.stream.hub import CUT_OFF, EventHub

log = logging.getLogger(__name__)
RESOURCES = ("intents", "runs", "sprites")
HUB = web.AppKey("hub", EventHub)
ACCESS = web.AppKey("access", AccessCache)
CLOCK = web.AppKey("clock", Clock)
TIMING = web.AppKey("timing", dict)
FRAMES = web.AppKey("frames", dict)
_FRAME_CACHE = 4096
"""Serialised frames kept by event id: each event is encoded once, not once per subscriber."""
_BATCH = 256
"""Events written to a subscriber in one write when it has fallen behind."""
_PAGE_FILES = {
    "": ("index.html", "text/html"),
    "app.js": ("app.js", "text/javascript"),
    "app.css": ("app.css", "text/css"),
}


def build_app(
    hub: EventHub,
    access: AccessCache,
    clock: Clock,
    *,
    keepalive: float = 15.0,
    write_timeout: float = 10.0,
) -> web.Application:
    app = web.Application()
    app[HUB], app[ACCESS], app[CLOCK] = hub, access, clock
    app[TIMING] = {"keepalive": keepalive, "write_timeout": write_timeout}
    app[FRAMES] = {}
    app.add_routes(
        [
            web.get("/events", _events),
            web.get("/healthz", _healthz),
            web.get("/", _page),
            web.get("/static/{name}", _page),
        ]
    )
    return app


async def _healthz(request: web.Request) -> web.Response:
    hub = request.app[HUB]
    return web.json_response(
        {"subscribers": hub.subscribers, "published": hub.published, "cutOff": hub.cut_off}
    )


async def _page(request: web.Request) -> web.Response:
    name = request.match_info.get("name", "")
    if name not in _PAGE_FILES:
        raise web.HTTPNotFound()
    file, content_type = _PAGE_FILES[name]
    body = resources.files("lattice_operator.stream").joinpath("static", file).read_bytes()
    return web.Response(
        body=body,
        content_type=content_type,
        headers={
            "Cache-Control": "no-cache",
            # The page runs only its own script and talks only to this server.
            "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
            "X-Content-Type-Options": "nosniff",
        },
    )


async def _identity(request: web.Request) -> Identity:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise web.HTTPUnauthorized(
            text="a Kubernetes bearer token is required (Authorization: Bearer ...)\n",
            headers={"WWW-Authenticate": 'Bearer realm="lattice"'},
        )
    try:
        who = await request.app[ACCESS].authenticate(token.strip(), request.remote or "")
    except TooManyReviews as err:
        raise web.HTTPTooManyRequests(
            text=f"too many unknown tokens from {err.client}: retry in {err.retry_after} s\n",
            headers={"Retry-After": str(err.retry_after)},
        ) from None
    if who is None:
        raise web.HTTPUnauthorized(
            text="the token was not accepted by the API server\n",
            headers={"WWW-Authenticate": 'Bearer realm="lattice"'},
        )
    return who


async def _events(request: web.Request) -> web.StreamResponse:
    access = request.app[ACCESS]
    who = await _identity(request)
    namespace = request.query.get("namespace", "")
    visible = [
        r
        for r in RESOURCES
        if await access.may_get(who, Subject(namespace=namespace, resource=r, name=""))
    ]
    if not visible:
        where = f"namespace {namespace}" if namespace else "the cluster (try ?namespace=)"
        raise web.HTTPForbidden(
            text=f"{who.user} may not get intents, runs or sprites in {where}\n"
        )
    last = request.headers.get("Last-Event-ID") or request.query.get("lastEventId")
    try:
        last_id = int(last) if last else None
    except ValueError:
        raise web.HTTPBadRequest(text="Last-Event-ID must be an event id (a number)\n") from None

    def allow(event: StreamEvent) -> bool:
        subject = event.subject
        return subject is None or not namespace or subject.namespace == namespace

    hub, clock, timing = request.app[HUB], request.app[CLOCK], request.app[TIMING]
    sub, backlog = hub.subscribe(allow=allow, last_event_id=last_id, now=clock.now())
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        }
    )
    try:
        await response.prepare(request)
        await _write(request, response, b": lattice stream\n\n", timing["write_timeout"])
        await _send(request, response, access, who, backlog, timing)
        while True:
            try:
                first = await asyncio.wait_for(sub.next(), timing["keepalive"])
            except TimeoutError:
                await _write(request, response, b": keep-alive\n\n", timing["write_timeout"])
                continue
            batch = [first]
            while len(batch) < _BATCH and not sub.queue.empty():
                batch.append(sub.queue.get_nowait())
            if any(event_id == CUT_OFF for event_id, _ in batch):
                log.info("stream subscriber %s cut off (not reading)", who.user)
                _abort(request)
                break
            await _send(request, response, access, who, batch, timing)
    except (ConnectionError, _Stalled):
        _abort(request)
    finally:
        sub.close()
    return response


class _Stalled(Exception):
    """A write did not complete in time: the subscriber is not reading."""


async def _send(
    request: web.Request,
    response: web.StreamResponse,
    access: AccessCache,
    who: Identity,
    entries: list[tuple[int, StreamEvent]],
    timing: dict[str, Any],
) -> None:
    """Write the entries the subscriber may see, in one write."""
    frames: dict[int, bytes] = request.app[FRAMES]
    out = []
    for event_id, event in entries:
        if event.subject is not None and not await access.may_get(who, event.subject):
            continue
        frame = frames.get(event_id)
        if frame is None:
            frame = f"id: {event_id}\nevent: {event.type}\ndata: {event.wire()}\n\n".encode()
            if len(frames) >= _FRAME_CACHE:
                del frames[next(iter(frames))]
            frames[event_id] = frame
        out.append(frame)
    if out:
        await _write(request, response, b"".join(out), timing["write_timeout"])


async def _write(
    request: web.Request, response: web.StreamResponse, data: bytes, limit: float
) -> None:
    try:
        async with asyncio.timeout(limit):
            await response.write(data)
    except TimeoutError:
        raise _Stalled from None


def _abort(request: web.Request) -> None:
    transport = request.transport
    if transport is not None:
        with contextlib.suppress(Exception):
            transport.abort()


__all__ = ["build_app"]
