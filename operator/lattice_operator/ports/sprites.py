"""The Sprites backend port: what the Sprite and Run controllers ask of a Sprites service.

`SpriteBackend` is implemented by `lattice_adapters.sprites.SpritesAdapter` (the Fly.io
Sprites API, or the local Sprites-compatible server). Every method is async; every failure
is an exception of `lattice_operator.ports.errors`, each carrying a Lifeloop failure class.

Inputs reuse the CRD models where they already say the right thing (`SpriteService`,
`NetworkRule`); outputs are small frozen models defined here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Literal, Protocol, Self

from pydantic import BaseModel, ConfigDict

from lattice_operator.api.v1alpha1.sprite import (
    BackendStatus,
    NetworkRule,
    SpriteService,
    UrlAuth,
)

OutputStream = Literal["stdout", "stderr"]
ServiceStatus = Literal["stopped", "starting", "running", "stopping", "failed", "unknown"]


class _Frozen(BaseModel):
    # No use_attribute_docstrings: no schema is made of these, and reading the docstrings
    # when the class is defined is start-up CPU (see modeling.ApiModel).
    model_config = ConfigDict(frozen=True, extra="forbid")


class SpriteInfo(_Frozen):
    """A sprite as the backend reports it."""

    id: str
    """The backend's id (`sprite-<uuid>` at Fly.io)."""
    name: str
    """The sprite's name, unique per organisation."""
    organization: str = ""
    """The organisation that owns it."""
    url: str | None = None
    """The sprite's URL."""
    url_auth: UrlAuth | None = None
    """Who may use the URL: `sprite` (organisation credentials) or `public`."""
    status: BackendStatus
    """cold (stopped), warm (suspended) or running."""
    labels: tuple[str, ...] = ()
    """Labels stored with the sprite."""
    created_at: datetime | None = None
    """When it was created."""
    updated_at: datetime | None = None
    """When it was last changed."""
    last_running_at: datetime | None = None
    """When it last ran (if the backend says)."""
    last_warming_at: datetime | None = None
    """When it last went warm (if the backend says)."""


class SpritePage(_Frozen):
    """One page of a sprite listing."""

    sprites: tuple[SpriteInfo, ...]
    """The sprites on this page, in the backend's order."""
    has_more: bool
    """Whether another page follows."""
    next_token: str | None = None
    """Pass as `continuation_token` to get the next page."""
    running: int = 0
    """How many of the organisation's sprites are running (all pages)."""
    warm: int = 0
    """How many are warm (all pages)."""
    cold: int = 0
    """How many are cold (all pages)."""


class ExecOutput(_Frozen):
    """A chunk of a session's output, as it arrived."""

    stream: OutputStream
    """stdout or stderr (a TTY session merges both into stdout)."""
    data: bytes
    """The bytes, unmodified; lines may be split across chunks."""
    replay: bool = False
    """True for scrollback replayed on attach: output that an earlier attachment may have seen."""


class SessionInfo(_Frozen):
    """An exec session listed by the backend (sessions vanish when their process exits)."""

    id: str
    """The session id to attach to or kill."""
    command: str = ""
    """The resolved command line."""
    workdir: str = ""
    """Its working directory."""
    tty: bool = False
    """Whether it runs on a pseudo-terminal."""
    created: datetime | None = None
    """When it started."""
    is_active: bool = False
    """Whether a client is attached (unreliable at Fly.io)."""
    last_activity: datetime | None = None
    """When it last produced output."""


class KillEvent(_Frozen):
    """One line of a kill's progress stream."""

    type: str
    """signal, timeout, exited, killed, error or complete."""
    message: str = ""
    """Human-readable text."""


class KillResult(_Frozen):
    """The outcome of killing a session."""

    exit_code: int | None
    """The process's exit status (128+signal when killed), if the backend reported it."""
    events: tuple[KillEvent, ...] = ()
    """The progress lines, in order."""


class FileStat(_Frozen):
    """Metadata of a path inside a sprite."""

    path: str
    """Absolute path inside the sprite."""
    name: str
    """Final path component."""
    size: int
    """Size in bytes."""
    mode: str = "0644"
    """Permission bits as an octal string."""
    is_dir: bool = False
    """Whether it is a directory."""
    is_symlink: bool = False
    """Whether it is a symlink (only `lstat` describes links; `stat` follows them)."""
    mod_time: datetime | None = None
    """Last modification time."""


class CheckpointInfo(_Frozen):
    """A filesystem checkpoint of a sprite."""

    id: str
    """Checkpoint id (`v0`, `v1`, …)."""
    create_time: datetime | None = None
    """When it was taken."""
    comment: str = ""
    """The comment given at creation."""
    source_id: str | None = None
    """The checkpoint this one descends from, if known."""


