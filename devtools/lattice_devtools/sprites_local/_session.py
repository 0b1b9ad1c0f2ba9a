"""Exec sessions: a real process (group) with its output fanned out to attached sockets.

A session outlives its sockets: detaching starts the `max_run_after_disconnect` clock
(0 = forever), attaching again stops it and replays the bounded scrollback. Each attached
socket has an ordered outbound queue; output waits when a socket falls more than
`HIGH_WATER` bytes behind, so a slow client slows the process (through the pipe) rather
than the server's memory growing.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pty
import shlex
import shutil
import signal
import struct
import subprocess
import termios
import time
from collections import deque
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal, Protocol

from lattice_devtools.sprites_local._launcher import DOT_SPRITE, WORKSPACE, ConfinedLauncher
from lattice_devtools.sprites_local._process import (
    ExitWatch,
    PipeWriter,
    exit_status,
    kill_group,
    reader_for,
)
from lattice_devtools.sprites_local._ring import OutputRing
from lattice_devtools.sprites_local._wire import SessionEntry, SessionInfoMessage, iso

STDOUT, STDERR = 1, 2
HIGH_WATER = 1 << 20
READ_CHUNK = 1024 * 1024
SIGNALS: dict[str, int] = {
    "INT": signal.SIGINT,
    "TERM": signal.SIGTERM,
    "HUP": signal.SIGHUP,
    "KILL": signal.SIGKILL,
    "QUIT": signal.SIGQUIT,
    "USR1": signal.SIGUSR1,
    "USR2": signal.SIGUSR2,
    "STOP": signal.SIGSTOP,
    "CONT": signal.SIGCONT,
    "WINCH": signal.SIGWINCH,
}


def parse_signal(name: str) -> int | None:
    """A signal number from `TERM`, `SIGTERM` or `15`; None if unknown."""
    text = name.strip().upper()
    if text.isdigit():
        number = int(text)
        return number if 0 < number < signal.NSIG else None
    return SIGNALS.get(text.removeprefix("SIG"))


@dataclass
class ExecParams:
    """What a client asked to run."""

    argv: list[str]
    env: dict[str, str] | None = None
    workdir: str | None = None
    path: str | None = None
    tty: bool = False
    cols: int = 80
    rows: int = 24
    stdin: bool = False
    max_run_after_disconnect: float = 10.0
    """Seconds the process outlives its last socket; 0 = forever."""


Item = tuple[Literal["out"], int, bytes] | tuple[Literal["text"], str] | tuple[Literal["exit"], int]


class Attachment:
    """One socket's view of a session: an ordered queue of frames to send."""

    def __init__(self, transport: asyncio.Transport | None) -> None:
        self.transport = transport
        self.closed = False
        self._items: deque[Item] = deque()
        self._queued = 0
        self._wakeup = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()

    def put(self, item: Item) -> None:
        if self.closed:
            return
        self._items.append(item)
        if item[0] == "out":
            self._queued += len(item[2])
            if self._queued > HIGH_WATER:
                self._room.clear()
        self._wakeup.set()

    async def get(self) -> Item | None:
        """The next frame, or None once the attachment is closed."""
        while not self._items:
            if self.closed:
                return None
            self._wakeup.clear()
            await self._wakeup.wait()
        item = self._items.popleft()
        if item[0] == "out":
            self._queued -= len(item[2])
            if self._queued <= HIGH_WATER:
                self._room.set()
        return item

    @property
    def lagging(self) -> bool:
        """More than HIGH_WATER bytes wait to be sent."""
        return self._queued > HIGH_WATER

    async def wait_room(self) -> None:
        await self._room.wait()

    def close(self) -> None:
        self.closed = True
        self._items.clear()
        self._queued = 0
        self._wakeup.set()
        self._room.set()

    def abort(self) -> None:
        """Drop the socket now: no exit frame, no close frame (a lost connection)."""
        self.close()
        if self.transport is not None:
            self.transport.abort()


class SessionHost(Protocol):
    """What a session tells its sprite."""

    def session_finished(self, session: Session) -> None: ...

    def session_activity(self) -> None: ...


