"""The filesystem API, confined to the sprite's directory (see `_paths`).

Reads honour `Range` (206 / 416), so the operator can tail a file from a byte offset; writes
land in a temporary file that is renamed over the target (atomic), capped at 16 MiB (413).
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from lattice_adapters.sprites_local._common import (
    ApiError,
    parse_body,
    query_bool,
    sprite_of,
)
from lattice_adapters.sprites_local._paths import (
    PathRefused,
    error_code,
    host_path,
    sprite_path,
    to_sprite,
)
from lattice_adapters.sprites_local._rest import SPRITE, routes
from lattice_adapters.sprites_local._wire import (
    ChmodBody,
    CopyBody,
    DeleteBody,
    RenameBody,
    iso,
)

MAX_WRITE = 16 * 1024 * 1024
DISCARD_LIMIT = 64 * 1024 * 1024


def _fs_error(status: int, message: str, code: str, path: str) -> ApiError:
    return ApiError(status, message, code=code, path=path)


def _resolve(root: Path, path: str, working_dir: str, *, follow: bool = True) -> tuple[str, Path]:
    try:
        inside = sprite_path(path, working_dir or "/")
        return inside, host_path(root, inside, follow=follow)
    except PathRefused as refused:
        raise _fs_error(refused.status, refused.message, refused.code, path) from None


def _os_error(exc: OSError, path: str) -> ApiError:
    status, code = error_code(exc)
    return _fs_error(status, exc.strerror or code, code, path)


def _entry(root: Path, host: Path) -> dict[str, Any]:
    info = host.lstat()
    kind = (
        "symlink"
        if stat.S_ISLNK(info.st_mode)
        else "directory"
        if stat.S_ISDIR(info.st_mode)
        else "file"
    )
    return {
        "name": host.name if host != root else "workspace",
        "path": to_sprite(root, host),
        "type": kind,
        "size": info.st_size,
        "mode": f"{stat.S_IMODE(info.st_mode):04o}",
        "modTime": iso(datetime.fromtimestamp(info.st_mtime, UTC)),
        "isDir": kind == "directory",
    }


def _params(request: web.Request) -> tuple[str, str]:
    path = request.query.get("path")
    if not path:
        raise _fs_error(400, "missing path", "EINVAL", "")
    return path, request.query.get("workingDir", "/")


async def _discard_body(request: web.Request) -> None:
    # Read what the client is still sending, so that it sees the 413 instead of a reset.
    left = DISCARD_LIMIT
    async for chunk in request.content.iter_chunked(1 << 20):
        left -= len(chunk)
        if left <= 0:
            break


@routes.get(SPRITE + "/fs/read")
async def read_file(request: web.Request) -> web.StreamResponse:
    sprite = sprite_of(request)
    path, working_dir = _params(request)
    inside, host = _resolve(sprite.root, path, working_dir)
    if not host.exists():
        raise _fs_error(404, "file not found", "ENOENT", inside)
    if host.is_dir():
        raise _fs_error(400, "is a directory", "EISDIR", inside)
    # FileResponse answers Range with 206 (and 416 past the end) by itself.
    return web.FileResponse(host, headers={"Content-Type": "application/octet-stream"})


@routes.put(SPRITE + "/fs/write")
async def write_file(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    path, working_dir = _params(request)
    inside, host = _resolve(sprite.root, path, working_dir)
    if request.content_length is not None and request.content_length > MAX_WRITE:
        await _discard_body(request)
        raise _fs_error(413, "file too large (limit 16 MiB)", "EFBIG", inside)
    try:
        mode = int(request.query.get("mode", "0644"), 8)
    except ValueError:
        raise _fs_error(400, "mode must be octal, e.g. 0644", "EINVAL", inside) from None
    parent = host.parent
    if not parent.is_dir():
        if not query_bool(request, "mkdirParents", "mkdir"):
            raise _fs_error(404, "parent directory does not exist", "ENOENT", inside)
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _os_error(exc, inside) from None
    if host.is_dir():
        raise _fs_error(400, "is a directory", "EISDIR", inside)
    temp = parent / f".{host.name}.sprites-local-{secrets.token_hex(6)}"
    size = 0
    try:
        with temp.open("xb") as out:
            async for chunk in request.content.iter_chunked(1 << 20):
                size += len(chunk)
                if size > MAX_WRITE:
                    await _discard_body(request)
                    raise _fs_error(413, "file too large (limit 16 MiB)", "EFBIG", inside)
                out.write(chunk)
        temp.chmod(mode)
        temp.replace(host)
    except OSError as exc:
        raise _os_error(exc, inside) from None
    finally:
        temp.unlink(missing_ok=True)
    return web.json_response({"path": inside, "size": size, "mode": f"{mode:04o}"})


@routes.get(SPRITE + "/fs/list")
async def list_files(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    path, working_dir = _params(request)
    inside, host = _resolve(sprite.root, path, working_dir)
    if not host.exists():
        raise _fs_error(404, "file not found", "ENOENT", inside)
    if not host.is_dir():
        entries = [_entry(sprite.root, host)]
    else:
        recursive = query_bool(request, "recursive")
        children = sorted(host.rglob("*") if recursive else host.iterdir())
        entries = [_entry(sprite.root, child) for child in children]
    return web.json_response({"path": inside, "count": len(entries), "entries": entries})


@routes.delete(SPRITE + "/fs/delete")
async def delete_file(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    if "path" in request.query:
        path, working_dir = _params(request)
        recursive = query_bool(request, "recursive")
    else:
        body = await parse_body(request, DeleteBody)
        path, working_dir, recursive = body.path, body.working_dir, body.recursive
    inside, host = _resolve(sprite.root, path, working_dir, follow=False)
    if host == sprite.root:
        raise _fs_error(403, "the sprite root cannot be deleted", "EPERM", inside)
    if not host.exists() and not host.is_symlink():
        raise _fs_error(404, "file not found", "ENOENT", inside)
    deleted = [inside]
    try:
        if host.is_dir() and not host.is_symlink():
            if recursive:
                deleted += [to_sprite(sprite.root, p) for p in sorted(host.rglob("*"))]
                shutil.rmtree(host)
            elif any(host.iterdir()):
                raise _fs_error(400, "directory not empty", "ENOTEMPTY", inside)
            else:
                host.rmdir()
        else:
            host.unlink()
    except OSError as exc:
        raise _os_error(exc, inside) from None
    return web.json_response({"deleted": deleted, "count": len(deleted)})


@routes.post(SPRITE + "/fs/rename")
async def rename_file(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    body = await parse_body(request, RenameBody)
    source, source_host = _resolve(sprite.root, body.source, body.working_dir, follow=False)
    dest, dest_host = _resolve(sprite.root, body.dest, body.working_dir, follow=False)
    if sprite.root in (source_host, dest_host):
        raise _fs_error(403, "the sprite root cannot be renamed", "EPERM", source)
    if not source_host.exists() and not source_host.is_symlink():
        raise _fs_error(404, "file not found", "ENOENT", source)
    try:
        os.replace(source_host, dest_host)
    except OSError as exc:
        raise _os_error(exc, source) from None
    return web.json_response({"source": source, "dest": dest})


@routes.post(SPRITE + "/fs/copy")
async def copy_file(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    body = await parse_body(request, CopyBody)
    source, source_host = _resolve(sprite.root, body.source, body.working_dir)
    dest, dest_host = _resolve(sprite.root, body.dest, body.working_dir, follow=False)
    if not source_host.exists():
        raise _fs_error(404, "file not found", "ENOENT", source)
    try:
        if source_host.is_dir():
            if not body.recursive:
                raise _fs_error(400, "is a directory (use recursive)", "EISDIR", source)
            shutil.copytree(source_host, dest_host, symlinks=True, dirs_exist_ok=True)
            total = sum(p.stat().st_size for p in dest_host.rglob("*") if p.is_file())
        else:
            shutil.copy2(source_host, dest_host)
            total = dest_host.stat().st_size
    except OSError as exc:
        raise _os_error(exc, source) from None
    return web.json_response(
        {"copied": [{"source": source, "dest": dest}], "count": 1, "totalBytes": total}
    )


@routes.post(SPRITE + "/fs/chmod")
async def chmod_file(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    body = await parse_body(request, ChmodBody)
    inside, host = _resolve(sprite.root, body.path, body.working_dir)
    try:
        mode = int(body.mode, 8)
    except ValueError:
        raise _fs_error(400, "mode must be octal, e.g. 0755", "EINVAL", inside) from None
    if not host.exists():
        raise _fs_error(404, "file not found", "ENOENT", inside)
    targets = [host, *sorted(host.rglob("*"))] if body.recursive and host.is_dir() else [host]
    try:
        for target in targets:
            if not target.is_symlink():
                target.chmod(mode)
    except OSError as exc:
        raise _os_error(exc, inside) from None
    affected = [{"path": to_sprite(sprite.root, t), "mode": f"{mode:04o}"} for t in targets]
    return web.json_response({"affected": affected, "count": len(affected)})


__all__ = ["MAX_WRITE"]
