"""A Run session as a Sprites service (`spec.mode: service`).

The command runs under the same exit wrapper as an exec session, inside a small shell
that (1) runs it at most once per service, even when the backend restarts the service
(on a crash or a wake), marking that in `<exit file>.service`, and (2) then parks, so the
supervisor sees no exit to restart: the command's end is the exit file, which the
operator polls, and then the operator stops and removes the service. The service's log
(the services log endpoint, followed) is the session's stdout; the outbox stays the
authority for events. Services outlive connections: after an operator restart the Run
finds the service by its name (derived from the Run and its attempt) and follows its
log again, the buffered lines flagged as replay.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from lattice_operator.api.v1alpha1.sprite import SpriteService
from lattice_operator.ports import AdapterError, DetachOnExit, ExecOutput, NotFound, SpriteBackend
from lattice_operator.ports.errors import Conflict, InvalidRequest

log = logging.getLogger(__name__)

SESSION_PREFIX = "service:"
"""How status.sessionId names a service session (`service:<service name>`)."""
POST_PREFIX = "post-"
"""How the HTTP exec's local session ids begin."""
REPLAY_LINES = 1000
"""Buffered log lines asked for when following a service again after a restart."""
FOLLOW_WINDOW = 3600.0
"""Seconds one log request follows; the next one asks for new lines only."""
_PARK = (
    'm="$1"; shift; '
    'mkdir -p "$(dirname "$m")"; if [ ! -e "$m" ]; then : > "$m"; "$@"; fi; '
    # Parked, the shell has nothing to say: when the service is stopped, the signal reaches
    # its sleep too, and sh would report it ("Terminated") into the Run's log.
    "exec >/dev/null 2>&1; trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"
)


def service_name(exit_file: str) -> str:
    """The service of one session, named from its exit file (the Run's uid and tag): the
    same after a restart, new for every attempt and segment."""
    digest = hashlib.sha256(exit_file.encode()).hexdigest()[:16]
    return f"lattice-run-{digest}"


def service_definition(
    name: str, wrapped: list[str], exit_file: str, workdir: str
) -> SpriteService:
    """The service that runs `wrapped` (the exit-wrapped command) once, then parks."""
    return SpriteService(
        name=name,
        cmd="sh",
        args=["-c", _PARK, "lattice-service", f"{exit_file}.service", *wrapped],
        dir=workdir,
    )


class ServiceSession(DetachOnExit):
    """A service followed as an `ExecSession`: its log is stdout, the exit file its end."""

    def __init__(
        self,
        backend: SpriteBackend,
        sprite: str,
        service: str,
        *,
        read_exit: Callable[[], Awaitable[int | None]],
        poll: float,
        replay: bool,
    ) -> None:
        self._backend = backend
        self._sprite = sprite
        self._service = service
        self._read_exit = read_exit
        self._poll = poll
        self._replay = replay
        self._exit_code: int | None = None
        self._reader: asyncio.Task[None] | None = None

    @property
    def session_id(self) -> str:
        return SESSION_PREFIX + self._service

    @property
    def service(self) -> str:
        return self._service

    @property
    def tty(self) -> bool:
        return False

    @property
    def exit_code(self) -> int | None:
        return self._exit_code

    def __aiter__(self) -> AsyncIterator[ExecOutput]:
        return self._output()

    async def _output(self) -> AsyncIterator[ExecOutput]:
        queue: asyncio.Queue[ExecOutput | None] = asyncio.Queue(maxsize=256)
        self._reader = asyncio.create_task(self._read_log(queue), name=f"log-{self._service}")
        loop = asyncio.get_running_loop()
        next_check = loop.time() + self._poll
        try:
            while True:
                try:
                    wait = max(0.0, next_check - loop.time())
                    item = await asyncio.wait_for(queue.get(), wait)
                except TimeoutError:
                    item = None
                if item is not None:
                    yield item
                if loop.time() < next_check:
                    continue
                if await self._ended():
                    while not queue.empty():  # what the log had already delivered
                        rest = queue.get_nowait()
                        if rest is not None:
                            yield rest
                    return
                next_check = loop.time() + self._poll
        finally:
            await self.detach()

    async def _read_log(self, queue: asyncio.Queue[ExecOutput | None]) -> None:
        replay = self._replay
        while True:
            lines = REPLAY_LINES if replay else 0
            try:
                async for event in self._backend.service_logs(
                    self._sprite, self._service, lines=lines, follow=FOLLOW_WINDOW
                ):
                    if event.type in ("stdout", "stderr") and event.data:
                        stream = "stdout" if event.type == "stdout" else "stderr"
                        data = event.data.encode()
                        await queue.put(ExecOutput(stream=stream, data=data, replay=replay))
                    elif event.type == "complete":
                        replay = False
            except AdapterError as exc:
                # The outbox still has every event; the end is the exit file, not the log.
                log.info("service %s: log follow ended: %s", self._service, exc)
                await asyncio.sleep(self._poll)
            replay = False

    async def _ended(self) -> bool:
        """The command's end: its exit file (then the service is stopped and removed), or a
        service that is gone or no longer runs without one (an unknown end)."""
        code = await self._read_exit()
        if code is not None:
            self._exit_code = code
            await stop_service(self._backend, self._sprite, self._service)
            return True
        try:
            info = await self._backend.get_service(self._sprite, self._service)
        except NotFound:
            return True
        except AdapterError:
            return False
        if info.status in ("stopped", "failed"):
            # Not by its command's end (that leaves the exit file): stopped by someone, or
            # its shell failed. It may have ended just now; else the end is unknown.
            self._exit_code = await self._read_exit()
            await stop_service(self._backend, self._sprite, self._service)
            return True
        return False

    async def write_stdin(self, data: bytes) -> None:
        raise InvalidRequest("a service has no stdin")

    async def close_stdin(self) -> None:
        return None

    async def resize(self, cols: int, rows: int) -> None:
        raise InvalidRequest("a service has no terminal")

    async def signal(self, name: str) -> None:
        raise InvalidRequest("stop the service instead")

    async def wait(self) -> int:
        async for _ in self._output():
            pass
        if self._exit_code is None:
            raise InvalidRequest("the service ended without an exit status")
        return self._exit_code

    async def detach(self) -> None:
        """Stop following the log; the service goes on (services outlive connections)."""
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader


async def stop_service(backend: SpriteBackend, sprite: str, service: str) -> None:
    """Stop a Run's service and remove its definition (gone already: nothing to do)."""
    with contextlib.suppress(NotFound, Conflict):  # Conflict: it is not running
        await backend.stop_service(sprite, service)
    with contextlib.suppress(NotFound):
        await backend.delete_service(sprite, service)


__all__ = [
    "POST_PREFIX",
    "SESSION_PREFIX",
    "ServiceSession",
    "service_definition",
    "service_name",
    "stop_service",
]