class SpawnError(Exception):
    """The command could not be started; `status` is what a shell would report."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class _Stats:
    bytes_out: int = 0
    last_activity: float = field(default_factory=time.time)


class Session:
    """A running exec session of one sprite."""

    def __init__(
        self,
        session_id: str,
        params: ExecParams,
        *,
        host: SessionHost,
        scrollback: int,
        exit_grace: float,
    ) -> None:
        self.id = session_id
        self.params = params
        self.created = time.time()
        self.command = " ".join(shlex.quote(a) for a in params.argv)
        self.workdir = params.workdir or WORKSPACE
        self.exit_code: int | None = None
        self.lost = False
        self.finished = asyncio.Event()
        self.pgid: int | None = None
        self._host = host
        self._ring = OutputRing(scrollback)
        self._exit_grace = exit_grace
        self._attachments: list[Attachment] = []
        self._stats = _Stats()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stdin: PipeWriter | None = None
        self._master: int | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._read_transports: list[asyncio.BaseTransport] = []
        self._orphan_timer: asyncio.TimerHandle | None = None

    # -- lifecycle ------------------------------------------------------------------------
    async def start(
        self,
        launcher: ConfinedLauncher,
        *,
        root: Path,
        dot: Path,
        env: Mapping[str, str],
    ) -> None:
        """Spawn the process and start pumping its output (raises SpawnError, LauncherError)."""
        params = self.params
        executable = resolve_executable(params.path or params.argv[0], env, root=root, dot=dot)
        self.command = " ".join(shlex.quote(a) for a in [executable, *params.argv[1:]])
        if params.tty:
            master, slave = pty.openpty()
            _set_winsize(master, params.cols, params.rows)
            try:
                launcher.own(slave)
                self._proc = self._spawn(
                    launcher, root, dot, env, executable, slave, slave, slave, tty=True
                )
            except BaseException:
                os.close(master)
                raise
            finally:
                os.close(slave)
            self._master = master
            read_pipe = os.fdopen(os.dup(master), "rb", buffering=0)
            write_pipe = os.fdopen(os.dup(master), "wb", buffering=0)
            self._stdin = await PipeWriter.open(write_pipe)
            readers = [(STDOUT, await reader_for(read_pipe))]
        else:
            self._proc = self._spawn(
                launcher,
                root,
                dot,
                env,
                executable,
                subprocess.PIPE if params.stdin else subprocess.DEVNULL,
                subprocess.PIPE,
                subprocess.PIPE,
                tty=False,
            )
            assert self._proc.stdout is not None
            assert self._proc.stderr is not None
            for pipe in (self._proc.stdout, self._proc.stderr):
                _grow_pipe(pipe)
                launcher.own(pipe.fileno())
            if self._proc.stdin is not None:
                launcher.own(self._proc.stdin.fileno())
            if self._proc.stdin is not None:
                self._stdin = await PipeWriter.open(self._proc.stdin)
            readers = [
                (STDOUT, await reader_for(self._proc.stdout)),
                (STDERR, await reader_for(self._proc.stderr)),
            ]
        self.pgid = self._proc.pid
        self._read_transports = [transport for _, (_, transport) in readers]
        watch = ExitWatch(self._proc)
        pumps = [self._spawn_task(self._pump(stream, reader)) for stream, (reader, _) in readers]
        self._spawn_task(self._finish(watch, pumps))

    def _spawn(
        self,
        launcher: ConfinedLauncher,
        root: Path,
        dot: Path,
        env: Mapping[str, str],
        executable: str,
        stdin: int | IO[bytes],
        stdout: int | IO[bytes],
        stderr: int | IO[bytes],
        *,
        tty: bool,
    ) -> subprocess.Popen[bytes]:
        try:
            return launcher.spawn(
                self.params.argv,
                executable=executable,
                env=env,
                cwd=self.workdir,
                root=root,
                dot=dot,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                tty=tty,
            )
        except FileNotFoundError:
            raise SpawnError(f"{self.params.argv[0]}: command not found", 127) from None
        except PermissionError:
            raise SpawnError(f"{self.params.argv[0]}: permission denied", 126) from None
        except OSError as exc:
            raise SpawnError(f"{self.params.argv[0]}: {exc.strerror}", 126) from None

    def _spawn_task(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _pump(self, stream: int, reader: asyncio.StreamReader) -> None:
        while True:
            try:
                chunk = await reader.read(READ_CHUNK)
            except OSError:  # EIO from a PTY master once the terminal is gone
                return
            if not chunk:
                return
            self._ring.append(stream, chunk)
            self._stats.bytes_out += len(chunk)
            self._stats.last_activity = time.time()
            self._host.session_activity()
            waiting = []
            for attachment in self._attachments:
                attachment.put(("out", stream, chunk))
                if attachment.lagging:
                    waiting.append(attachment.wait_room())
            if waiting:
                await asyncio.gather(*waiting)

    async def _finish(self, watch: ExitWatch, pumps: list[asyncio.Task[None]]) -> None:
        try:
            await watch.done.wait()
            # Output still in the pipes belongs before the exit frame; background children
            # that keep a pipe open do not hold the session up beyond the grace period.
            _, pending = await asyncio.wait(pumps, timeout=self._exit_grace)
            for task in pending:
                task.cancel()
            for transport in self._read_transports:
                transport.close()
            assert self._proc is not None
            assert self._proc.returncode is not None
            self.exit_code = exit_status(self._proc.returncode)
            if not self.lost:
                for attachment in self._attachments:
                    attachment.put(("exit", self.exit_code))
        finally:
            watch.close()
            self._cancel_orphan_timer()
            if self._stdin is not None:
                self._stdin.close()
            if self._master is not None:
                os.close(self._master)
                self._master = None
            self.finished.set()
            self._host.session_finished(self)

    # -- attachments ----------------------------------------------------------------------
    def attach(self, transport: asyncio.Transport | None, *, fresh: bool) -> Attachment:
        """A new socket: session_info, then the scrollback (on attach), then live output."""
        attachment = Attachment(transport)
        replay = [] if fresh else self._ring.snapshot()
        info = SessionInfoMessage(
            session_id=self.id,
            command=self.command,
            created=int(self.created),
            cols=self.params.cols if self.params.tty else 0,
            rows=self.params.rows if self.params.tty else 0,
            is_owner=not self._attachments,
            tty=self.params.tty,
            scrollback_bytes=sum(len(data) for _, data in replay),
        )
        attachment.put(("text", info.model_dump_json()))
        for stream, data in replay:
            attachment.put(("out", stream, data))
        self._attachments.append(attachment)
        self._cancel_orphan_timer()
        return attachment

    def detach(self, attachment: Attachment) -> None:
        attachment.close()
        if attachment in self._attachments:
            self._attachments.remove(attachment)
        if self._attachments or self.finished.is_set():
            return
        limit = self.params.max_run_after_disconnect
        if limit > 0:
            loop = asyncio.get_running_loop()
            self._orphan_timer = loop.call_later(limit, self._orphaned)

    def _orphaned(self) -> None:
        self._orphan_timer = None
        if not self._attachments and not self.finished.is_set():
            self.kill(signal.SIGKILL)

    def _cancel_orphan_timer(self) -> None:
        if self._orphan_timer is not None:
            self._orphan_timer.cancel()
            self._orphan_timer = None

    def drop_sockets(self) -> int:
        """Abort every attached socket (the process keeps running); how many were dropped."""
        dropped = list(self._attachments)
        for attachment in dropped:
            attachment.abort()
            self.detach(attachment)
        return len(dropped)

    def lose(self) -> None:
        """The sprite went away under the session: drop its sockets, then kill it."""
        self.lost = True
        self.drop_sockets()
        self.kill(signal.SIGKILL)

    # -- input and signals ----------------------------------------------------------------
    async def write_stdin(self, data: bytes) -> None:
        if self._stdin is not None and data:
            with contextlib.suppress(OSError):
                await self._stdin.write(data)

    def close_stdin(self) -> None:
        if self._stdin is not None and not self.params.tty:
            self._stdin.close()

    def resize(self, cols: int, rows: int) -> None:
        if self._master is not None:
            _set_winsize(self._master, cols, rows)
            self.params.cols, self.params.rows = cols, rows

    def kill(self, sig: int) -> bool:
        """Signal the whole process group; False if it is gone."""
        if self.pgid is None:
            return False
        return kill_group(self.pgid, sig)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # -- listing --------------------------------------------------------------------------
    def entry(self) -> SessionEntry:
        age = max(time.time() - self.created, 1e-3)
        return SessionEntry(
            id=self.id,
            command=self.command,
            workdir=self.workdir,
            created=iso_ts(self.created),
            tty=self.params.tty,
            bytes_per_second=round(self._stats.bytes_out / age, 3),
            is_active=bool(self._attachments),
            last_activity=iso_ts(self._stats.last_activity),
        )


def iso_ts(seconds: float) -> str:
    return iso(datetime.fromtimestamp(seconds, UTC)) or ""


def resolve_executable(name: str, env: Mapping[str, str], *, root: Path, dot: Path) -> str:
    """The absolute path the sprite's PATH gives `name` (as seen inside the sprite)."""
    if "/" in name:
        return name
    for entry in env.get("PATH", os.defpath).split(":"):
        if not entry:
            continue
        host_dir = _host_dir(entry, root=root, dot=dot)
        found = shutil.which(name, path=str(host_dir))
        if found:
            return f"{entry.rstrip('/')}/{name}"
    return name


def _host_dir(entry: str, *, root: Path, dot: Path) -> Path:
    for mount, host in ((WORKSPACE, root), (DOT_SPRITE, dot)):
        if entry == mount or entry.startswith(mount + "/"):
            return host / entry[len(mount) :].lstrip("/")
    return Path(entry)


def _set_winsize(fd: int, cols: int, rows: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _grow_pipe(pipe: IO[bytes]) -> None:
    # Bigger pipes mean fewer wake-ups for chatty processes; best effort.
    with contextlib.suppress(OSError):
        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)


__all__ = [
    "Attachment",
    "ExecParams",
    "Item",
    "Session",
    "SessionHost",
    "SpawnError",
    "parse_signal",
    "resolve_executable",
]
