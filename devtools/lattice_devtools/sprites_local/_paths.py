"""Confine file-API paths to the sprite's directory (seen as /workspace inside the sprite).

A path is refused when it contains a `..` component, when it (or its working directory)
lies outside /workspace, or when a symlink on the way leads out of /workspace. Symlinks are
resolved the way the sprite sees them: an absolute target `/workspace/x` is the sprite's own
`x`, anything else absolute is outside.
"""

from __future__ import annotations

import errno
import os
import posixpath
from pathlib import Path

from lattice_devtools.sprites_local._launcher import SHM, WORKSPACE

_MAX_LINKS = 40
NAME_MAX = 255
PATH_MAX = 4095


class PathRefused(Exception):
    """A path the file API will not touch; carries the HTTP status and errno code."""

    def __init__(self, message: str, *, path: str, status: int = 403, code: str = "EACCES"):
        super().__init__(message)
        self.message = message
        self.path = path
        self.status = status
        self.code = code


def sprite_path(path: str, working_dir: str = "/") -> str:
    """The normalised absolute path inside the sprite; refuses `..` and paths outside."""
    if not path or "\x00" in path or "\x00" in working_dir:
        raise PathRefused("invalid path", path=path, status=400, code="EINVAL")
    if not working_dir.startswith("/"):
        raise PathRefused("workingDir must be absolute", path=path, status=400, code="EINVAL")
    joined = path if path.startswith("/") else posixpath.join(working_dir, path)
    if ".." in joined.split("/"):
        raise PathRefused("'..' is not allowed in paths", path=path)
    if len(joined.encode(errors="surrogateescape")) > PATH_MAX or any(
        len(part.encode(errors="surrogateescape")) > NAME_MAX for part in joined.split("/")
    ):
        raise PathRefused(
            f"path too long (at most {NAME_MAX} bytes a name, {PATH_MAX} in all)",
            path=path[:300],
            status=400,
            code="ENAMETOOLONG",
        )
    normal = posixpath.normpath(joined)
    if normal.startswith("//"):
        normal = "/" + normal.lstrip("/")
    if area_of(normal) is None:
        raise PathRefused(
            f"{normal} is outside the sprite's filesystem (only {WORKSPACE} and {SHM} are served)",
            path=path,
        )
    return normal


def area_of(path: str) -> str | None:
    """The served tree a normalised sprite path lies in: /workspace (files, kept in
    checkpoints) or /dev/shm (memory-like: never in a checkpoint, gone when the sprite
    stops); None for anything else."""
    for area in (WORKSPACE, SHM):
        if path == area or path.startswith(area + "/"):
            return area
    return None


def host_path(root: Path, path: str, *, follow: bool = True) -> Path:
    """The host path for a sprite path (from `sprite_path`), symlinks resolved inside.

    With `follow=False` the last component is not resolved (delete or rename a link itself).
    """
    pending = [p for p in path[len(WORKSPACE) :].split("/") if p]
    resolved: list[str] = []
    links = 0
    while pending:
        part = pending.pop(0)
        if part == ".":
            continue
        if part == "..":
            if not resolved:
                raise PathRefused(f"a symlink in {path} leads outside {WORKSPACE}", path=path)
            resolved.pop()
            continue
        candidate = root.joinpath(*resolved, part)
        if (pending or follow) and candidate.is_symlink():
            links += 1
            if links > _MAX_LINKS:
                raise PathRefused("too many symlinks", path=path, status=400, code="ELOOP")
            target = os.readlink(candidate)
            if target.startswith("/"):
                target = posixpath.normpath(target)
                if target != WORKSPACE and not target.startswith(WORKSPACE + "/"):
                    raise PathRefused(f"a symlink in {path} leads outside {WORKSPACE}", path=path)
                resolved = []
                target = target[len(WORKSPACE) :]
            pending[:0] = [p for p in target.split("/") if p]
            continue
        resolved.append(part)
    return root.joinpath(*resolved)


def to_sprite(root: Path, host: Path) -> str:
    """The sprite path of a host path under `root`."""
    relative = host.relative_to(root).as_posix()
    return WORKSPACE if relative == "." else f"{WORKSPACE}/{relative}"


def error_code(exc: OSError) -> tuple[int, str]:
    """(HTTP status, errno name) for a filesystem error."""
    number = exc.errno or errno.EIO
    name = errno.errorcode.get(number, "EIO")
    status = {
        errno.ENOENT: 404,
        errno.EEXIST: 409,
        errno.EACCES: 403,
        errno.EPERM: 403,
    }.get(number, 400)
    return status, name


__all__ = ["PathRefused", "area_of", "error_code", "host_path", "sprite_path", "to_sprite"]
