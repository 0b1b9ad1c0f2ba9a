"""The filesystem API, confined to the sprite's directory (see `_paths` and `_confined`).

Reads honour `Range` (206 / 416), so the operator can tail a file from a byte offset; writes
land in a temporary file that is renamed over the target (atomic), capped at 16 MiB (413).
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import secrets
import shutil
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from lattice_devtools.sprites_local._common import (
    ApiError,
    parse_body,
    query_bool,
    sprite_of,
)
from lattice_devtools.sprites_local._confined import (
    Confined,
    copy_file_at,
    copy_tree_at,
    is_dir_at,
    lstat_at,
    openat2,
    walk_at,
)
from lattice_devtools.sprites_local._launcher import SHM, WORKSPACE
from lattice_devtools.sprites_local._paths import (
    PathRefused,
    area_of,
    error_code,
    host_path,
    sprite_path,
)
from lattice_devtools.sprites_local._rest import SPRITE, routes
from lattice_devtools.sprites_local._sprite import SpriteRuntime
from lattice_devtools.sprites_local._wire import (
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


def _resolve(
    sprite: SpriteRuntime, path: str, working_dir: str, *, follow: bool = True
) -> tuple[str, Path, Path]:
    """(the sprite path, its host path, the host directory of the tree it lies in)."""
    try:
        inside = sprite_path(path, working_dir or "/")
        area = area_of(inside)
        base = sprite.shm if area == SHM else sprite.root
        # Both trees are resolved alike: the tree's top stands for /workspace.
        relative = inside[len(area or WORKSPACE) :]
        return inside, host_path(base, WORKSPACE + relative, follow=follow), base
    except PathRefused as refused:
        raise _fs_error(refused.status, refused.message, refused.code, path) from None
    except OSError as exc:  # a component the host cannot look at (too long, say)
        raise _os_error(exc, path) from None


def _same_tree(base: Path, other: Path, path: str) -> None:
    if base != other:
        raise _fs_error(400, "cannot move or copy between /workspace and /dev/shm", "EXDEV", path)


def _os_error(exc: OSError, path: str) -> ApiError:
    if exc.errno in (errno.ELOOP, errno.EXDEV):
        # openat2 met a symlink (or a way out) that was not there when the path was resolved.
        return _fs_error(409, "the path changed while in use (a symlink appeared)", "ELOOP", path)
    status, code = error_code(exc)
    return _fs_error(status, exc.strerror or code, code, path)


def _mode(text: str, path: str) -> int:
    """An octal permission mode: at most 07777, never set-uid or set-gid (the file API runs
    as root on the host)."""
    try:
        mode = int(text, 8)
    except ValueError:
        raise _fs_error(400, "mode must be octal, e.g. 0644", "EINVAL", path) from None
    if not 0 <= mode <= 0o7777:
        raise _fs_error(400, "mode must be between 0000 and 7777", "EINVAL", path)
    if mode & (stat.S_ISUID | stat.S_ISGID):
        raise _fs_error(400, "set-uid and set-gid bits are not allowed", "EPERM", path)
    return mode


def _entry(inside: str, info: os.stat_result) -> dict[str, Any]:
    kind = (
        "symlink"
        if stat.S_ISLNK(info.st_mode)
        else "directory"
        if stat.S_ISDIR(info.st_mode)
        else "file"
    )
    return {
        "name": posixpath.basename(inside),
        "path": inside,
        "type": kind,
        "size": info.st_size,
        "mode": f"{stat.S_IMODE(info.st_mode):04o}",
        "modTime": iso(datetime.fromtimestamp(info.st_mtime, UTC)),
        "isDir": kind == "directory",
    }


def _chmod_fd(fd: int, mode: int) -> None:
    # An O_PATH descriptor cannot be fchmod'ed; its /proc magic link names the same inode.
    os.chmod(f"/proc/self/fd/{fd}", mode)


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


async def _send_range(request: web.Request, fd: int, size: int) -> web.StreamResponse:
    """The file behind `fd`, whole (200) or the requested byte range (206; 416 past the end),
    as aiohttp's FileResponse answers, but from the descriptor opened under the root."""
    try:
        wanted = request.http_range
    except ValueError:
        wanted = slice(size, None)  # malformed: answered like a range past the end
    start, end, status = 0, size, 200
    if wanted.start is not None or wanted.stop is not None:
        start = wanted.start or 0
        if start < 0 and wanted.stop is None:  # a suffix: the last bytes
            start = max(0, start + size)
            end = size
        else:
            end = min(wanted.stop if wanted.stop is not None else size, size)
        if start >= size:
            return web.Response(
                status=416, headers={"Content-Range": f"bytes */{size}", "Accept-Ranges": "bytes"}
            )
        status = 206
    headers = {
        "Content-Type": "application/octet-stream",
        "Accept-Ranges": "bytes",
        "Content-Length": str(max(0, end - start)),
    }
    if status == 206:
        headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
    response = web.StreamResponse(status=status, headers=headers)
    await response.prepare(request)
    offset = start
    while offset < end:
        chunk = os.pread(fd, min(1 << 20, end - offset), offset)
        if not chunk:
            break  # truncated meanwhile: the client sees a short body
        await response.write(chunk)
        offset += len(chunk)
    await response.write_eof()
    return response


