"""An in-memory Sprites backend for unit tests of the Run driver.

Files, checkpoints and exec sessions live in memory. A session runs a *program*: an async
function the test registers by the command's first word, which writes to stdout, appends
to the outbox and exits through a `FakeProcess`. Faults are queued per method
(`backend.fail("exec", TransportError(...))`) and raised by the next call.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lattice_operator.api.v1alpha1.sprite import BackendStatus
from lattice_operator.ports.errors import ExitStatusUnknown, NotFound
from lattice_operator.ports.sprites import (
    CheckpointInfo,
    DetachOnExit,
    ExecOutput,
    FileStat,
    KillResult,
    ServiceEvent,
    ServiceInfo,
    SessionInfo,
    SpriteInfo,
    SpriteService,
)
from lattice_operator.reconcilers.run.decisions import ALREADY_BEGUN, BEGUN_SUFFIX

OUTBOX = "/workspace/.lattice/outbox.jsonl"
RESUME = "/workspace/.lattice/resume.json"
PREVIOUS_RESUME = "/workspace/.lattice/resume.previous.json"
SHM = "/dev/shm/"
"""Memory at the real service: never in a checkpoint, not brought back by a restore."""
PREFIX = "LATTICE_EVENT "

Program = Callable[["FakeProcess"], Awaitable[None]]


def unwrap(command: Sequence[str]) -> tuple[dict[str, str], str, list[str]]:
    """(environment, exit file, argv) of a command the driver wrapped."""
    env, exit_file, _, argv = unwrap_all(command)
    return env, exit_file, argv


def unwrap_all(command: Sequence[str]) -> tuple[dict[str, str], str, bool, list[str]]:
    """(environment, exit file, claim, argv) of a command the driver wrapped; a command run
    as it is (an environment step's `sh -c`) has none of the wrapper's parts."""
    if command[0] != "env":
        return {}, "", False, list(command)
    env: dict[str, str] = {}
    i = 1
    while command[i] != "sh":
        key, _, value = command[i].partition("=")
        env[key] = value
        i += 1
    marker = command.index("lattice-run", i)
    mode = command[marker + 2]
    assert mode in ("claim", "-"), command
    return env, command[marker + 1], mode == "claim", list(command[marker + 3 :])


class FakeProcess:
    """One command running in a fake sprite."""

    def __init__(self, backend: FakeBackend, sprite: str, session_id: str, command: list[str]):
        self.backend = backend
        self.sprite = sprite
        self.session_id = session_id
        self.command = " ".join(command)
        self.env, self.exit_file, claim, self.argv = unwrap_all(command)
        self.refused = False
        """The wrapper found the session's marker taken: nothing runs, no exit file."""
        if self.exit_file:
            marker = (sprite, self.exit_file + BEGUN_SUFFIX)
            self.refused = marker in backend.files
            backend.files[marker] = b""
        if claim and not self.refused:  # what the wrapper does on a Run's first session
            files = backend.files
            resume = files.pop((sprite, RESUME), None)
            if resume is not None:
                files[(sprite, PREVIOUS_RESUME)] = resume
            length = len(files.get((sprite, OUTBOX), b""))
            files[(sprite, f"{self.exit_file}.start")] = f"{length}\n".encode()
        self.scrollback: list[bytes] = []
        self.listeners: list[asyncio.Queue[tuple[str, Any]]] = []
        self.exit_code: int | None = None
        self.finished = asyncio.Event()
        self.killed = False
        self.task: asyncio.Task[None] | None = None

    # -- what a program does ------------------------------------------------------------

    def stdout(self, data: bytes | str) -> None:
        chunk = data.encode() if isinstance(data, str) else data
        self.scrollback.append(chunk)
        for queue in self.listeners:
            queue.put_nowait(("out", chunk))

    def event(
        self,
        event_type: str,
        payload: dict[str, Any],
        *,
        outbox: bool = True,
        stdout: bool = True,
        **override: Any,
    ) -> str:
        """Emit one protocol event the way the protocol asks: outbox first, then stdout."""
        envelope = {
            "protocol_version": "v1",
            "event_type": event_type,
            "sprite_id": self.env["LATTICE_SPRITE_ID"],
            "work_item_id": self.env["LATTICE_WORK_ITEM_ID"],
            "timestamp": "2026-01-15T10:30:00Z",
            "payload": payload,
            **override,
        }
        line = json.dumps(envelope)
        if outbox:
            self.backend.append(self.sprite, OUTBOX, (line + "\n").encode())
        if stdout:
            self.stdout(PREFIX + line + "\n")
        return line

    def exit(self, code: int) -> None:
        """End the command: the wrapper writes the exit file, then the exit frame goes out."""
        if self.finished.is_set():
            return
        if self.exit_file:
            self.backend.files[(self.sprite, self.exit_file)] = f"{code}\n".encode()
        self._end(code)

    def drop_sockets(self) -> None:
        """Every attachment loses its socket without an exit frame; the process runs on."""
        for queue in self.listeners:
            queue.put_nowait(("drop", None))
        self.listeners.clear()

    def _end(self, code: int | None) -> None:
        self.exit_code = code
        self.finished.set()
        for queue in self.listeners:
            queue.put_nowait(("exit", code))
        self.listeners.clear()


class FakeSession(DetachOnExit):
    """One attachment to a FakeProcess (the ExecSession port)."""

    def __init__(self, process: FakeProcess, *, replay: bool) -> None:
        self._process = process
        self._queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._exit: int | None = None
        if replay:
            kept, room = [], process.backend.scrollback_bytes
            for chunk in reversed(process.scrollback):  # the newest, as a bounded buffer keeps
                if room is not None and len(chunk) > room:
                    break
                kept.append(chunk)
                room = None if room is None else room - len(chunk)
            for chunk in reversed(kept):
                self._queue.put_nowait(("replay", chunk))
        if process.finished.is_set():
            self._queue.put_nowait(("exit", process.exit_code))
        else:
            process.listeners.append(self._queue)

    @property
    def session_id(self) -> str:
        return self._process.session_id

    @property
    def tty(self) -> bool:
        return False

    @property
    def exit_code(self) -> int | None:
        return self._exit

    async def __aiter__(self) -> AsyncIterator[ExecOutput]:
        while True:
            kind, value = await self._queue.get()
            if kind in ("out", "replay"):
                yield ExecOutput(stream="stdout", data=value, replay=kind == "replay")
            elif kind == "exit":
                if value is None:
                    raise ExitStatusUnknown("killed", session_id=self.session_id)
                self._exit = int(value)
                return
            else:
                raise ExitStatusUnknown("socket dropped", session_id=self.session_id)

    async def write_stdin(self, data: bytes) -> None:
        raise NotImplementedError

    async def close_stdin(self) -> None:
        raise NotImplementedError

    async def resize(self, cols: int, rows: int) -> None:
        raise NotImplementedError

    async def signal(self, name: str) -> None:
        raise NotImplementedError

    async def wait(self) -> int:
        async for _ in self:
            pass
        assert self._exit is not None
        return self._exit

    async def detach(self) -> None:
        if self._queue in self._process.listeners:
            self._process.listeners.remove(self._queue)


@dataclass
class Call:
    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


class FakeBackend:
    """The SpriteBackend port, in memory (only what the Run driver uses)."""

    def __init__(self) -> None:
        self.files: dict[tuple[str, str], bytes] = {}
        self.modes: dict[tuple[str, str], int] = {}
        self.programs: dict[str, Program] = {}
        self.processes: list[FakeProcess] = []
        self.checkpoints: dict[str, list[tuple[CheckpointInfo, dict[str, bytes]]]] = {}
        self.calls: list[Call] = []
        self.services: dict[tuple[str, str], tuple[SpriteService, FakeProcess]] = {}
        self.stopped_services: set[tuple[str, str]] = set()
        self._faults: dict[str, list[BaseException]] = {}
        self.sprite_status: BackendStatus = "warm"
        """What get_sprite reports; an exec makes it running."""
        self.status_reads: list[str] = []
        """Sprites whose state was read (kept out of `calls`: the sessions' order)."""
        self.scrollback_bytes: int | None = None
        """What an attach replays at most (the newest output); None: all of it."""
        self._lost_answers: list[tuple[str, BaseException]] = []
        self.held_starts: list[tuple[str, list[str]]] = []
        """Execs whose answer was lost and that the backend has not started yet."""

    # -- test controls -----------------------------------------------------------------

    def program(self, name: str) -> Callable[[Program], Program]:
        """Register the program run for commands whose first word is `name`."""

        def register(fn: Program) -> Program:
            self.programs[name] = fn
            return fn

        return register

    def fail(self, method: str, *errors: BaseException) -> None:
        """The next calls of `method` raise these, in order."""
        self._faults.setdefault(method, []).extend(errors)

    def lose_exec_answer(self, fate: str, error: BaseException) -> None:
        """The next exec raises `error` after the request reached the backend, which
        `fate`: "started" the command, "dropped" it, or holds it ("late": started by
        `start_held()`)."""
        assert fate in ("started", "dropped", "late"), fate
        self._lost_answers.append((fate, error))

    def start_held(self) -> list[FakeSession]:
        """Start the execs held back by a lost answer (`lose_exec_answer("late")`)."""
        held, self.held_starts = self.held_starts, []
        return [self._spawn(name, command, f"s{len(self.processes) + 1}") for name, command in held]

    def append(self, sprite: str, path: str, data: bytes) -> None:
        self.files[(sprite, path)] = self.files.get((sprite, path), b"") + data

    def read(self, sprite: str, path: str) -> bytes | None:
        return self.files.get((sprite, path))

    def called(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def running(self) -> list[FakeProcess]:
        return [p for p in self.processes if not p.finished.is_set()]

    def _enter(self, method: str, *args: Any, **kwargs: Any) -> None:
        self.calls.append(Call(method, args, kwargs))
        queued = self._faults.get(method)
        if queued:
            raise queued.pop(0)

    # -- sprites -----------------------------------------------------------------------

    async def get_sprite(self, name: str) -> SpriteInfo:
        self.status_reads.append(name)
        queued = self._faults.get("get_sprite")
        if queued:
            raise queued.pop(0)
        return SpriteInfo(id=f"sprite-{name}", name=name, status=self.sprite_status)

    # -- sessions ----------------------------------------------------------------------

    async def exec(
        self,
        name: str,
        command: Sequence[str],
        *,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
        tty: bool = False,
        stdin: bool = False,
        max_run_after_disconnect: float | None = None,
    ) -> FakeSession:
        self._enter("exec", name, list(command))
        if self._lost_answers:
            fate, error = self._lost_answers.pop(0)
            if fate == "started":
                self._spawn(name, command, f"s{len(self.processes) + 1}")
            elif fate == "late":
                self.held_starts.append((name, list(command)))
            raise error
        return self._spawn(name, command, f"s{len(self.processes) + 1}")

    async def exec_post(
        self,
        name: str,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
        stdin: bytes | None = None,
    ) -> FakeSession:
        """The HTTP exec: a session with a local id (`post-…`) that cannot be attached."""
        self._enter("exec_post", name, list(command))
        return self._spawn(name, command, f"post-{len(self.processes) + 1}")

    def _spawn(self, name: str, command: Sequence[str], session_id: str) -> FakeSession:
        process = FakeProcess(self, name, session_id, list(command))
        program = self.programs[process.argv[0]]
        self.processes.append(process)
        self.sprite_status = "running"
        session = FakeSession(process, replay=False)
        if process.refused:
            process._end(ALREADY_BEGUN)
            return session

        async def run() -> None:
            await program(process)
            process.exit(0)  # a program that returns exits with status 0

        process.task = asyncio.create_task(run(), name=f"fake-{process.session_id}")
        return session

    async def attach(self, name: str, session_id: str) -> FakeSession:
        self._enter("attach", name, session_id)
        process = self._process(session_id)
        if process.finished.is_set():
            raise NotFound(f"session {session_id} has ended")
        return FakeSession(process, replay=True)

    async def list_sessions(self, name: str) -> list[SessionInfo]:
        self._enter("list_sessions", name)
        return [
            SessionInfo(id=p.session_id, command=p.command)
            for p in self.running()
            if p.sprite == name
        ]

    async def kill_session(
        self, name: str, session_id: str, *, signal: str = "SIGTERM", grace: float = 10.0
    ) -> KillResult:
        self._enter("kill_session", name, session_id)
        process = self._process(session_id)
        if process.finished.is_set():
            raise NotFound(f"session {session_id} has ended")
        process.killed = True
        if process.task is not None:
            process.task.cancel()
        process._end(None)
        return KillResult(exit_code=143)

    def _process(self, session_id: str) -> FakeProcess:
        for process in self.processes:
            if process.session_id == session_id:
                return process
        raise NotFound(f"no session {session_id}")

    # -- services (what the Run mode `service` uses) -------------------------------------

    async def list_services(self, name: str) -> list[ServiceInfo]:
        self._enter("list_services", name)
        return [
            self._service_info(sprite, svc) for (sprite, svc) in self.services if sprite == name
        ]

    async def get_service(self, name: str, service_name: str) -> ServiceInfo:
        self._enter("get_service", name, service_name)
        if (name, service_name) not in self.services:
            raise NotFound(f"service {service_name!r} not found")
        return self._service_info(name, service_name)

    async def put_service(self, name: str, service: SpriteService) -> list[ServiceEvent]:
        """Runs the wrapped command the service's shell runs (`args` after its marker)."""
        self._enter("put_service", name, service.name)
        assert service.args[2] == "lattice-service", service.args
        wrapped = service.args[4:]
        session = self._spawn(name, wrapped, f"svc-{len(self.processes) + 1}")
        self.services[(name, service.name)] = (service, session._process)
        return [ServiceEvent(type="started"), ServiceEvent(type="complete")]

    async def stop_service(self, name: str, service_name: str) -> list[ServiceEvent]:
        self._enter("stop_service", name, service_name)
        if (name, service_name) not in self.services:
            raise NotFound(f"service {service_name!r} not found")
        _, process = self.services[(name, service_name)]
        if not process.finished.is_set():
            process.killed = True
            if process.task is not None:
                process.task.cancel()
            process._end(None)
        self.stopped_services.add((name, service_name))
        return [ServiceEvent(type="stopped"), ServiceEvent(type="complete")]

    async def delete_service(self, name: str, service_name: str) -> None:
        self._enter("delete_service", name, service_name)
        if self.services.pop((name, service_name), None) is None:
            raise NotFound(f"service {service_name!r} not found")

    async def service_logs(
        self, name: str, service_name: str, *, lines: int = 0, follow: float = 0.0
    ) -> AsyncIterator[ServiceEvent]:
        self._enter("service_logs", name, service_name)
        if (name, service_name) not in self.services:
            raise NotFound(f"service {service_name!r} not found")
        _, process = self.services[(name, service_name)]
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        if lines > 0:
            for chunk in process.scrollback:
                yield ServiceEvent(type="stdout", data=chunk.decode())
        yield ServiceEvent(type="complete") if follow <= 0 else ServiceEvent(type="started")
        if follow <= 0:
            return
        process.listeners.append(queue)
        try:
            while True:
                kind, value = await queue.get()
                if kind == "out":
                    yield ServiceEvent(type="stdout", data=value.decode())
                # An exit parks the service's shell: the log goes quiet, it does not end.
        finally:
            if queue in process.listeners:
                process.listeners.remove(queue)

    def _service_info(self, sprite: str, service_name: str) -> ServiceInfo:
        definition, _ = self.services[(sprite, service_name)]
        stopped = (sprite, service_name) in self.stopped_services
        return ServiceInfo(spec=definition, status="stopped" if stopped else "running")

    # -- files -------------------------------------------------------------------------

    async def read_file(
        self, name: str, path: str, *, offset: int = 0, limit: int | None = None
    ) -> bytes:
        self._enter("read_file", name, path, offset=offset, limit=limit)
        data = self.files.get((name, path))
        if data is None:
            raise NotFound(f"{path}: no such file")
        return data[offset:] if limit is None else data[offset : offset + limit]

    async def write_file(
        self, name: str, path: str, data: bytes, *, mode: int = 0o644, atomic: bool = True
    ) -> None:
        self._enter("write_file", name, path)
        self.files[(name, path)] = data
        self.modes[(name, path)] = mode

    async def rename(self, name: str, source: str, dest: str) -> None:
        self._enter("rename", name, source, dest)
        if (name, source) not in self.files:
            raise NotFound(f"{source}: no such file")
        self.files[(name, dest)] = self.files.pop((name, source))

    async def stat(self, name: str, path: str) -> FileStat:
        self._enter("stat", name, path)
        return self._stat(name, path)

    async def lstat(self, name: str, path: str) -> FileStat:
        self._enter("lstat", name, path)
        return self._stat(name, path)  # no symlinks here

    def _stat(self, name: str, path: str) -> FileStat:
        leaf = path.rsplit("/", 1)[-1]
        data = self.files.get((name, path))
        if data is not None:
            return FileStat(path=path, name=leaf, size=len(data))
        if any(s == name and p.startswith(path + "/") for s, p in self.files):
            return FileStat(path=path, name=leaf, size=0, is_dir=True)
        raise NotFound(f"{path}: no such file")

    async def delete_file(self, name: str, path: str) -> None:
        self._enter("delete_file", name, path)
        if self.files.pop((name, path), None) is None:
            raise NotFound(f"{path}: no such file")

    # -- checkpoints -------------------------------------------------------------------

    async def create_checkpoint(self, name: str, comment: str = "") -> CheckpointInfo:
        self._enter("create_checkpoint", name, comment)
        taken = self.checkpoints.setdefault(name, [])
        info = CheckpointInfo(
            id=f"v{max((int(i.id[1:]) for i, _ in taken), default=0) + 1}",
            comment=comment,
            create_time=datetime.now(UTC),
        )
        taken.append((info, self._snapshot(name)))
        return info

    async def list_checkpoints(self, name: str) -> list[CheckpointInfo]:
        self._enter("list_checkpoints", name)
        return [info for info, _ in self.checkpoints.get(name, [])]

    async def restore_checkpoint(self, name: str, checkpoint_id: str) -> None:
        self._enter("restore_checkpoint", name, checkpoint_id)
        for info, snapshot in self.checkpoints.get(name, []):
            if info.id == checkpoint_id:
                self.files = {k: v for k, v in self.files.items() if k[0] != name}
                self.files.update({(name, path): data for path, data in snapshot.items()})
                return
        raise NotFound(f"no checkpoint {checkpoint_id}")

    async def delete_checkpoint(self, name: str, checkpoint_id: str) -> None:
        self._enter("delete_checkpoint", name, checkpoint_id)
        taken = self.checkpoints.get(name, [])
        kept = [(info, snap) for info, snap in taken if info.id != checkpoint_id]
        if len(kept) == len(taken):
            raise NotFound(f"no checkpoint {checkpoint_id}")
        self.checkpoints[name] = kept

    def take_checkpoint(self, sprite: str, comment: str = "") -> str:
        """What `sprite-checkpoint` inside the sprite does (no call recorded)."""
        taken = self.checkpoints.setdefault(sprite, [])
        info = CheckpointInfo(id=f"v{len(taken) + 1}", comment=comment)
        taken.append((info, self._snapshot(sprite)))
        return info.id

    def _snapshot(self, sprite: str) -> dict[str, bytes]:
        """What a checkpoint keeps of a sprite: its files, never /dev/shm."""
        return {
            path: data
            for (owner, path), data in self.files.items()
            if owner == sprite and not path.startswith(SHM)
        }

    async def aclose(self) -> None:
        for process in self.running():
            if process.task is not None:
                process.task.cancel()


__all__ = ["FakeBackend", "FakeProcess", "FakeSession", "Program", "unwrap"]
