"""One local sprite: its directories, sessions, services, checkpoints and simulated status.

On disk, `<state>/sprites/<name>/`:

    sprite.json     the record (id, URL settings, labels, environment, timestamps)
    root/           the sprite's files, mounted at /workspace for its processes
    dot/            mounted at /.sprite: api.sock, bin/ (on PATH), home/, logs/, policy/
    fs/             the runc container (container isolation): its writable layer, its spec
    checkpoints/    v0, v1, … snapshots
    services.json   service definitions
    policy.json     the network policy

Status: `running` while a session runs, a request is being served or an in-sprite task is
held; `warm` after `warm_after` idle seconds; `cold` after `cold_after` (processes killed,
services stopped, files kept). A warm or cold sprite wakes on its next request.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import logging
import os
import shutil
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal, Protocol

from lattice_devtools.sprites_local._cgroups import SpriteGroups
from lattice_devtools.sprites_local._checkpoints import CheckpointError, CheckpointStore
from lattice_devtools.sprites_local._container import ContainerSettings, Mounts, SpriteContainer
from lattice_devtools.sprites_local._egress import EgressSettings
from lattice_devtools.sprites_local._faults import Faults
from lattice_devtools.sprites_local._launcher import (
    DOT_SPRITE,
    WORKSPACE,
    ConfinedLauncher,
    Confinement,
    NamespaceLauncher,
)
from lattice_devtools.sprites_local._netpolicy import NetworkPolicy
from lattice_devtools.sprites_local._network import SpriteNetwork, proxy_environment
from lattice_devtools.sprites_local._process import kill_group
from lattice_devtools.sprites_local._services import ServiceSupervisor
from lattice_devtools.sprites_local._session import Attachment, ExecParams, Session
from lattice_devtools.sprites_local._wire import (
    ENVIRONMENT_VERSION,
    SpriteRecord,
    iso,
    utcnow,
)

Status = Literal["cold", "warm", "running"]
_log = logging.getLogger("lattice_devtools.sprites_local")
DEFAULT_PATH = f"{DOT_SPRITE}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ServerContext(Protocol):
    """What a sprite needs from the server."""

    launcher: NamespaceLauncher
    groups: SpriteGroups | None
    """The sprites' control groups (None: isolation is off)."""
    containers: ContainerSettings | None
    """Set when each sprite runs in a runc container."""
    egress: EgressSettings | None
    """Set when each sprite has a network namespace of its own, the proxy its way out."""
    faults: Faults
    scrollback_bytes: int
    exit_grace: float

    def next_session_id(self) -> str: ...

    def sprite_url(self, name: str) -> str: ...


def _own_python() -> tuple[str, ...]:
    """The installation of the Python running this server, its virtualenv and the source
    roots of our packages (an editable install points there): shared read-only with
    sprites, so the `lattice` CLI (the MCP face for agents) runs inside."""
    places = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}
    for package in ("lattice_operator", "lattice_adapters"):
        spec = importlib.util.find_spec(package)
        for location in (spec.submodule_search_locations or []) if spec else []:
            places.add(os.path.dirname(os.path.realpath(location)))
    return tuple(sorted(places))