@routes.get(SPRITE + "/fs/read")
async def read_file(request: web.Request) -> web.StreamResponse:
    sprite = sprite_of(request)
    path, working_dir = _params(request)
    inside, host, base = _resolve(sprite, path, working_dir)
    try:
        # O_NONBLOCK: a FIFO the sprite put there must not hang the server.
        with Confined(base, sprite.owner).open(host, os.O_RDONLY | os.O_NONBLOCK) as fd:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                raise _fs_error(400, "is a directory", "EISDIR", inside)
            if not stat.S_ISREG(info.st_mode):
                raise _fs_error(400, "not a regular file", "EINVAL", inside)
            return await _send_range(request, fd, info.st_size)
    except FileNotFoundError:
        raise _fs_error(404, "file not found", "ENOENT", inside) from None
    except OSError as exc:
        raise _os_error(exc, inside) from None


@routes.put(SPRITE + "/fs/write")
async def write_file(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    path, working_dir = _params(request)
    inside, host, base = _resolve(sprite, path, working_dir)
    if request.content_length is not None and request.content_length > MAX_WRITE:
        await _discard_body(request)
        raise _fs_error(413, "file too large (limit 16 MiB)", "EFBIG", inside)
    mode = _mode(request.query.get("mode", "0644"), inside)
    if host == base:
        raise _fs_error(400, "is a directory", "EISDIR", inside)
    create = query_bool(request, "mkdirParents", "mkdir")
    size = 0
    try:
        with Confined(base, sprite.owner).parent(host, create=create) as (directory, name):
            if is_dir_at(directory, name):
                raise _fs_error(400, "is a directory", "EISDIR", inside)
            # A short temporary name: any legal target name (up to 255 bytes) fits.
            temp = f".sl-{secrets.token_hex(8)}.tmp"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            out = os.open(temp, flags, 0o600, dir_fd=directory)
            try:
                try:
                    if sprite.owner is not None:
                        os.fchown(out, *sprite.owner)
                    async for chunk in request.content.iter_chunked(1 << 20):
                        size += len(chunk)
                        if size > MAX_WRITE:
                            await _discard_body(request)
                            raise _fs_error(413, "file too large (limit 16 MiB)", "EFBIG", inside)
                        os.write(out, chunk)
                    os.fchmod(out, mode)
                finally:
                    os.close(out)
                os.replace(temp, name, src_dir_fd=directory, dst_dir_fd=directory)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=directory)
                raise
    except FileNotFoundError:
        raise _fs_error(404, "parent directory does not exist", "ENOENT", inside) from None
    except OSError as exc:
        raise _os_error(exc, inside) from None
    return web.json_response({"path": inside, "size": size, "mode": f"{mode:04o}"})


