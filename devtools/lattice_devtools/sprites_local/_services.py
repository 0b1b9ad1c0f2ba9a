"""Services: supervised processes of a sprite, restarted on crash, stopped when it goes cold.

Definitions live in `<sprite>/services.json`; output goes to
`/.sprite/logs/services/<name>.log` inside the sprite. An explicit stop is remembered (the
service stays stopped across wakes); going cold stops services without that mark, so they
start again on the next wake.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lattice_devtools.sprites_local._confined import open_log
from lattice_devtools.sprites_local._launcher import DOT_SPRITE, ConfinedLauncher
from lattice_devtools.sprites_local._process import ExitWatch, exit_status, kill_group
from lattice_devtools.sprites_local._wire import ServiceDefinition, iso

RESTART_BACKOFF = (1.0, 2.0, 5.0, 10.0, 30.0)
EnvFor = Callable[[Mapping[str, str]], dict[str, str]]


def _ms() -> int:
    return int(time.time() * 1000)


class _Running:
    def __init__(self, proc: subprocess.Popen[bytes], watch: ExitWatch) -> None:
        self.proc = proc
        self.watch = watch
        self.started_at = datetime.now(UTC)


class ServiceSupervisor:
    """The services of one sprite."""

    def __init__(
        self,
        *,
        definitions_file: Path,
        root: Path,
        dot: Path,
        launcher: ConfinedLauncher,
        env_for: EnvFor,
    ) -> None:
        self._file = definitions_file
        self._root = root
        self._dot = dot
        self._launcher = launcher
        self._env_for = env_for
        self._defs: dict[str, ServiceDefinition] = {}
        self._running: dict[str, _Running] = {}
        self._status: dict[str, str] = {}
        self._errors: dict[str, str] = {}
        self._restarts: dict[str, int] = {}
        self._restart_timers: dict[str, asyncio.TimerHandle] = {}
        self._stopping: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        if definitions_file.is_file():
            for item in json.loads(definitions_file.read_text()):
                definition = ServiceDefinition.model_validate(item)
                self._defs[definition.name] = definition

    # -- definitions ----------------------------------------------------------------------
    def definitions(self) -> list[ServiceDefinition]:
        return list(self._defs.values())

    def snapshot(self) -> str:
        """The definitions as JSON (saved with checkpoints)."""
        return json.dumps([d.model_dump(mode="json") for d in self._defs.values()])

    async def replace_all(self, snapshot: str) -> None:
        """Restore definitions from a checkpoint and restart what should run."""
        await self.stop_all(remember=False)
        self._defs = {
            d.name: d for d in (ServiceDefinition.model_validate(i) for i in json.loads(snapshot))
        }
        self._save()

    def _save(self) -> None:
        self._file.write_text(self.snapshot())

    def get(self, name: str) -> ServiceDefinition | None:
        return self._defs.get(name)

    def http_port_owner(self, port_wanted: int | None, name: str) -> str | None:
        """The other service that already serves the sprite URL, if any."""
        if port_wanted is None:
            return None
        for other in self._defs.values():
            if other.name != name and other.http_port is not None:
                return other.name
        return None

    async def put(self, definition: ServiceDefinition) -> None:
        if definition.name in self._running:
            await self.stop(definition.name, remember=False)
        self._defs[definition.name] = definition
        self._save()

    async def delete(self, name: str) -> None:
        await self.stop(name, remember=False)
        self._defs.pop(name, None)
        self._status.pop(name, None)
        self._restarts.pop(name, None)
        self._save()

    # -- state ----------------------------------------------------------------------------
    def describe(self, name: str) -> dict[str, Any]:
        definition = self._defs[name]
        running = self._running.get(name)
        state: dict[str, Any] = {
            "name": name,
            "status": self._status.get(name, "stopped"),
            "restart_count": self._restarts.get(name, 0),
        }
        if running is not None:
            state["pid"] = running.proc.pid
            state["started_at"] = iso(running.started_at)
        if name in self._errors:
            state["error"] = self._errors[name]
        body = definition.model_dump(mode="json", exclude={"stopped"})
        body["state"] = state
        return body

    def pid(self, name: str) -> int | None:
        running = self._running.get(name)
        return running.proc.pid if running else None

    # -- processes ------------------------------------------------------------------------
    async def start(self, name: str) -> None:
        definition = self._defs[name]
        if definition.stopped:
            definition.stopped = False
            self._save()
        if name in self._running:
            return
        self._cancel_restart(name)
        log = self._dot / "logs" / "services" / f"{name}.log"
        self._status[name] = "starting"
        try:
            log_fd = open_log(self._dot, log)
        except OSError as exc:
            self._status[name] = "failed"
            self._errors[name] = f"cannot open its log: {exc.strerror}"
            return
        with os.fdopen(log_fd, "ab") as log_file:
            try:
                proc = self._launcher.spawn(
                    [definition.cmd, *definition.args],
                    env=self._env_for(definition.env),
                    cwd=definition.dir or "/workspace",
                    root=self._root,
                    dot=self._dot,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=log_file,
                )
            except OSError as exc:
                self._status[name] = "failed"
                self._errors[name] = f"{definition.cmd}: {exc.strerror}"
                return
        self._errors.pop(name, None)
        running = _Running(proc, ExitWatch(proc))
        self._running[name] = running
        self._status[name] = "running"
        task = asyncio.get_running_loop().create_task(self._supervise(name, running))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _supervise(self, name: str, running: _Running) -> None:
        await running.watch.done.wait()
        running.watch.close()
        if self._running.get(name) is running:
            del self._running[name]
        if name in self._stopping or name not in self._defs:
            return
        # Crashed (or exited): come back after a growing pause.
        code = exit_status(running.proc.returncode or 0)
        count = self._restarts.get(name, 0)
        self._restarts[name] = count + 1
        self._status[name] = "failed"
        self._errors[name] = f"exited with status {code}"
        delay = RESTART_BACKOFF[min(count, len(RESTART_BACKOFF) - 1)]
        loop = asyncio.get_running_loop()
        self._restart_timers[name] = loop.call_later(delay, self._restart, name)

    def _restart(self, name: str) -> None:
        self._restart_timers.pop(name, None)
        if name in self._defs and not self._defs[name].stopped:
            task = asyncio.get_running_loop().create_task(self.start(name))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _cancel_restart(self, name: str) -> None:
        timer = self._restart_timers.pop(name, None)
        if timer is not None:
            timer.cancel()

    async def stop(self, name: str, *, remember: bool, grace: float = 10.0) -> int | None:
        """Stop a service (SIGTERM, SIGKILL after `grace`); its exit status if it ran."""
        self._cancel_restart(name)
        definition = self._defs.get(name)
        if remember and definition is not None and not definition.stopped:
            definition.stopped = True
            self._save()
        running = self._running.get(name)
        if running is None:
            self._status[name] = "stopped"
            return None
        self._stopping.add(name)
        self._status[name] = "stopping"
        try:
            kill_group(running.proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(running.watch.done.wait(), grace)
            except TimeoutError:
                kill_group(running.proc.pid, signal.SIGKILL)
                await running.watch.done.wait()
        finally:
            self._stopping.discard(name)
        self._status[name] = "stopped"
        return exit_status(running.proc.returncode or 0)

    async def stop_all(self, *, remember: bool) -> None:
        for name in list(self._defs):
            await self.stop(name, remember=remember, grace=2.0)

    async def start_wanted(self) -> None:
        """Start every service that is not explicitly stopped (on wake, after restore)."""
        for name, definition in list(self._defs.items()):
            if not definition.stopped and name not in self._running:
                await self.start(name)

    def signal(self, name: str, sig: int) -> bool:
        running = self._running.get(name)
        return running is not None and kill_group(running.proc.pid, sig)

    def groups(self) -> list[int]:
        return [r.proc.pid for r in self._running.values()]

    async def follow(self, name: str, duration: float) -> AsyncIterator[dict[str, Any]]:
        """Progress of a start: started, exit if it dies within `duration`, complete."""
        running = self._running.get(name)
        if running is None:
            yield {"type": "error", "data": self._errors.get(name, "failed to start")}
        else:
            yield {"type": "started", "timestamp": _ms()}
            if duration > 0:
                try:
                    await asyncio.wait_for(running.watch.done.wait(), duration)
                except TimeoutError:
                    pass
                else:
                    code = exit_status(running.proc.returncode or 0)
                    yield {"type": "exit", "exit_code": code, "timestamp": _ms()}
        log = f"{DOT_SPRITE}/logs/services/{name}.log"
        yield {
            "type": "complete",
            "log_files": {"combined": log, "stdout": log, "stderr": log},
            "timestamp": _ms(),
        }


__all__ = ["ServiceSupervisor"]
