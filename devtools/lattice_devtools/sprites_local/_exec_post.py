"""Exec over plain HTTP: `POST /v1/sprites/{name}/exec` (non-TTY, no WebSocket).

The query is the exec socket's (`cmd`, `path`, `dir`, `env`, `stdin`); `tty`, `id`,
`detachable` and `cc` are refused (400). With `stdin=true` the request body (at most
10 MiB, else 413) is the command's stdin, then end-of-file. The answer is 200
`application/octet-stream`, chunked: each frame `[id][payload]` (1 stdout, 2 stderr,
3 exit + status byte) is its own chunk, with no length prefix. The command belongs to the
request: when the client goes away before the exit, it is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal

from aiohttp import web

from lattice_devtools.sprites_local._common import ApiError, sprite_of
from lattice_devtools.sprites_local._exec_ws import _exec_params
from lattice_devtools.sprites_local._launcher import LauncherError
from lattice_devtools.sprites_local._rest import routes
from lattice_devtools.sprites_local._session import SpawnError

MAX_BODY = 10 * 1024 * 1024
REFUSED = ("tty", "id", "detachable", "cc")
GONE_POLL = 0.5
"""Seconds between looks at whether a client that sends nothing went away."""


@routes.post("/v1/sprites/{name:[^/]+}/exec")
async def exec_post(request: web.Request) -> web.StreamResponse:
    sprite = sprite_of(request)
    for name in REFUSED:
        if name in request.query:
            raise ApiError(400, f"{name} is not supported by HTTP exec (use the WebSocket)")
    params = _exec_params(request)
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise ApiError(413, f"stdin is larger than {MAX_BODY} bytes")
    body = await request.content.read(MAX_BODY + 1)
    if len(body) > MAX_BODY:
        raise ApiError(413, f"stdin is larger than {MAX_BODY} bytes")
    params.max_run_after_disconnect = 0.0  # killed below when the client goes away
    try:
        session, attachment = await sprite.start_session(params, request.transport)
    except SpawnError as exc:
        return await _answer_failed_start(request, str(exc), exc.status)
    except LauncherError as exc:
        if "chdir" in str(exc):
            raise ApiError(400, f"working directory {params.workdir!r} is not usable") from None
        raise ApiError(500, str(exc)) from None
    if params.stdin:
        await session.write_stdin(body)
        session.close_stdin()
    response = _response()
    finished = False
    try:
        await response.prepare(request)
        while True:
            try:
                item = await asyncio.wait_for(attachment.get(), GONE_POLL)
            except TimeoutError:
                transport = request.transport
                if transport is None or transport.is_closing():
                    break
                continue
            if item is None:
                break
            if item[0] == "out":
                await response.write(bytes([item[1]]) + item[2])
            elif item[0] == "exit":
                await response.write(bytes([3, item[1]]))
                finished = True
                break
        if finished:
            await response.write_eof()
    except (ConnectionError, RuntimeError):
        pass
    finally:
        session.detach(attachment)
        if not finished and not session.finished.is_set():
            session.kill(signal.SIGKILL)
    return response


def _response() -> web.StreamResponse:
    response = web.StreamResponse(
        status=200,
        headers={"Content-Type": "application/octet-stream", "Cache-Control": "no-cache"},
    )
    response.enable_chunked_encoding()
    return response


async def _answer_failed_start(
    request: web.Request, message: str, status: int
) -> web.StreamResponse:
    """A command that cannot start ends like it would in a shell: a message and 127/126."""
    response = _response()
    await response.prepare(request)
    with contextlib.suppress(ConnectionError):
        await response.write(bytes([2]) + f"{message}\n".encode())
        await response.write(bytes([3, status]))
        await response.write_eof()
    return response


__all__ = ["exec_post"]
