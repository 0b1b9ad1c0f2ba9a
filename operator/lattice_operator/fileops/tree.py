"""The sprite's files as FileOps touches them: reads bounded in size, writes never through a
symlink.

Reads: a file over `FILE_BYTES` is refused from its size before it is read, and the read
asks for `FILE_BYTES + 1` bytes at most (a ranged read), so a file that grew meanwhile is
refused too without more of it crossing the wire or staying in memory.

Writes: the file API follows symlinks inside /workspace, so a link planted by an earlier
request or command (`src/out -> /workspace/docs`) would carry a write under a writable root
anywhere in the workspace. Before a write or delete every existing component of its path is
looked at with `lstat`, top down: a symlink anywhere refuses it. What one op learnt is kept
for that op only (a `run` may change the tree between ops).
"""

from __future__ import annotations

from lattice_operator.fileops.errors import FileOpsError, PathRefused
from lattice_operator.fileops.paths import absolute
from lattice_operator.ports.errors import NotFound
from lattice_operator.ports.sprites import FileStat, SpriteBackend

FILE_BYTES = 8 * 1024 * 1024
"""A file FileOps reads (to return it, patch it, update TriFlow state, or diff it), at most."""


class SpriteTree:
    """One op's view of a sprite's workspace."""

    def __init__(self, backend: SpriteBackend, sprite: str) -> None:
        self.backend = backend
        self.sprite = sprite
        self._seen: dict[str, FileStat | None] = {}

    async def read(self, rel: str) -> str | None:
        """The text of a file; None when it does not exist."""
        path = absolute(rel)
        try:
            info = await self.backend.stat(self.sprite, path)
        except NotFound:
            return None
        if info.is_dir:
            raise FileOpsError(f"{rel} is a directory", "give the path of a file")
        if info.size > FILE_BYTES:
            raise _too_large(rel, info.size)
        try:
            data = await self.backend.read_file(self.sprite, path, limit=FILE_BYTES + 1)
        except NotFound:
            return None
        if len(data) > FILE_BYTES:
            raise _too_large(rel, None)  # it grew after its size was looked at
        try:
            return data.decode()
        except UnicodeDecodeError:
            raise FileOpsError(f"{rel} is not UTF-8 text", "FileOps handles text files") from None

    async def check_no_link(self, rel: str) -> None:
        """Refuse `rel` (relative to /workspace) when one of its existing components is a
        symlink: what is below a link is not where the path says."""
        parts = rel.split("/")
        for end in range(1, len(parts) + 1):
            prefix = "/".join(parts[:end])
            info = await self._lstat(prefix)
            if info is None:
                return  # nothing below a missing component exists yet
            if info.is_symlink:
                raise PathRefused(
                    f"{rel}: {prefix} is a symlink; FileOps does not write through links "
                    "(it could lead out of the writable roots)",
                    "remove the link (a `run` op) or write to the path it points at",
                )
            if not info.is_dir:
                return  # a file on the way: the write fails on its own

    async def _lstat(self, rel: str) -> FileStat | None:
        if rel not in self._seen:
            try:
                self._seen[rel] = await self.backend.lstat(self.sprite, absolute(rel))
            except NotFound:
                self._seen[rel] = None
        return self._seen[rel]


def _too_large(rel: str, size: int | None) -> FileOpsError:
    found = f"{size:,} bytes" if size is not None else f"over {FILE_BYTES:,} bytes"
    return FileOpsError(
        f"{rel} is too large for FileOps ({found}; the limit is {FILE_BYTES:,} bytes, FILE_BYTES)",
        "read or change a part of it with a `run` op (head, tail, sed), or split the file",
    )


__all__ = ["FILE_BYTES", "SpriteTree"]
