"""Paths of a FileOps request: relative to the sprite's workspace, never out of it, and
writes only below the request's writable roots."""

from __future__ import annotations

from pathlib import PurePosixPath

from lattice_operator.fileops.errors import PathRefused

WORKSPACE = "/workspace"


def normalise(path: str, *, field: str = "path") -> str:
    """`path` as a clean relative path ("." for the root); absolute paths, `..`, `~`, NUL
    and empty components that hide traversal are refused."""
    if not path or "\x00" in path:
        raise PathRefused(f"{field}: empty or NUL in path", "give a path relative to the workspace")
    if path.startswith(("/", "~")):
        raise PathRefused(
            f"{field}: {path!r} is absolute", "paths are relative to the workspace root"
        )
    parts = [p for p in PurePosixPath(path).parts if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise PathRefused(f"{field}: {path!r} leaves the workspace", "remove the `..` components")
    return "/".join(parts) or "."


def absolute(relative: str) -> str:
    """The path inside the sprite."""
    return WORKSPACE if relative == "." else f"{WORKSPACE}/{relative}"


def check_writable(relative: str, roots: list[str], *, field: str = "path") -> None:
    """Refuse a write outside every writable root."""
    for root in roots:
        try:
            r = normalise(root, field="constraints.writable_roots")
        except PathRefused:
            continue  # an invalid root allows nothing (and is reported on its own)
        if r == "." or relative == r or relative.startswith(r + "/"):
            return
    raise PathRefused(
        f"{field}: {relative!r} is outside the writable roots {roots}",
        "write only below constraints.writable_roots, or widen them in the request",
    )


__all__ = ["WORKSPACE", "absolute", "check_writable", "normalise"]
