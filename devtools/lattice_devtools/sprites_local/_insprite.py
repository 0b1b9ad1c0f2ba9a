"""The in-sprite API: HTTP on the unix socket `/.sprite/api.sock`, and its CLI.

At Fly.io a program inside a sprite reaches the sprite environment through
`/.sprite/api.sock` (virtual host `sprite`), without the organisation token; the documented
part is the Tasks API that holds a sprite awake. The local server offers that and, with the
same shapes as the public API, what the sprite protocol asks of programs (checkpoint before
WAITING):

    GET    /v1/checkpoints            JSON list, newest first
    GET    /v1/checkpoints/{id}       one checkpoint
    POST   /v1/checkpoint             {"comment"?} -> NDJSON, ending "Checkpoint vN created"
    GET    /v1/tasks                  {"tasks": [{name, started_at, expires_at}]}
    POST   /v1/tasks                  {"name", "expire": "1h"} -> 201 (409 if held)
    PUT    /v1/tasks/{name}           {"expire"} -> 200 (create or refresh)
    DELETE /v1/tasks/{name}           204

`sprite-checkpoint [--comment TEXT]` (in `/.sprite/bin`, on the default PATH) creates a
checkpoint through the socket and prints its id; a failure goes to stderr with status 1.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web
from pydantic import ValidationError

from lattice_adapters._duration import parse_duration
from lattice_devtools.sprites_local._wire import CheckpointBody, TaskBody, iso

if TYPE_CHECKING:
    from lattice_devtools.sprites_local._sprite import SpriteRuntime

SOCKET_NAME = "api.sock"
CLI_NAME = "sprite-checkpoint"
MAX_TASK = 3600.0

_CLI = '''#!{python} -I
"""sprite-checkpoint [--comment TEXT]: checkpoint this sprite and print the new id."""
import argparse, http.client, json, re, socket, sys


class _Unix(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("sprite", timeout=300)
        self._path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self._path)


def main():
    parser = argparse.ArgumentParser(prog="sprite-checkpoint", description=__doc__)
    parser.add_argument("--comment", "-m", default="")
    parser.add_argument("--socket", default="/.sprite/api.sock")
    args = parser.parse_args()
    conn = _Unix(args.socket)
    try:
        conn.request(
            "POST",
            "/v1/checkpoint",
            body=json.dumps({{"comment": args.comment}}),
            headers={{"Content-Type": "application/json"}},
        )
        response = conn.getresponse()
        if response.status != 200:
            print(f"sprite-checkpoint: HTTP {{response.status}}: {{response.read().decode()}}",
                  file=sys.stderr)
            return 1
        for raw in response:
            line = raw.decode().strip()
            if not line:
                continue
            event = json.loads(line)
            if event.get("type") == "error":
                print(f"sprite-checkpoint: {{event.get('error')}}", file=sys.stderr)
                return 1
            if event.get("type") == "complete":
                match = re.search(r"\\bv\\d+\\b", event.get("data") or "")
                if match:
                    print(match.group(0))
                    return 0
        print("sprite-checkpoint: no checkpoint id in the answer", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"sprite-checkpoint: {{exc}}", file=sys.stderr)
        return 1
    finally:
        conn.close()


sys.exit(main())
'''


def install_cli(bin_dir: Path) -> Path:
    """Write the `sprite-checkpoint` script into the sprite's bin directory."""
    path = bin_dir / CLI_NAME
    # The host's own interpreter: the server's may live where a sprite's user cannot reach
    # (a virtualenv under /root); the script needs only the standard library.
    python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or sys.executable
    path.write_text(_CLI.format(python=python))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


