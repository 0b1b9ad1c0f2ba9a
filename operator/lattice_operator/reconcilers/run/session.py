"""One exec session of a Run: started (or re-attached), followed to its end.

Stdout goes to the event engine as it arrives; the outbox is read every
`outbox_interval` and at once when stdout shows events the outbox has not yet; a socket
that drops without an exit frame is re-attached (the outbox still has every event). The
session is stopped by the operator for a cancel, a timeout, or work after WAITING.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from lattice_operator.api.v1alpha1 import Run
from lattice_operator.clock import Clock
from lattice_operator.lifeloop.mapping import RunTransition
from lattice_operator.metrics import RUN_APPLY_TO_EXEC_SECONDS
from lattice_operator.ports import (
    AdapterError,
    ExecSession,
    ExitStatusUnknown,
    NotFound,
    SpriteBackend,
    Timeout,
    TransportError,
)
from lattice_operator.reconcilers.run.decisions import (
    ALREADY_BEGUN,
    SessionEnd,
    wrapped_command,
)
from lattice_operator.reconcilers.run.ended_session import EndedSession
from lattice_operator.reconcilers.run.files import ProtocolFiles
from lattice_operator.reconcilers.run.reasons import Reason
from lattice_operator.reconcilers.run.recorder import RunRecorder
from lattice_operator.reconcilers.run.service_mode import (
    POST_PREFIX,
    SESSION_PREFIX,
    ServiceSession,
    service_definition,
    service_name,
    stop_service,
)
from lattice_operator.reconcilers.run.stopping import SessionLostError, Stop, Stopper
from lattice_operator.settings import RunTimings

log = logging.getLogger(__name__)

QUEUE_SIZE = 256
"""Output chunks held between the socket and the engine (back-pressure beyond that)."""

_T = TypeVar("_T")


def answer_lost(exc: AdapterError) -> bool:
    """Whether an exec that failed with `exc` may have started all the same: the request
    reached the backend and its answer did not come back (a handshake or its first frame
    that timed out, a connection dropped after it was made)."""
    return isinstance(exc, Timeout) or (isinstance(exc, TransportError) and exc.maybe_executed)


class SessionRunner:
    """Starts, re-attaches and follows a Run's exec sessions."""

    def __init__(
        self,
        *,
        backend: SpriteBackend,
        recorder: RunRecorder,
        files: ProtocolFiles,
        clock: Clock,
        timings: RunTimings,
        stopper: Stopper,
        view: Callable[[], Run],
        on_outbox: Callable[[Run], Awaitable[None]],
    ) -> None:
        self._backend = backend
        self._recorder = recorder
        self._files = files
        self._clock = clock
        self._timings = timings
        self._stopper = stopper
        self._view = view
        self._on_outbox = on_outbox
        """Called after each outbox read (the driver answers new action requests)."""

    async def start(
        self,
        run: Run,
        argv: list[str],
        *,
        claim: bool = False,
        extra_env: Mapping[str, str] | None = None,
    ) -> ExecSession:
        """A new session running `argv` under the protocol's environment and the exit
        wrapper (`claim`: the Run's first, see `wrapped_command`); its id is in the status
        at once (a crash from here on re-attaches). `extra_env`: what a payload placement
        adds (after spec.env: the operator's placement names its own files)."""
        status = self._recorder.status
        sprite = self._files.require_sprite()
        env = {
            "LATTICE_SPRITE_ID": sprite,
            "LATTICE_WORK_ITEM_ID": run.work_item_id(),
            "LATTICE_RUN": self._recorder.ref.name,
            "LATTICE_SESSION": str(status.session_segment),
            **{e.name: e.value for e in run.spec.env},
            **(extra_env or {}),
        }
        wrapped = wrapped_command(argv, env, self._files.exit_file(), claim=claim)
        try:
            session = await self._open(run, sprite, wrapped)
        except AdapterError as exc:
            if run.spec.mode != "exec_ws" or not answer_lost(exc):
                raise
            session = await self._started_unseen(sprite, exc)
        status.session_id = session.session_id
        attempt = status.attempts[-1]
        attempt.session_id = session.session_id
        attempt.start_time = attempt.start_time or self._clock.now()
        if status.start_time is None:
            status.start_time = self._clock.now()
            created = run.metadata.creation_timestamp
            if created is not None:
                waited = (status.start_time - created).total_seconds()
                RUN_APPLY_TO_EXEC_SECONDS.observe(max(0.0, waited))
        self._recorder.receipts.set_session(session.session_id)
        self._recorder.changed()
        return session

    async def _started_unseen(self, sprite: str, error: AdapterError) -> ExecSession:
        """The session of an exec whose answer was lost (`answer_lost`): the sprite may have
        started it anyway, and with `max_run_after_disconnect=0` it would run on unseen,
        and a retry would run it twice. It is looked for; not found, the session's marker is
        written, so that a start still on its way runs nothing (`wrapped_command`), and it
        is looked for once more. Not found then, it never ran: `error` stands (the attempt
        fails by its class, as before), as it does when the sprite does not answer."""
        log.warning(
            "run %s: the exec's answer was lost (%s); looking for its session",
            self._recorder.ref.name,
            error,
        )
        try:
            found = await self._retrying(self._find_begun)
            if found is None:
                marker = self._files.begun_file()
                await self._retrying(lambda: self._backend.write_file(sprite, marker, b""))
                found = await self._retrying(self._find_begun)
        except SessionLostError as exc:
            error.message = f"{error.message}; whether it began is unknown: {exc}"
            raise error from None
        if found is None:
            # Looked for twice, the marker between: it did not begin, and will not.
            error.message = f"{error.message}; it did not begin (looked for in the sprite)"
            if isinstance(error, TransportError):
                error.maybe_executed = False
            raise error
        # Its output before the attach was nobody's to see (and a bounded scrollback may not
        # replay it): no stdout copy is owed for what the outbox holds.
        self._recorder.require_engine().stdout_reattached()
        self._degraded(
            RunTransition.STDOUT_LOST,
            f"the exec's answer was lost ({error}); its command began all the same",
        )
        if isinstance(found, int):
            return EndedSession(f"ended-{self._recorder.tag()}", found)
        return found

    async def _find_begun(self) -> ExecSession | int | None:
        """Where this session's command is: its session, attached (listed with the exit
        file in its command line), its exit status (it ended), or None (it never began, or
        it was killed before its wrapper wrote the status). Raises what the sprite raises."""
        sprite, exit_file = self._files.require_sprite(), self._files.exit_file()
        for info in await self._backend.list_sessions(sprite):
            if exit_file in info.command:
                with contextlib.suppress(NotFound):
                    return await self._backend.attach(sprite, info.id)
                break  # it ended between the listing and the attach: its exit file tells
        return await self._files.read_exit_code(strict=True)

    async def _retrying(
        self,
        op: Callable[[], Awaitable[_T]],
        *,
        on_failure: Callable[[AdapterError], Awaitable[None]] | None = None,
    ) -> _T:
        """`op`, tried again while the sprite does not answer, until `reattach_deadline`
        (then SessionLostError); `on_failure` is told of each failure before the pause."""
        deadline = self._clock.monotonic() + self._timings.reattach_deadline
        delay = 0.2
        while True:
            try:
                return await op()
            except AdapterError as exc:
                if self._clock.monotonic() > deadline:
                    raise SessionLostError(str(exc)) from exc
                if on_failure is not None:
                    await on_failure(exc)
                await self._stopper.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _open(self, run: Run, sprite: str, wrapped: list[str]) -> ExecSession:
        """The session, as the Run's mode runs it (docs/sprites-backend.md, "Run modes")."""
        workdir = run.spec.working_dir
        if run.spec.mode == "exec_post":
            return await self._backend.exec_post(sprite, wrapped, workdir=workdir)
        if run.spec.mode == "service":
            return await self._open_service(sprite, wrapped, workdir)
        return await self._backend.exec(
            sprite,
            wrapped,
            workdir=workdir,
            tty=run.spec.tty,
            stdin=False,
            max_run_after_disconnect=0,
        )

    async def _open_service(self, sprite: str, wrapped: list[str], workdir: str) -> ExecSession:
        """Put this attempt's service, unless it is there already: put before a crash that
        lost the status write, it is followed again rather than put (and run) twice. An
        earlier attempt's service, put before such a crash and never recorded, is stopped:
        never two of the Run's commands at once."""
        exit_file = self._files.exit_file()
        name = service_name(exit_file)
        existing = {s.spec.name for s in await self._backend.list_services(sprite)}
        for number in range(1, len(self._recorder.status.attempts)):
            earlier = service_name(self._files.exit_file(self._recorder.tag(number)))
            if earlier in existing:
                await stop_service(self._backend, sprite, earlier)
        if name in existing:
            return self._service_session(sprite, name, replay=True)
        await self._backend.put_service(
            sprite, service_definition(name, wrapped, exit_file, workdir)
        )
        return self._service_session(sprite, name, replay=False)

    def _service_session(self, sprite: str, name: str, *, replay: bool) -> ServiceSession:
        return ServiceSession(
            self._backend,
            sprite,
            name,
            read_exit=self._files.read_exit_code,
            poll=self._timings.idle_poll,
            replay=replay,
        )

    async def reattach(self) -> ExecSession | None:
        """The session again if it is still running; None if it has ended."""
        session_id = self._recorder.status.session_id
        if session_id is None:
            return None
        sprite = self._files.require_sprite()
        if session_id.startswith(POST_PREFIX):
            return None  # an HTTP exec belongs to its request, which is gone
        if session_id.startswith(SESSION_PREFIX):
            return await self._reattach_service(sprite, session_id.removeprefix(SESSION_PREFIX))

        async def look() -> ExecSession | None:
            try:
                sessions = await self._backend.list_sessions(sprite)
                if all(s.id != session_id for s in sessions):
                    return None
                return await self._backend.attach(sprite, session_id)
            except NotFound:
                return None

        async def say(exc: AdapterError) -> None:
            self._recorder.set("Unknown", Reason.REATTACHING, f"re-attaching to the session: {exc}")
            await self._recorder.flush()

        try:
            return await self._retrying(look, on_failure=say)
        except SessionLostError as exc:
            log.warning("run %s: giving up re-attaching: %s", self._recorder.ref.name, exc)
            raise

    async def _reattach_service(self, sprite: str, name: str) -> ExecSession | None:
        """Services outlive connections: follow it again unless its command has ended."""
        deadline = self._clock.monotonic() + self._timings.reattach_deadline
        while True:
            try:
                info = await self._backend.get_service(sprite, name)
            except NotFound:
                return None
            except AdapterError as exc:
                if self._clock.monotonic() > deadline:
                    raise SessionLostError(str(exc)) from exc
                await self._stopper.sleep(1.0)
                continue
            if (
                info.status in ("stopped", "failed")
                or await self._files.read_exit_code() is not None
            ):
                # Over (the exit file tells how, if its command got that far): not followed
                # again, and stopped for good so that no restart runs anything more.
                await stop_service(self._backend, sprite, name)
                return None
            return self._service_session(sprite, name, replay=True)

    async def follow(
        self, run: Run, session: ExecSession, *, resumed: bool, attached: bool = False
    ) -> SessionEnd:
        """Follow a started (or re-attached) session to its end."""
        recorder = self._recorder
        if not attached:
            transition = RunTransition.RESUME_STARTED if resumed else RunTransition.EXEC_STARTED
            recorder.emit(recorder.receipts.for_transition(transition, key=recorder.tag()))
        recorder.set("Unknown", Reason.RUNNING, f"session {session.session_id} is running")
        await recorder.flush(force=True)
        try:
            return await self._stream(run, session, fresh=not attached)
        except SessionLostError as exc:
            log.info("run %s: session lost: %s", recorder.ref.name, exc)
            return SessionEnd(None, lost=True)

    async def kill(self, session_id: str) -> None:
        """Stop a session (already over: nothing to do). An HTTP exec is stopped by closing
        its request (the follower does on leaving); a service is stopped and removed."""
        sprite = self._files.require_sprite()
        with contextlib.suppress(AdapterError):
            if session_id.startswith(POST_PREFIX):
                return
            if session_id.startswith(SESSION_PREFIX):
                await stop_service(self._backend, sprite, session_id.removeprefix(SESSION_PREFIX))
                return
            await self._backend.kill_session(sprite, session_id, grace=5.0)

    def _degraded(self, transition: RunTransition, evidence: str) -> None:
        recorder = self._recorder
        key = f"{recorder.tag()}:{self._clock.monotonic()}"
        recorder.emit(recorder.receipts.for_transition(transition, key=key, evidence=evidence))

    async def _stream(self, run: Run, session: ExecSession, *, fresh: bool) -> SessionEnd:
        """Follow one session to its end, re-attaching when the socket drops.

        `fresh`: a session just started, whose command cannot have written to the outbox yet:
        its first outbox read waits `outbox_interval` (or an event line on stdout, or its end),
        where a re-attached one catches up at once. A short command then costs the sprite one
        outbox read, at its end."""
        engine = self._recorder.require_engine()
        first_read_in = self._timings.outbox_interval if fresh else 0.0
        while True:
            queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(maxsize=QUEUE_SIZE)
            pump = asyncio.create_task(
                _pump(session, queue), name=f"pump-{self._recorder.ref.name}"
            )
            try:
                end = await self._consume(run, session, queue, first_read_in)
            finally:
                pump.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await pump
                with contextlib.suppress(Exception):
                    await session.detach()
            if end is not None and end.exit_code == ALREADY_BEGUN:
                # Its wrapper refused (this session's command began elsewhere: a start
                # whose answer was lost, or a start made again after a crash before the
                # status write), or the command itself exited so: where is the command?
                found = await self._retrying(self._find_begun)
                if found is None or isinstance(found, int):
                    return SessionEnd(found)
                session = found
                self._adopt(session, "followed in place of a start that was refused")
                first_read_in = 0.0
                continue
            if end is not None:
                return end
            # The socket dropped without an exit frame: the outbox still has every event, and
            # what is printed from here until a re-attach (if any) is nobody's to see.
            engine.stdout_reattached()
            self._degraded(
                RunTransition.STDOUT_LOST, "the exec socket closed without an exit frame"
            )
            await self._files.read_outbox()
            first_read_in = 0.0
            reattached = await self.reattach()
            if reattached is None:
                return SessionEnd(await self._files.read_exit_code())
            session = reattached
            self._degraded(
                RunTransition.STDOUT_RESTORED, f"re-attached to session {session.session_id}"
            )
            self._recorder.set(
                "Unknown", Reason.RUNNING, f"session {session.session_id} re-attached"
            )
            await self._recorder.flush()

    def _adopt(self, session: ExecSession, why: str) -> None:
        """Follow `session` (this session's command, found running) from here on."""
        status = self._recorder.status
        status.session_id = session.session_id
        if status.attempts:
            status.attempts[-1].session_id = session.session_id
        self._recorder.receipts.set_session(session.session_id)
        self._recorder.require_engine().stdout_reattached()
        self._degraded(RunTransition.STDOUT_RESTORED, f"session {session.session_id} {why}")
        self._recorder.set("Unknown", Reason.RUNNING, f"session {session.session_id} {why}")
        self._recorder.changed()

    async def _consume(
        self,
        run: Run,
        session: ExecSession,
        queue: asyncio.Queue[tuple[str, Any]],
        first_read_in: float,
    ) -> SessionEnd | None:
        """Feed output and the outbox until exit (an end) or socket loss (None)."""
        recorder = self._recorder
        engine = recorder.require_engine()
        next_outbox = self._clock.monotonic() + first_read_in
        waiting_since: float | None = None
        while True:
            if self._stopper.stopped:
                raise Stop
            now = self._clock.monotonic()
            idle = self._timings.idle_poll
            wait = max(0.0, min(next_outbox - now, recorder.wait_time(idle), idle))
            try:
                first = await asyncio.wait_for(queue.get(), timeout=wait)
            except TimeoutError:
                first = ("tick", None)
            # Everything the pump has queued is fed before the next outbox read and status
            # check: one item per pass let a busy operator fall behind its sockets (the queue
            # full, the socket unread, its keepalive unanswered: dropped and re-attached).
            for kind, value in _drained(first, queue):
                if kind == "out":
                    recorder.active()
                    recorder.absorb(engine.feed_stdout(value))
                elif kind == "replay":
                    recorder.absorb(engine.feed_stdout(value, replay=True))
                elif kind == "exit":
                    return SessionEnd(int(value))  # the end reads the outbox (final)
                elif kind == "lost":
                    return None
            if engine.outbox_behind or self._clock.monotonic() >= next_outbox:
                await self._files.read_outbox()
                await self._on_outbox(run)
                next_outbox = self._clock.monotonic() + self._timings.outbox_interval
            if engine.gate == "waiting":
                waiting_since = waiting_since or self._clock.monotonic()
                grace = self._timings.waiting_exit_grace
                if self._clock.monotonic() - waiting_since >= grace:
                    # The protocol: once you emit WAITING, stop. It did not: it is stopped.
                    recorder.violation(
                        "work_after_waiting",
                        f"the session was still running {grace:g}s after its WAITING: stopped",
                    )
                    return await self._stop(session, "AfterWaiting")
            latest = self._view()
            if latest.spec.cancel:
                return await self._stop(session, "Canceled")
            if latest.has_timed_out(self._clock.now()):
                return await self._stop(session, "Timeout")
            await recorder.flush()

    async def _stop(self, session: ExecSession, why: str) -> SessionEnd:
        await self.kill(session.session_id)
        return SessionEnd(None, killed_for=why)  # the end reads the outbox (final)


