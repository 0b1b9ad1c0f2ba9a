"""Cold starts seen by Runs: a session start that meets a cold sprite waits for its wake
(1-2 s at Fly.io) and finds no process of before. Counted for `lattice_run_cold_starts_total`,
which tells whether spec.keepWarm would pay.

The backend's state is read with a GET of the sprite just before the session's files and
exec, which would wake it: a control-plane call that does not wake it itself. One request
per session start; a failing one counts nothing and delays nothing further."""

from __future__ import annotations

import logging
from collections.abc import Callable

from lattice_operator.metrics import RUN_COLD_STARTS
from lattice_operator.ports.errors import AdapterError
from lattice_operator.ports.sprites import SpriteBackend

log = logging.getLogger(__name__)


class ColdStarts:
    """Looks at the sprite's state before a Run's session starts; counts it when cold."""

    def __init__(
        self, backend: SpriteBackend, count: Callable[[], None] = RUN_COLD_STARTS.inc
    ) -> None:
        self._backend = backend
        self._count = count

    async def note(self, sprite: str) -> bool:
        """Whether the session about to start on `sprite` meets it cold (and was counted)."""
        try:
            info = await self._backend.get_sprite(sprite)
        except AdapterError as exc:
            log.debug("state of %s before a session start unknown: %s", sprite, exc)
            return False
        if info.status != "cold":
            return False
        self._count()
        return True


__all__ = ["ColdStarts"]
