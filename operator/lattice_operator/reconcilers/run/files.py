"""The protocol files a Run reads and writes in its sprite: the outbox, resume.json, the exit
file the command wrapper leaves, and the credentials delivered to it."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from lattice_operator.metrics import OUTBOX_LAG
from lattice_operator.ports import AdapterError, NotFound, SpriteBackend
from lattice_operator.reconcilers.run.decisions import (
    BEGUN_SUFFIX,
    OUTBOX_PATH,
    PREVIOUS_RESUME_PATH,
    RESUME_PATH,
    START_SUFFIX,
    outbox_start,
)
from lattice_operator.reconcilers.run.recorder import RunRecorder

log = logging.getLogger(__name__)

LATTICE_DIR = "/workspace/.lattice"
EXIT_DIR = f"{LATTICE_DIR}/exit"
OUTBOX_TAIL_BYTES = 64 * 1024
"""How much of the outbox's end a new Run reads to find the last complete line."""
REREAD_BYTES = 1024 * 1024
"""How much of the outbox before the cursor a restarted operator reads again."""


class ProtocolFiles:
    """One Run's view of its sprite's protocol files."""

    def __init__(self, backend: SpriteBackend, recorder: RunRecorder) -> None:
        self._backend = backend
        self._recorder = recorder
        self.sprite: str | None = recorder.status.sprite_name
        self._outbox_lag = 0

    @property
    def backend(self) -> SpriteBackend:
        return self._backend

    def require_sprite(self) -> str:
        """The backend name of the Run's sprite (known once the Run has started)."""
        if self.sprite is None:
            raise RuntimeError("the Run has no sprite yet")
        return self.sprite

    def exit_file(self, tag: str | None = None) -> str:
        """The exit file of this attempt and session (or of `tag`'s)."""
        return f"{EXIT_DIR}/{self._recorder.ref.uid}-{tag or self._recorder.tag()}"

    def start_file(self) -> str:
        return self.exit_file() + START_SUFFIX

    def begun_file(self) -> str:
        """The marker the wrapper takes before this session's command runs."""
        return self.exit_file() + BEGUN_SUFFIX

    async def learn_start(self, *, final: bool = False) -> bool:
        """Where this Run's outbox lines begin, from the outbox length the command wrapper
        wrote before the Run's first command ran (`wrapped_command(claim=True)`): the end of
        the last complete line by then. False while the wrapper has not got that far (then
        nothing of this Run can be in the outbox yet); `final`: the session is over, and a
        wrapper that never got that far never ran the command either."""
        sprite = self.require_sprite()
        try:
            text = await self._backend.read_file(sprite, self.start_file())
        except NotFound:
            if not final:
                return False
            size = await self.outbox_size()
        else:
            written = _length(text)
            if written is not None:
                size = written
            else:  # the sprite's own file, rewritten by its program: its loss
                log.warning(
                    "run %s: %s holds no length (%r): the outbox's end is taken instead",
                    self._recorder.ref.name,
                    self.start_file(),
                    text[:40],
                )
                size = await self.outbox_size()
        tail, offset = b"", 0
        if size:
            offset = max(0, size - OUTBOX_TAIL_BYTES)
            try:
                tail = (await self._backend.read_file(sprite, OUTBOX_PATH, offset=offset))[
                    : size - offset
                ]
            except NotFound:
                size = 0
        start = outbox_start(size, tail, offset) if size else 0
        status = self._recorder.status
        status.outbox_start = start
        self._recorder.require_engine().start_outbox_at(start)
        self._recorder.changed()
        return True

    async def outbox_size(self) -> int:
        try:
            return (await self._backend.stat(self.require_sprite(), OUTBOX_PATH)).size
        except NotFound:
            return 0

    async def read_outbox(self, *, final: bool = False, reread: int = 0) -> None:
        """Consume the outbox from the cursor (from `reread` bytes before it, if given)."""
        if self._recorder.status.outbox_start is None and not await self.learn_start(final=final):
            return
        engine = self._recorder.require_engine()
        reread = max(reread, engine.recheck_span())  # the last line again: still there?
        offset = max(0, engine.cursor.outbox_offset - reread)
        try:
            data = await self._backend.read_file(self.require_sprite(), OUTBOX_PATH, offset=offset)
        except NotFound:
            data = b""
        except AdapterError as exc:
            log.warning("run %s: outbox read failed: %s", self._recorder.ref.name, exc)
            return
        self._recorder.absorb(engine.feed_outbox(data, offset, final=final))
        lag = offset + len(data) - engine.cursor.outbox_offset
        OUTBOX_LAG.inc(lag - self._outbox_lag)
        self._outbox_lag = lag

    async def read_exit_code(self, *, strict: bool = False) -> int | None:
        """The exit status the wrapper wrote; None without one (or, unless `strict`, when the
        sprite did not answer: `strict` raises that instead)."""
        try:
            text = await self._backend.read_file(self.require_sprite(), self.exit_file())
        except NotFound:
            return None
        except AdapterError:
            if strict:
                raise
            return None
        try:
            return int(text.strip())
        except ValueError:
            return None

    async def write_resume(self, payload: bytes) -> None:
        await self._backend.write_file(self.require_sprite(), RESUME_PATH, payload, atomic=True)

    async def write_payloads(self, files: Mapping[str, bytes]) -> None:
        """The files a payload placement delivers, before the session that reads them."""
        for path, body in files.items():
            await self._backend.write_file(self.require_sprite(), path, body, atomic=True)

    async def write_credential(self, path: str, value: bytes) -> None:
        await self._backend.write_file(self.require_sprite(), path, value, mode=0o600, atomic=True)

    async def remove(self, paths: list[str]) -> None:
        """Remove delivered credentials (a failure is logged: the next pass tries again)."""
        if self.sprite is None:
            return
        for path in paths:
            try:
                await self._backend.delete_file(self.sprite, path)
            except AdapterError as exc:
                log.warning("run %s: could not remove %s: %s", self._recorder.ref.name, path, exc)

    def close(self) -> None:
        OUTBOX_LAG.dec(self._outbox_lag)
        self._outbox_lag = 0


def _length(text: bytes) -> int | None:
    value = text.strip()
    if not value.isdigit() or len(value) > 18:
        return None
    return int(value)


__all__ = [
    "EXIT_DIR",
    "OUTBOX_PATH",
    "PREVIOUS_RESUME_PATH",
    "REREAD_BYTES",
    "RESUME_PATH",
    "ProtocolFiles",
]