def _drained(
    first: tuple[str, Any], queue: asyncio.Queue[tuple[str, Any]]
) -> list[tuple[str, Any]]:
    """`first` and what else the queue holds now (at most its size), with the consecutive
    stdout chunks of one kind joined: the engine splits lines across chunks itself, so one
    feed of the joined bytes is the same as one feed per chunk, for less work per chunk."""
    items = [first]
    for _ in range(QUEUE_SIZE):
        try:
            items.append(queue.get_nowait())
        except asyncio.QueueEmpty:
            break
    joined: list[tuple[str, Any]] = []
    run: list[bytes] = []
    for kind, value in items:
        if run and kind != joined[-1][0]:
            joined[-1] = (joined[-1][0], b"".join(run))
            run = []
        if kind in ("out", "replay"):
            if not run:
                joined.append((kind, b""))
            run.append(value)
        else:
            joined.append((kind, value))
    if run:
        joined[-1] = (joined[-1][0], b"".join(run))
    return joined


async def _pump(session: ExecSession, queue: asyncio.Queue[tuple[str, Any]]) -> None:
    try:
        async for chunk in session:
            if chunk.stream == "stdout":
                await queue.put(("replay" if chunk.replay else "out", chunk.data))
        code = session.exit_code
        await queue.put(("exit", code) if code is not None else ("lost", None))
    except ExitStatusUnknown:
        await queue.put(("lost", None))
    except AdapterError as exc:
        log.info("exec stream ended: %s", exc)
        await queue.put(("lost", None))


__all__ = ["SessionRunner"]