class ServiceInfo(_Frozen):
    """A supervised service and its current state."""

    spec: SpriteService
    """The definition as the backend stores it."""
    status: ServiceStatus = "unknown"
    """stopped, starting, running, stopping or failed."""
    pid: int | None = None
    """Process id while running."""
    restart_count: int = 0
    """How often the backend restarted it after a crash."""
    started_at: datetime | None = None
    """When the current process started."""
    error: str | None = None
    """The last error, if any."""


class ServiceEvent(_Frozen):
    """One line of a service operation's progress stream."""

    type: str
    """started, stdout, stderr, exit, error, stopping, stopped or complete."""
    data: str | None = None
    """Output or message text."""
    exit_code: int | None = None
    """Exit status, on exit/stopped."""


class ExecSession(Protocol):
    """A live exec session: the process runs inside the sprite, this is one attachment to it.

    Iterate to receive output as it arrives. The iteration ends after the exit frame; if the
    socket is lost first it raises `ExitStatusUnknown` (or another transport error) and the
    process may still be running: list sessions and `attach` again by `session_id`.
    Leaving the `async with` block (or `detach()`) closes the socket without killing the
    process.
    """

    @property
    def session_id(self) -> str:
        """The backend's session id, known as soon as the session is open."""
        ...

    @property
    def tty(self) -> bool:
        """Whether the session runs on a pseudo-terminal."""
        ...

    @property
    def exit_code(self) -> int | None:
        """The exit status once the exit frame arrived, else None."""
        ...

    def __aiter__(self) -> AsyncIterator[ExecOutput]:
        """Output chunks in arrival order (replayed scrollback first, flagged `replay`)."""
        ...

    async def write_stdin(self, data: bytes) -> None:
        """Send bytes to the process's stdin."""
        ...

    async def close_stdin(self) -> None:
        """Send end-of-file on stdin (non-TTY sessions)."""
        ...

    async def resize(self, cols: int, rows: int) -> None:
        """Resize the pseudo-terminal (TTY sessions)."""
        ...

    async def signal(self, name: str) -> None:
        """Deliver a signal (TERM, INT, HUP, KILL, QUIT, USR1, USR2) to the process group."""
        ...

    async def wait(self) -> int:
        """Drain output until the exit frame and return the exit status (0-255)."""
        ...

    async def detach(self) -> None:
        """Close this attachment; the process keeps running per max_run_after_disconnect."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class DetachOnExit:
    """The `async with` of an `ExecSession` implementation: leaving the block detaches (the
    process keeps running), as the port says. Subclasses define `detach`."""

    async def detach(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.detach()


class SpriteBackend(Protocol):
    """A Sprites service: sprites, exec sessions, files, checkpoints, services, policy."""

    # -- sprites --------------------------------------------------------------------------
    async def create_sprite(
        self, name: str, *, url_auth: UrlAuth = "sprite", labels: Sequence[str] = ()
    ) -> SpriteInfo:
        """Create a sprite (cold until first use). Conflict if the name is taken."""
        ...

    async def get_sprite(self, name: str) -> SpriteInfo:
        """Fetch one sprite. NotFound if it does not exist."""
        ...

    async def list_sprites(
        self,
        *,
        prefix: str | None = None,
        page_size: int = 50,
        continuation_token: str | None = None,
    ) -> SpritePage:
        """One page of sprites whose names start with `prefix`."""
        ...

    def iter_sprites(self, *, prefix: str | None = None) -> AsyncIterator[SpriteInfo]:
        """Every sprite whose name starts with `prefix`, following the pages."""
        ...

    async def update_sprite(
        self,
        name: str,
        *,
        url_auth: UrlAuth | None = None,
        labels: Sequence[str] | None = None,
    ) -> SpriteInfo:
        """Change URL auth and/or replace the labels."""
        ...

    async def delete_sprite(self, name: str) -> None:
        """Delete a sprite, its processes and files. NotFound if it does not exist."""
        ...

    # -- exec -----------------------------------------------------------------------------
    async def exec(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
        tty: bool = False,
        cols: int = 80,
        rows: int = 24,
        stdin: bool = True,
        max_run_after_disconnect: float | None = None,
    ) -> ExecSession:
        """Start a command and return its open session (the session id is known at once).

        `env`, when given, replaces the sprite's default environment. `max_run_after_disconnect`
        is how long (seconds) the process outlives a lost socket; 0 means forever, None the
        backend default (10 s without a TTY, forever with one). Never retried: a failure
        after the request was sent may have started the process.
        """
        ...

    async def attach(self, name: str, session_id: str) -> ExecSession:
        """Re-attach to a running session; its scrollback arrives first, flagged `replay`."""
        ...

    async def list_sessions(self, name: str) -> list[SessionInfo]:
        """The sprite's running sessions."""
        ...

    async def kill_session(
        self, name: str, session_id: str, *, signal: str = "SIGTERM", grace: float = 10.0
    ) -> KillResult:
        """Signal a session's process group, then SIGKILL after `grace` seconds (0: no wait)."""
        ...

    # -- files ----------------------------------------------------------------------------
    async def read_file(
        self, name: str, path: str, *, offset: int = 0, limit: int | None = None
    ) -> bytes:
        """The file's bytes from `offset` to its end, or at most `limit` of them (a ranged
        read: no more is transferred or kept); empty if offset is at or past the end."""
        ...

    async def write_file(
        self, name: str, path: str, data: bytes, *, mode: int = 0o644, atomic: bool = True
    ) -> None:
        """Write a file, creating parent directories; atomic = temporary file, then rename."""
        ...

    async def rename(self, name: str, source: str, dest: str) -> None:
        """Rename a path inside the sprite (replacing `dest`)."""
        ...

    async def stat(self, name: str, path: str) -> FileStat:
        """Metadata of a path (symlinks followed). NotFound if missing."""
        ...

    async def lstat(self, name: str, path: str) -> FileStat:
        """Metadata of the path itself: a symlink is described (`is_symlink`), not followed.
        NotFound if missing."""
        ...

    async def delete_file(self, name: str, path: str) -> None:
        """Remove a file. NotFound when it is already gone (callers that do not care
        suppress it)."""
        ...

    # -- checkpoints ----------------------------------------------------------------------
    async def create_checkpoint(self, name: str, comment: str = "") -> CheckpointInfo:
        """Snapshot the sprite's filesystem and return the new checkpoint."""
        ...

    async def list_checkpoints(self, name: str) -> list[CheckpointInfo]:
        """The sprite's checkpoints, newest first."""
        ...

    async def restore_checkpoint(self, name: str, checkpoint_id: str) -> None:
        """Roll the filesystem back to a checkpoint; running sessions are terminated."""
        ...

    async def delete_checkpoint(self, name: str, checkpoint_id: str) -> None:
        """Delete a checkpoint. NotFound if it is not there (already deleted); Conflict for
        the checkpoint the sprite's files are on now."""
        ...

    # -- services and policy --------------------------------------------------------------
    async def list_services(self, name: str) -> list[ServiceInfo]:
        """Services defined in the sprite, with their state."""
        ...

    async def put_service(self, name: str, service: SpriteService) -> list[ServiceEvent]:
        """Create or update a service and start it; returns its progress events."""
        ...

    async def start_service(self, name: str, service_name: str) -> list[ServiceEvent]:
        """Start a stopped service."""
        ...

    async def stop_service(self, name: str, service_name: str) -> list[ServiceEvent]:
        """Stop a running service (it stays stopped across wakes)."""
        ...

    async def delete_service(self, name: str, service_name: str) -> None:
        """Remove a service definition (stopping it first)."""
        ...

    # -- run modes: HTTP exec and a service's log -----------------------------------------
    async def exec_post(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
        stdin: bytes | None = None,
    ) -> ExecSession:
        """Run a command through the HTTP exec endpoint (non-TTY; `stdin` is the request
        body, at most 10 MiB). The session has a local id only: it cannot be listed,
        attached or killed; closing it (`detach`) ends the request and with it the command.
        Never retried once the request may have reached the backend."""
        ...

    async def get_service(self, name: str, service_name: str) -> ServiceInfo:
        """One service and its state. NotFound if it is not defined."""
        ...

    def service_logs(
        self, name: str, service_name: str, *, lines: int = 0, follow: float = 0.0
    ) -> AsyncIterator[ServiceEvent]:
        """The service's log as events (stdout/stderr lines, then complete): the last
        `lines` buffered lines, then new output for `follow` seconds (0: none)."""
        ...

    async def get_network_policy(self, name: str) -> list[NetworkRule]:
        """The sprite's egress rules (empty = unrestricted)."""
        ...

    async def set_network_policy(self, name: str, rules: Sequence[NetworkRule]) -> None:
        """Replace the sprite's egress rules."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


__all__ = [
    "BackendStatus",
    "CheckpointInfo",
    "ExecOutput",
    "ExecSession",
    "FileStat",
    "KillEvent",
    "KillResult",
    "NetworkRule",
    "OutputStream",
    "ServiceEvent",
    "ServiceInfo",
    "ServiceStatus",
    "SessionInfo",
    "SpriteBackend",
    "SpriteInfo",
    "SpritePage",
    "SpriteService",
    "UrlAuth",
]