@routes.get(SPRITE + "/fs/list")
async def list_files(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    path, working_dir = _params(request)
    inside, host, base = _resolve(sprite, path, working_dir)
    confined = Confined(base, sprite.owner)
    try:
        with confined.open(host, os.O_PATH) as fd:
            info = os.fstat(fd)
        if not stat.S_ISDIR(info.st_mode):
            entries = [_entry(inside, info)]
        else:
            prefix = inside.rstrip("/")
            with confined.open(host, os.O_RDONLY | os.O_DIRECTORY) as fd:
                if query_bool(request, "recursive"):
                    found = list(walk_at(fd))
                else:
                    with os.scandir(fd) as listing:
                        found = sorted((e.name, e.stat(follow_symlinks=False)) for e in listing)
            entries = [_entry(f"{prefix}/{rel}", child) for rel, child in found]
    except FileNotFoundError:
        raise _fs_error(404, "file not found", "ENOENT", inside) from None
    except OSError as exc:
        raise _os_error(exc, inside) from None
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
    inside, host, base = _resolve(sprite, path, working_dir, follow=False)
    if host == base:
        raise _fs_error(403, "the sprite root cannot be deleted", "EPERM", inside)
    deleted = [inside]
    try:
        with Confined(base, sprite.owner).parent(host) as (directory, name):
            info = lstat_at(directory, name)
            if stat.S_ISDIR(info.st_mode):
                flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
                fd = os.open(name, flags, dir_fd=directory)
                try:
                    below = [rel for rel, _ in walk_at(fd)]
                finally:
                    os.close(fd)
                if below and not recursive:
                    raise _fs_error(400, "directory not empty", "ENOTEMPTY", inside)
                deleted += [f"{inside}/{rel}" for rel in below]
                shutil.rmtree(name, dir_fd=directory)
            else:
                os.unlink(name, dir_fd=directory)
    except FileNotFoundError:
        raise _fs_error(404, "file not found", "ENOENT", inside) from None
    except OSError as exc:
        raise _os_error(exc, inside) from None
    return web.json_response({"deleted": deleted, "count": len(deleted)})


@routes.post(SPRITE + "/fs/rename")
async def rename_file(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    body = await parse_body(request, RenameBody)
    source, source_host, base = _resolve(sprite, body.source, body.working_dir, follow=False)
    dest, dest_host, dest_base = _resolve(sprite, body.dest, body.working_dir, follow=False)
    _same_tree(base, dest_base, source)
    if base in (source_host, dest_host):
        raise _fs_error(403, "the sprite root cannot be renamed", "EPERM", source)
    confined = Confined(base, sprite.owner)
    try:
        with (
            confined.parent(source_host) as (from_dir, from_name),
            confined.parent(dest_host) as (to_dir, to_name),
        ):
            lstat_at(from_dir, from_name)
            os.replace(from_name, to_name, src_dir_fd=from_dir, dst_dir_fd=to_dir)
    except FileNotFoundError:
        raise _fs_error(404, "file not found", "ENOENT", source) from None
    except OSError as exc:
        raise _os_error(exc, source) from None
    return web.json_response({"source": source, "dest": dest})


@routes.post(SPRITE + "/fs/copy")
async def copy_file(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    body = await parse_body(request, CopyBody)
    source, source_host, base = _resolve(sprite, body.source, body.working_dir)
    dest, dest_host, dest_base = _resolve(sprite, body.dest, body.working_dir, follow=False)
    _same_tree(base, dest_base, source)
    if base in (source_host, dest_host):
        raise _fs_error(403, "the sprite root cannot be copied or replaced", "EPERM", source)
    if dest_host.is_relative_to(source_host):
        raise _fs_error(400, "cannot copy a directory into itself", "EINVAL", source)
    confined = Confined(base, sprite.owner)
    try:
        with (
            confined.parent(source_host) as (from_dir, from_name),
            confined.parent(dest_host) as (to_dir, to_name),
        ):
            info = lstat_at(from_dir, from_name)
            if stat.S_ISDIR(info.st_mode):
                if not body.recursive:
                    raise _fs_error(400, "is a directory (use recursive)", "EISDIR", source)
                total = copy_tree_at(from_dir, from_name, to_dir, to_name, sprite.owner)
            else:
                # The destination is replaced, never followed: a symlink there stays inside.
                total = copy_file_at(from_dir, from_name, to_dir, to_name, sprite.owner)
    except FileNotFoundError:
        raise _fs_error(404, "file not found", "ENOENT", source) from None
    except OSError as exc:
        raise _os_error(exc, source) from None
    return web.json_response(
        {"copied": [{"source": source, "dest": dest}], "count": 1, "totalBytes": total}
    )


@routes.post(SPRITE + "/fs/chmod")
async def chmod_file(request: web.Request) -> web.Response:
    sprite = sprite_of(request)
    body = await parse_body(request, ChmodBody)
    inside, host, base = _resolve(sprite, body.path, body.working_dir)
    mode = _mode(body.mode, inside)
    confined = Confined(base, sprite.owner)
    affected = [inside]
    try:
        with confined.open(host, os.O_PATH) as fd:
            is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
            _chmod_fd(fd, mode)
        if body.recursive and is_dir:
            with confined.open(host, os.O_RDONLY | os.O_DIRECTORY) as top:
                for rel, info in walk_at(top):
                    if stat.S_ISLNK(info.st_mode):
                        continue
                    # Each one opened again beneath the top: a symlink swapped in is refused.
                    child = openat2(top, rel, os.O_PATH)
                    try:
                        _chmod_fd(child, mode)
                    finally:
                        os.close(child)
                    affected.append(f"{inside.rstrip('/')}/{rel}")
    except FileNotFoundError:
        raise _fs_error(404, "file not found", "ENOENT", inside) from None
    except OSError as exc:
        raise _os_error(exc, inside) from None
    entries = [{"path": p, "mode": f"{mode:04o}"} for p in affected]
    return web.json_response({"affected": entries, "count": len(entries)})


__all__ = ["MAX_WRITE"]