class SpriteRuntime:
    """A sprite and everything running in it."""

    def __init__(self, record: SpriteRecord, directory: Path, server: ServerContext) -> None:
        self.record = record
        self.dir = directory
        self.root = directory / "root"
        self.dot = directory / "dot"
        self.shm = directory / "shm"
        """What the sprite sees at /dev/shm: never in a checkpoint, emptied when it stops."""
        self.server = server
        self.sessions: dict[str, Session] = {}
        self.execs_started = 0
        """Commands started by an exec since the server started (for tests)."""
        self.status: Status = "cold"
        self.last_active = time.monotonic()
        self.inflight = 0
        self.tasks: dict[str, float] = {}
        """In-sprite tasks (name -> monotonic expiry) that hold the sprite awake."""
        self._groups: set[int] = set()
        self._wake_lock = asyncio.Lock()
        for sub in (self.root, self.dot / "bin", self.dot / "home", self.dot / "logs"):
            sub.mkdir(parents=True, exist_ok=True)
        (self.dot / "policy").mkdir(exist_ok=True)
        (self.dot / "tmp").mkdir(exist_ok=True)
        self.shm.mkdir(exist_ok=True)
        self.confinement: Confinement | None = None
        self.container: SpriteContainer | None = None
        self._net_policy = NetworkPolicy(self.policy())
        self.network: SpriteNetwork | None = None
        if server.egress is not None:
            self.network = SpriteNetwork(record.name, server.egress, lambda: self._net_policy)
        if server.groups is not None:
            if record.uid is None:
                raise RuntimeError(f"sprite {record.name} has no user")
            self.own_tree()
            procs = tuple(server.groups.create(record.name))
            if server.containers is not None:
                self.container = SpriteContainer(
                    server.containers,
                    record.name,
                    directory / "fs",
                    Mounts(workspace=self.root, dot=self.dot, shm=self.shm, shared=_own_python()),
                    uid=record.uid,
                    hostname=record.name,
                    cgroup_procs=procs,
                )
            self.confinement = Confinement(
                uid=record.uid,
                gid=record.uid,
                tmp=self.dot / "tmp",
                cgroup_procs=procs,
                share=_own_python(),
                container=self.container,
                network=self.network,
            )
        self.launcher = ConfinedLauncher(server.launcher, self.confinement, self.shm)
        self.checkpoints = CheckpointStore(directory / "checkpoints")
        self.services = ServiceSupervisor(
            definitions_file=directory / "services.json",
            root=self.root,
            dot=self.dot,
            launcher=self.launcher,
            env_for=self.env_for,
        )

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def owner(self) -> tuple[int, int] | None:
        """(uid, gid) of the sprite's files and processes; None without isolation."""
        uid = self.record.uid
        return (uid, uid) if self.confinement is not None and uid is not None else None

    def clear_shm(self) -> None:
        """/dev/shm is memory at Fly.io: what was there is gone once the sprite stops."""
        for child in list(self.shm.iterdir()) if self.shm.is_dir() else []:
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)

    def own_tree(self) -> None:
        """The sprite's writable trees belong to its user (/workspace, home, /tmp); what the
        server provides (the CLI, the policy view, service logs) stays root's, read-only."""
        uid = self.record.uid
        if uid is None:
            return
        for top in (self.root, self.dot / "home", self.dot / "tmp", self.shm):
            if top.stat().st_uid == uid and top.stat().st_gid == uid:
                continue
            for path in (top, *top.rglob("*")):
                with contextlib.suppress(FileNotFoundError):
                    os.chown(path, uid, uid, follow_symlinks=False)

    # -- record ---------------------------------------------------------------------------
    def save(self) -> None:
        temp = self.dir / "sprite.json.tmp"
        temp.write_text(self.record.model_dump_json(indent=2))
        temp.replace(self.dir / "sprite.json")

    def to_json(self) -> dict[str, Any]:
        record = self.record
        body: dict[str, Any] = {
            "id": record.id,
            "name": record.name,
            "organization": record.organization,
            "url": self.server.sprite_url(record.name),
            "url_settings": record.url_settings.model_dump(exclude_none=True),
            "status": self.status,
            "version": ENVIRONMENT_VERSION,
            "environment_version": ENVIRONMENT_VERSION,
            "created_at": iso(record.created_at),
            "updated_at": iso(record.updated_at),
            "last_running_at": iso(record.last_running_at),
            "last_warming_at": iso(record.last_warming_at),
        }
        if record.labels:
            body["labels"] = list(record.labels)
        return body

    # -- environment ----------------------------------------------------------------------
    def base_env(self) -> dict[str, str]:
        """The default environment of the sprite's processes (replaced when a client sends env)."""
        env = {
            "PATH": DEFAULT_PATH,
            "HOME": f"{DOT_SPRITE}/home",
            "USER": "root" if self.confinement is None else "sprite",
            "LOGNAME": "root" if self.confinement is None else "sprite",
            "LANG": "C.UTF-8",
            "SPRITE_NAME": self.name,
            "SPRITE_API_SOCKET": f"{DOT_SPRITE}/api.sock",
        }
        if self.network is not None:
            env.update(proxy_environment())
        env.update(self.record.environment)
        return env

    def env_for(self, extra: dict[str, str] | Any) -> dict[str, str]:
        return {**self.base_env(), **dict(extra)}

    # -- status ---------------------------------------------------------------------------
    def busy(self) -> bool:
        now = time.monotonic()
        self.tasks = {name: until for name, until in self.tasks.items() if until > now}
        live = any(not s.finished.is_set() for s in self.sessions.values())
        return live or self.inflight > 0 or bool(self.tasks)

    def touch(self) -> None:
        self.last_active = time.monotonic()

    async def wake(self) -> None:
        """Make the sprite running (a cold one starts its services again)."""
        self.touch()
        if self.status == "running":
            return
        async with self._wake_lock:
            if self._running():  # woken while this call waited for the lock
                return
            faults = self.server.faults
            if faults.slow_wake and faults.applies_to(self.name):
                await asyncio.sleep(faults.slow_wake)
            was_cold = self.status == "cold"
            self.status = "running"
            self.record.last_running_at = utcnow()
            self.save()
            if was_cold:
                await self.services.start_wanted()
            self.touch()

    def _running(self) -> bool:
        return self.status == "running"

    async def tick(self, warm_after: float, cold_after: float) -> None:
        """Advance the simulated status by the idle time."""
        self._prune_groups()
        if self.busy():
            self.touch()
            if self.status != "running":
                self.status = "running"
            return
        idle = time.monotonic() - self.last_active
        if self.status != "cold" and idle >= cold_after:
            await self.go_cold()
        elif self.status == "running" and idle >= warm_after:
            self.status = "warm"
            self.record.last_warming_at = utcnow()
            self.save()

    async def go_cold(self) -> None:
        """Stop the sprite's compute: sessions are lost (no exit frames), services stop."""
        for session in list(self.sessions.values()):
            session.lose()
        self._kill_groups()
        await self.services.stop_all(remember=False)
        await self._kill_cgroup()
        self._stop_container()
        await self._wait_sessions(5.0)
        self.tasks.clear()
        await asyncio.to_thread(self.clear_shm)
        self.status = "cold"

    # -- sessions -------------------------------------------------------------------------
    async def start_session(
        self, params: ExecParams, transport: asyncio.Transport | None
    ) -> tuple[Session, Attachment]:
        """Spawn a session with a first attachment (raises SpawnError, LauncherError)."""
        self.execs_started += 1
        env = params.env if params.env is not None else self.base_env()
        if params.tty:
            env = {"TERM": "xterm-256color", **env}
        session = Session(
            self.server.next_session_id(),
            params,
            host=self,
            scrollback=self.server.scrollback_bytes,
            exit_grace=self.server.exit_grace,
        )
        attachment = session.attach(transport, fresh=True)
        self.sessions[session.id] = session
        try:
            await session.start(self.launcher, root=self.root, dot=self.dot, env=env)
        except BaseException:
            self.sessions.pop(session.id, None)
            raise
        if session.pgid is not None:
            self._groups.add(session.pgid)
        self.touch()
        return session, attachment

    def session_finished(self, session: Session) -> None:
        self.sessions.pop(session.id, None)
        self.touch()

    def session_activity(self) -> None:
        self.last_active = time.monotonic()

    def _kill_groups(self) -> None:
        for pgid in list(self._groups):
            if not kill_group(pgid, signal.SIGKILL):
                self._groups.discard(pgid)

    def _prune_groups(self) -> None:
        # A group number is only safe to signal while the group has members.
        for pgid in list(self._groups):
            if not kill_group(pgid, 0):
                self._groups.discard(pgid)

    async def _wait_sessions(self, limit: float) -> None:
        waits = [s.finished.wait() for s in self.sessions.values()]
        if not waits:
            return
        try:
            await asyncio.wait_for(asyncio.gather(*waits), limit)
        except TimeoutError:
            # SIGKILL was sent; a process stuck in the kernel must not wedge the API.
            _log.warning("%s: sessions still finishing after %.0fs", self.name, limit)

    async def kill_everything(self) -> None:
        """Kill every process of the sprite (sessions with exit frames, services)."""
        for session in list(self.sessions.values()):
            session.kill(signal.SIGKILL)
        self._kill_groups()
        await self.services.stop_all(remember=False)
        await self._kill_cgroup()
        self._stop_container()
        await self._wait_sessions(10.0)

    def _stop_container(self) -> None:
        # On the loop, not in a thread: a spawn must never see a half-stopped container.
        if self.container is not None:
            self.container.stop()
        if self.network is not None:
            self.network.stop()

    async def _kill_cgroup(self) -> None:
        # What left the process groups (setsid, daemons) is still in the sprite's cgroup.
        groups = self.server.groups
        if groups is not None:
            await asyncio.to_thread(groups.kill, self.name)

    # -- checkpoints ----------------------------------------------------------------------
    def _fault_stream_error(self) -> bool:
        faults = self.server.faults
        if faults.stream_error > 0 and faults.applies_to(self.name):
            faults.stream_error -= 1
            return True
        return False

    async def checkpoint_events(self, comment: str) -> AsyncIterator[dict[str, Any]]:
        """Create a checkpoint, as the NDJSON progress lines of the API."""
        yield _line("info", "Creating checkpoint...")
        if self._fault_stream_error():
            yield _error("Checkpoint failed: injected fault (stream_error)")
            return
        async with self.checkpoints.lock:
            yield _line("info", "Saving filesystem state...")
            try:
                extras = {"services": self.services.snapshot(), "policy": self.policy_json()}
                record = await self.checkpoints.create(
                    self.root, extras, comment, layer=self._layer()
                )
            except (CheckpointError, OSError) as exc:
                yield _error(f"Checkpoint failed: {exc}")
                return
        yield _line("complete", f"Checkpoint {record.id} created")

    async def restore_events(self, checkpoint_id: str) -> AsyncIterator[dict[str, Any]]:
        """Restore a checkpoint (sessions killed, files rolled back), as progress lines."""
        yield _line("info", f"Restoring checkpoint {checkpoint_id}...")
        if self._fault_stream_error():
            yield _error("Restore failed: injected fault (stream_error)")
            return
        async with self.checkpoints.lock:
            yield _line("info", "Stopping sessions and services...")
            await self.kill_everything()
            yield _line("info", "Restoring filesystem state...")
            try:
                extras = await self.checkpoints.restore(
                    checkpoint_id, self.root, layer=self._layer()
                )
            except (CheckpointError, OSError) as exc:
                yield _error(f"Restore failed: {exc}")
                return
            await asyncio.to_thread(self.clear_shm)  # memory does not survive a restore
            await asyncio.to_thread(self.own_tree)
            await self.services.replace_all(extras.get("services", "[]"))
            self.set_policy(json.loads(extras.get("policy", "[]")))
            if self.status != "cold":
                await self.services.start_wanted()
        yield _line("complete", f"Restored to {checkpoint_id}")

    def _layer(self) -> Path | None:
        """The container's writable layer: the rest of the sprite's filesystem, which
        checkpoints keep beside /workspace (copy-on-write, as the service's are)."""
        return self.container.upper if self.container is not None else None

    # -- network policy -------------------------------------------------------------------
    def policy(self) -> list[dict[str, Any]]:
        try:
            rules: list[dict[str, Any]] = json.loads((self.dir / "policy.json").read_text())
        except FileNotFoundError:
            return []
        return rules

    def policy_json(self) -> str:
        return json.dumps(self.policy())

    def set_policy(self, rules: list[dict[str, Any]]) -> None:
        text = json.dumps(rules)
        (self.dir / "policy.json").write_text(text)
        # Read-only view for the sprite's programs, as at Fly.io.
        (self.dot / "policy" / "network.json").write_text(json.dumps({"rules": rules}))
        # Live: the next connection is judged by these rules, open ones they deny are cut.
        self._net_policy = NetworkPolicy(rules)
        if self.network is not None:
            self.network.policy_changed()

    # -- teardown -------------------------------------------------------------------------
    async def destroy(self) -> None:
        await self.kill_everything()
        if self.server.groups is not None:
            await asyncio.to_thread(self.server.groups.remove, self.name)
        shutil.rmtree(self.dir, ignore_errors=True)

    def describe(self) -> dict[str, Any]:
        """Internal state for tests (`GET /_local/sprites/{name}`)."""
        return {
            "name": self.name,
            "status": self.status,
            "root": str(self.root),
            "workspace": WORKSPACE,
            "sessions": [
                {"id": s.id, "pid": s.pid, "pgid": s.pgid, "tty": s.params.tty}
                for s in self.sessions.values()
            ],
            "services": {d.name: self.services.pid(d.name) for d in self.services.definitions()},
            "execs_started": self.execs_started,
            "tasks": sorted(self.tasks),
            "container": (
                {"id": self.container.id, "init_pid": self.container.init_pid}
                if self.container is not None and self.container.running()
                else None
            ),
            "network": self.network.describe() if self.network is not None else None,
        }


def _line(kind: str, data: str) -> dict[str, Any]:
    return {"type": kind, "data": data, "time": iso(utcnow())}


def _error(message: str) -> dict[str, Any]:
    return {"type": "error", "error": message, "time": iso(utcnow())}


__all__ = ["ServerContext", "SpriteRuntime", "Status"]
