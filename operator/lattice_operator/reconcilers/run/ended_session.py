"""A session that had ended before the operator could attach: nothing to stream, its exit
status read from the exit file.

What a start whose answer was lost turns into when the command began and ended while
nobody was attached (`SessionRunner._started_unseen`): followed like any session, it ends
at once, and the outbox (read at every end) holds everything the command said.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from lattice_operator.ports import DetachOnExit, ExecOutput, InvalidRequest


class EndedSession(DetachOnExit):
    """The ExecSession port for a command that is over."""

    def __init__(self, session_id: str, exit_code: int) -> None:
        self._session_id = session_id
        self._exit_code = exit_code

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def tty(self) -> bool:
        return False

    @property
    def exit_code(self) -> int | None:
        return self._exit_code

    async def __aiter__(self) -> AsyncIterator[ExecOutput]:
        return
        yield  # an async generator with nothing to give

    async def write_stdin(self, data: bytes) -> None:
        raise InvalidRequest("the session has ended")

    async def close_stdin(self) -> None:
        return None

    async def resize(self, cols: int, rows: int) -> None:
        raise InvalidRequest("the session has ended")

    async def signal(self, name: str) -> None:
        return None  # nothing left to signal

    async def wait(self) -> int:
        return self._exit_code

    async def detach(self) -> None:
        return None


__all__ = ["EndedSession"]
