"""Checkpoints as directory snapshots: `checkpoints/v0`, `v1`, … of the sprite's files.

A snapshot holds a copy of the sprite directory (`cp -a`, reflinks where the filesystem can)
plus the service definitions and network policy of the moment. Restoring copies the snapshot
beside the live directory and swaps the two, so a failed copy leaves the files as they were.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from pathlib import Path

from lattice_devtools.sprites_local._wire import CheckpointRecord, utcnow

_ID = re.compile(r"^v(\d+)$")
_META = "checkpoint.json"


class CheckpointError(Exception):
    """A snapshot or restore failed (reported inside the 200 progress stream)."""


class CheckpointStore:
    """The checkpoints of one sprite."""

    def __init__(self, base: Path) -> None:
        self._base = base
        self._current = base / "current"
        self.lock = asyncio.Lock()

    def list(self) -> list[CheckpointRecord]:
        """All checkpoints, newest first."""
        records = []
        if self._base.is_dir():
            for child in self._base.iterdir():
                meta = child / _META
                if _ID.match(child.name) and meta.is_file():
                    records.append(CheckpointRecord.model_validate_json(meta.read_text()))
        return sorted(records, key=lambda r: int(r.id[1:]), reverse=True)

    def get(self, checkpoint_id: str) -> CheckpointRecord | None:
        if not _ID.match(checkpoint_id):
            return None
        meta = self._base / checkpoint_id / _META
        if not meta.is_file():
            return None
        return CheckpointRecord.model_validate_json(meta.read_text())

    def current(self) -> str | None:
        """The checkpoint the files descend from (last created or restored)."""
        try:
            return self._current.read_text().strip() or None
        except FileNotFoundError:
            return None

    async def create(
        self, root: Path, extras: dict[str, str], comment: str, *, layer: Path | None = None
    ) -> CheckpointRecord:
        """Snapshot `root`, the container's writable `layer` when there is one, and the
        `extras` files' contents, as the next `vN`."""
        self._base.mkdir(parents=True, exist_ok=True)
        existing = [int(m.group(1)) for c in self._base.iterdir() if (m := _ID.match(c.name))]
        checkpoint_id = f"v{max(existing) + 1 if existing else 0}"
        target = self._base / checkpoint_id
        partial = self._base / f".{checkpoint_id}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        await copy_tree(root, partial / "root", live=True)
        if layer is not None and _is_dir(layer):
            await copy_tree(layer, partial / "layer", live=True)
        (partial / "extras.json").write_text(json.dumps(extras))
        source = self.current()
        parent = self.get(source) if source else None
        record = CheckpointRecord(
            id=checkpoint_id,
            create_time=utcnow(),
            comment=comment,
            source_id=source,
            history=[*parent.history, parent.id] if parent else [],
        )
        (partial / _META).write_text(record.model_dump_json())
        partial.rename(target)
        self._current.write_text(checkpoint_id)
        return record

    async def restore(
        self, checkpoint_id: str, root: Path, *, layer: Path | None = None
    ) -> dict[str, str]:
        """Replace `root` (and the writable `layer`: emptied when the snapshot has none) by
        the snapshot's copies; returns the snapshot's extras. The container must be stopped."""
        snapshot = self._base / checkpoint_id
        if self.get(checkpoint_id) is None:
            raise CheckpointError(f"checkpoint {checkpoint_id} not found")
        await self._swap(snapshot / "root", root)
        if layer is not None:
            saved = snapshot / "layer"
            if saved.is_dir():
                await self._swap(saved, layer)
            else:
                await remove_tree(layer)
                _make_dir(layer)
        self._current.write_text(checkpoint_id)
        return _read_extras(snapshot)

    async def delete(self, checkpoint_id: str) -> None:
        """Remove a snapshot (renamed aside first: a half-removed one is never listed)."""
        if not _ID.match(checkpoint_id):
            raise CheckpointError(f"checkpoint {checkpoint_id} not found")
        doomed = self._base / f".{checkpoint_id}.deleting"
        os.rename(self._base / checkpoint_id, doomed)
        await remove_tree(doomed)

    async def _swap(self, saved: Path, root: Path) -> None:
        """Copy `saved` beside `root` and swap them (a failed copy changes nothing)."""
        incoming = root.with_name(root.name + ".restoring")
        outgoing = root.with_name(root.name + ".replaced")
        shutil.rmtree(incoming, ignore_errors=True)
        shutil.rmtree(outgoing, ignore_errors=True)
        await copy_tree(saved, incoming)
        os.rename(root, outgoing)
        os.rename(incoming, root)
        await remove_tree(outgoing)


def _is_dir(path: Path) -> bool:
    return path.is_dir()


def _make_dir(path: Path) -> None:
    path.mkdir()


def _read_extras(snapshot: Path) -> dict[str, str]:
    # A few hundred bytes on local disk: not worth a thread.
    extras: dict[str, str] = json.loads((snapshot / "extras.json").read_text())
    return extras


async def copy_tree(source: Path, dest: Path, *, live: bool = False) -> None:
    """`cp -a source dest` without blocking the loop (reflinks where possible).

    `live`: `source` is in use (a checkpoint of a sprite whose programs run). A file removed
    while cp walks the tree (a git lock, a temporary file renamed into place) is left out
    instead of failing the copy: the snapshot then holds the tree as it was once that file
    was gone, as an atomic filesystem snapshot taken a moment later would."""
    proc = await asyncio.create_subprocess_exec(
        "cp",
        "-a",
        "--reflink=auto",
        "--",
        str(source),
        str(dest),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "LC_ALL": "C"},  # its messages are read below
    )
    _, err = await proc.communicate()
    if proc.returncode == 0:
        return
    problems = err.decode(errors="replace").strip()
    if live and only_vanished(problems):
        return
    raise CheckpointError(f"copy failed: {problems}")


def only_vanished(cp_errors: str) -> bool:
    """Whether every one of cp's complaints is a source file gone before it was read."""
    lines = [line for line in cp_errors.splitlines() if line.strip()]
    return bool(lines) and all(
        line.startswith(("cp: cannot stat '", "cp: cannot open '"))
        and line.endswith(": No such file or directory")
        for line in lines
    )


async def remove_tree(path: Path) -> None:
    """`rm -rf path` without blocking the loop."""
    proc = await asyncio.create_subprocess_exec(
        "rm", "-rf", "--", str(path), stdout=asyncio.subprocess.DEVNULL
    )
    await proc.wait()


__all__ = ["CheckpointError", "CheckpointStore", "copy_tree", "only_vanished", "remove_tree"]