class InSpriteApi:
    """The unix-socket API of one sprite."""

    def __init__(self, sprite: SpriteRuntime) -> None:
        self._sprite = sprite
        self._runner: web.AppRunner | None = None
        self._task_started: dict[str, float] = {}

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/v1/checkpoints", self._list)
        app.router.add_get("/v1/checkpoints/{id}", self._get)
        app.router.add_post("/v1/checkpoint", self._create)
        app.router.add_get("/v1/tasks", self._tasks)
        app.router.add_post("/v1/tasks", self._task_create)
        app.router.add_put("/v1/tasks/{name}", self._task_put)
        app.router.add_delete("/v1/tasks/{name}", self._task_delete)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        sock = bind_unix(self._sprite.dot, SOCKET_NAME)
        site = web.SockSite(self._runner, sock)
        await site.start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        (self._sprite.dot / SOCKET_NAME).unlink(missing_ok=True)

    async def _list(self, request: web.Request) -> web.Response:
        records = self._sprite.checkpoints.list()
        return web.json_response([r.model_dump(mode="json") for r in records])

    async def _get(self, request: web.Request) -> web.Response:
        record = self._sprite.checkpoints.get(request.match_info["id"])
        if record is None:
            return web.json_response({"error": "checkpoint not found"}, status=404)
        return web.json_response(record.model_dump(mode="json"))

    async def _create(self, request: web.Request) -> web.StreamResponse:
        try:
            body = CheckpointBody.model_validate_json(await request.read() or b"{}")
        except ValidationError:
            return web.json_response({"error": "invalid body"}, status=400)
        await self._sprite.wake()
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        async for event in self._sprite.checkpoint_events(body.comment):
            await response.write(json.dumps(event).encode() + b"\n")
        await response.write_eof()
        return response

    def _task_list(self) -> list[dict[str, Any]]:
        self._sprite.busy()  # prunes expired tasks
        now_wall, now = time.time(), time.monotonic()
        return [
            {
                "name": name,
                "started_at": iso_seconds(self._task_started.get(name, now_wall)),
                "expires_at": iso_seconds(now_wall + until - now),
            }
            for name, until in sorted(self._sprite.tasks.items())
        ]

    async def _tasks(self, request: web.Request) -> web.Response:
        return web.json_response({"tasks": self._task_list()})

    async def _task_create(self, request: web.Request) -> web.Response:
        body, expire = await _task_body(request)
        if body is None or expire is None or not body.name:
            return web.json_response({"error": "name and a valid expire are required"}, status=400)
        self._sprite.busy()
        if body.name in self._sprite.tasks:
            return web.json_response({"error": "task already held"}, status=409)
        self._hold(body.name, expire)
        return web.json_response({"name": body.name}, status=201)

    async def _task_put(self, request: web.Request) -> web.Response:
        body, expire = await _task_body(request)
        if body is None or expire is None:
            return web.json_response({"error": "a valid expire is required"}, status=400)
        name = request.match_info["name"]
        self._hold(name, expire)
        return web.json_response({"name": name})

    async def _task_delete(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        self._sprite.tasks.pop(name, None)
        self._task_started.pop(name, None)
        return web.Response(status=204)

    def _hold(self, name: str, expire: float) -> None:
        self._task_started.setdefault(name, time.time())
        self._sprite.tasks[name] = time.monotonic() + min(expire, MAX_TASK)
        self._sprite.touch()


async def _task_body(request: web.Request) -> tuple[TaskBody | None, float | None]:
    try:
        body = TaskBody.model_validate_json(await request.read() or b"{}")
        return body, parse_duration(body.expire)
    except (ValidationError, ValueError):
        return None, None


def iso_seconds(seconds: float) -> str:
    return iso(datetime.fromtimestamp(seconds, UTC)) or ""


def bind_unix(directory: Path, name: str) -> socket.socket:
    """A listening unix socket at directory/name, whatever the length of the directory path.

    Socket paths are limited to 107 bytes; binding through the directory's file descriptor
    (`/proc/self/fd/N/name`) keeps the path short.
    """
    path = directory / name
    path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        sock.bind(f"/proc/self/fd/{fd}/{name}")
    except OSError:
        sock.close()
        raise
    finally:
        os.close(fd)
    os.chmod(path, 0o666)
    sock.listen(64)
    sock.setblocking(False)
    return sock


__all__ = ["CLI_NAME", "SOCKET_NAME", "InSpriteApi", "bind_unix", "install_cli"]
