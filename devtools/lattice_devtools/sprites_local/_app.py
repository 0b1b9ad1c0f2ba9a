"""The aiohttp application and the serve loop."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import re
import signal
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from lattice_devtools.sprites_local import _admin, _exec_post, _exec_ws, _files  # noqa: F401
from lattice_devtools.sprites_local._cgroups import CgroupError
from lattice_devtools.sprites_local._common import STATE, ApiError, state_of
from lattice_devtools.sprites_local._config import LocalSpritesConfig
from lattice_devtools.sprites_local._container import ContainerError
from lattice_devtools.sprites_local._launcher import LauncherError, NamespaceLauncher
from lattice_devtools.sprites_local._netns import NetnsError
from lattice_devtools.sprites_local._rest import routes
from lattice_devtools.sprites_local._state import ServerState
from lattice_devtools.sprites_local._wire import ENVIRONMENT_VERSION

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_FORWARDED = re.compile(r"^/v1/sprites/([^/]+)/.+")
_log = logging.getLogger("lattice_devtools.sprites_local")


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as error:
        return web.json_response(error.body, status=error.status)


def _auth(token: str) -> Middleware:
    expected = f"Bearer {token}".encode()

    @web.middleware
    async def auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        # Header bytes that are not UTF-8 arrive as surrogates: never a match, never a 500.
        given = request.headers.get("Authorization", "").encode(errors="surrogateescape")
        if not hmac.compare_digest(given, expected):
            return web.json_response({"error": "unauthorized"}, status=401)
        return await handler(request)

    return auth


@web.middleware
async def _rate_limit(request: web.Request, handler: Handler) -> web.StreamResponse:
    fault = state_of(request).faults.rate_limit
    if (
        fault is not None
        and not request.path.startswith("/_local")
        and fault.matches(request.method, request.path)
    ):
        fault.remaining -= 1
        creating = request.method == "POST" and request.path == "/v1/sprites"
        body = {
            "error": "sprite_creation_rate_limited" if creating else "rate_limited",
            "message": f"Rate limit exceeded; retry in {fault.retry_after} seconds",
            "retry_after_seconds": fault.retry_after,
        }
        return web.json_response(body, status=429, headers={"Retry-After": str(fault.retry_after)})
    return await handler(request)


@web.middleware
async def _activity(request: web.Request, handler: Handler) -> web.StreamResponse:
    # Calls forwarded to a sprite wake it and keep it running while they are served.
    match = _FORWARDED.match(request.path)
    sprite = state_of(request).sprites.get(match.group(1)) if match else None
    if sprite is None:
        return await handler(request)
    sprite.inflight += 1
    try:
        await sprite.wake()
        return await handler(request)
    finally:
        sprite.inflight -= 1
        sprite.touch()


async def _version_header(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.setdefault("Sprite-Version", ENVIRONMENT_VERSION)


def build_app(state: ServerState) -> web.Application:
    """The Sprites-compatible application for `state`."""
    app = web.Application(
        middlewares=[
            _errors,
            _auth(state.config.token.get_secret_value()),
            _rate_limit,
            _activity,
        ],
        client_max_size=32 * 1024 * 1024,
    )
    app[STATE] = state
    app.add_routes(routes)
    app.on_response_prepare.append(_version_header)
    return app


async def serve(config: LocalSpritesConfig, *, stop: asyncio.Event | None = None) -> None:
    """Run the server until `stop` is set (or SIGTERM/SIGINT when `stop` is None)."""
    launcher = NamespaceLauncher()
    launcher.prepare_host()
    state = ServerState(config, launcher)
    if config.isolation == "none":
        _log.warning(
            "ISOLATION IS OFF (--isolation=none): sprite commands run as root, see every "
            "process and file of this host and have no resource limits. Use it only where "
            "the sandbox cannot run, and never with agents you do not trust."
        )
    elif config.egress_allow_private:
        _log.warning(
            "EGRESS TO PRIVATE ADDRESSES IS ALLOWED (--egress-allow-private %s): every "
            "sprite whose network policy allows a name that resolves there can reach it, "
            "services on this host's loopback included.",
            " ".join(config.egress_allow_private),
        )
    try:
        await state.start()
    except CgroupError as exc:
        raise LauncherError(f"{exc}; or start with --isolation=none (not isolated)") from None
    except ContainerError as exc:
        raise LauncherError(
            f"{exc}; or start with --isolation=sandbox (the host's filesystem as the sprites' "
            "root) or --isolation=none (not isolated)"
        ) from None
    except NetnsError as exc:
        raise LauncherError(f"{exc}; or start with --isolation=none (not isolated)") from None
    runner = web.AppRunner(
        build_app(state), handle_signals=False, access_log=None, shutdown_timeout=2.0
    )
    await runner.setup()
    stop_event = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    if stop is None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop_event.set)
    try:
        site = web.TCPSite(runner, config.host, config.port)
        await site.start()
        port = _bound_port(runner) or config.port
        state.port = port
        url = f"http://{config.host}:{port}"
        _log.info("sprites-local serving %s (state in %s)", url, config.state_dir)
        if config.ready_file is not None:
            _write_ready(config, url, port)
        await stop_event.wait()
    finally:
        await state.stop()
        await runner.cleanup()
        if stop is None:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)


def _bound_port(runner: web.AppRunner) -> int | None:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    return None


def _write_ready(config: LocalSpritesConfig, url: str, port: int) -> None:
    assert config.ready_file is not None
    temp = config.ready_file.with_name(config.ready_file.name + ".tmp")
    temp.write_text(json.dumps({"url": url, "port": port, "pid": os.getpid()}))
    temp.replace(config.ready_file)


__all__ = ["build_app", "serve"]
