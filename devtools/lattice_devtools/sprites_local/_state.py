"""The server's state: the registry of sprites, fault switches, the status clock."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from lattice_devtools.sprites_local._cgroups import Limits, SpriteGroups
from lattice_devtools.sprites_local._config import LocalSpritesConfig
from lattice_devtools.sprites_local._container import ContainerSettings, find_rootfs
from lattice_devtools.sprites_local._egress import EgressSettings
from lattice_devtools.sprites_local._faults import Faults
from lattice_devtools.sprites_local._insprite import InSpriteApi, install_cli
from lattice_devtools.sprites_local._launcher import NamespaceLauncher
from lattice_devtools.sprites_local._netns import close_namespace, new_namespace
from lattice_devtools.sprites_local._netpolicy import parse_networks
from lattice_devtools.sprites_local._sprite import SpriteRuntime
from lattice_devtools.sprites_local._wire import (
    CreateSpriteBody,
    SpriteRecord,
    UrlSettings,
    utcnow,
)

_log = logging.getLogger("lattice_devtools.sprites_local")
_SESSION_BLOCK = 1000


class SpriteExists(Exception):
    """A sprite of that name exists already."""


class ServerState:
    """Sprites, their runtimes and the fault switches of one server."""

    def __init__(self, config: LocalSpritesConfig, launcher: NamespaceLauncher) -> None:
        self.config = config
        self.launcher = launcher
        self.faults = Faults()
        self.scrollback_bytes = config.scrollback_bytes
        self.exit_grace = config.exit_grace
        self.port = config.port
        self.sprites: dict[str, SpriteRuntime] = {}
        self._apis: dict[str, InSpriteApi] = {}
        self._session_file = config.state_dir / "next-session-id"
        self._session_counter = 1000
        self._session_block_end = 0
        self._ticker: asyncio.Task[None] | None = None
        self._sprites_dir = config.state_dir / "sprites"
        self.groups: SpriteGroups | None = None
        self.containers: ContainerSettings | None = None
        self.egress: EgressSettings | None = None
        if config.isolation in ("container", "sandbox"):
            self.egress = EgressSettings(
                allow_private=parse_networks(config.egress_allow_private),
                max_connections=config.egress_max_connections,
                idle_timeout=config.egress_idle_timeout,
            )
            limits = Limits(
                cpus=config.sprite_cpus,
                memory_bytes=config.sprite_memory_mib * 1024 * 1024,
                pids=config.sprite_pids,
            )
            self.groups = SpriteGroups(config.state_dir, limits)
        if config.isolation == "container":
            rootfs = config.rootfs or find_rootfs()
            self.containers = ContainerSettings(
                runc=config.runc,
                rootfs=rootfs or Path("/nonexistent-sprite-rootfs"),
                state=config.state_dir / "runc",
                key=self.groups.key if self.groups else "local",
            )
        self._reaper: subprocess.Popen[bytes] | None = None

    # -- ServerContext --------------------------------------------------------------------
    def next_session_id(self) -> str:
        # Decimal strings like the PIDs the service uses, but never reused, not even across
        # restarts: ids are handed out from blocks whose end is saved before use.
        self._session_counter += 1
        if self._session_counter >= self._session_block_end:
            self._session_block_end = self._session_counter + _SESSION_BLOCK
            self._session_file.write_text(str(self._session_block_end))
        return str(self._session_counter)

    def sprite_url(self, name: str) -> str:
        return f"http://{name}.sprites.localhost:{self.port}"

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        self._sprites_dir.mkdir(parents=True, exist_ok=True)
        # Only root may walk the state directory: a sprite reaches its own files through
        # its mounts, never another sprite's through the host path.
        for private in (self.config.state_dir, self._sprites_dir):
            private.chmod(0o700)
        with contextlib.suppress(FileNotFoundError, ValueError):
            self._session_counter = max(self._session_counter, int(self._session_file.read_text()))
        if self.groups is not None:
            self.groups.check()
        if self.containers is not None:
            self.containers.check()
        if self.egress is not None:
            # A network namespace per sprite: say now (NetnsError) if one cannot be made.
            close_namespace(*await asyncio.to_thread(new_namespace, 0))
        records: list[tuple[SpriteRecord, Path]] = []
        for directory in sorted(self._sprites_dir.iterdir()):
            meta = directory / "sprite.json"
            if not meta.is_file():
                continue
            try:
                records.append((SpriteRecord.model_validate_json(meta.read_text()), directory))
            except ValueError:
                _log.warning("skipping %s: unreadable sprite.json", directory)
        for record, directory in records:
            if self.groups is not None and record.uid is None:
                record.uid = self._next_uid([r for r, _ in records])
                sprite = await self._add(record, directory)
                sprite.save()
            else:
                await self._add(record, directory)
        if self.groups is not None:
            await asyncio.to_thread(self._clean_up_after_a_crash)
            self._start_reaper()
        self._ticker = asyncio.get_running_loop().create_task(self._tick_forever())

    def _next_uid(self, records: list[SpriteRecord]) -> int:
        taken = [r.uid for r in records if r.uid is not None]
        taken += [s.record.uid for s in self.sprites.values() if s.record.uid is not None]
        return max([self.config.uid_base - 1, *taken]) + 1

    def _clean_up_after_a_crash(self) -> None:
        """Processes a previous server left (it was killed before its reaper could act, or
        the reaper was) and the groups of sprites deleted meanwhile."""
        assert self.groups is not None
        for name, sprite in self.sprites.items():
            if sprite.container is not None:
                sprite.container.stop()
            self.groups.kill(name)
        for name in self.groups.leftovers(set(self.sprites)):
            self.groups.remove(name)

    def _start_reaper(self) -> None:
        assert self.groups is not None
        self._reaper = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lattice_devtools.sprites_local._reaper",
                str(os.getpid()),
                str(self._sprites_dir),
                *map(str, self.groups.bases),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        for sprite in list(self.sprites.values()):
            await sprite.kill_everything()
        for api in self._apis.values():
            await api.stop()
        self._apis.clear()

    async def _tick_forever(self) -> None:
        interval = max(0.05, min(1.0, self.config.warm_after / 4))
        while True:
            await asyncio.sleep(interval)
            for sprite in list(self.sprites.values()):
                try:
                    await sprite.tick(self.config.warm_after, self.config.cold_after)
                except Exception:
                    _log.exception("status tick of %s failed", sprite.name)

    async def _add(self, record: SpriteRecord, directory: Path) -> SpriteRuntime:
        sprite = SpriteRuntime(record, directory, self)
        install_cli(sprite.dot / "bin")
        api = InSpriteApi(sprite)
        await api.start()
        self.sprites[record.name] = sprite
        self._apis[record.name] = api
        return sprite

    # -- registry -------------------------------------------------------------------------
    async def create(self, body: CreateSpriteBody) -> SpriteRuntime:
        if body.name in self.sprites:
            raise SpriteExists(body.name)
        now = utcnow()
        settings = body.url_settings
        record = SpriteRecord(
            uid=self._next_uid([]) if self.groups is not None else None,
            id=f"sprite-{uuid.uuid4()}",
            name=body.name,
            organization=self.config.organization,
            url_settings=UrlSettings(
                auth=(settings.auth if settings and settings.auth else "sprite"),
                private_access=settings.private_access if settings else None,
            ),
            labels=list(body.labels or []),
            environment=dict(body.environment or {}),
            created_at=now,
            updated_at=now,
        )
        directory = self._sprites_dir / body.name
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        sprite = await self._add(record, directory)
        sprite.save()
        # Every sprite starts from a clean base checkpoint, v0, as at Fly.io.
        async for _ in sprite.checkpoint_events("Base (clean) state"):
            pass
        return sprite

    async def delete(self, name: str) -> None:
        sprite = self.sprites.pop(name)
        api = self._apis.pop(name, None)
        if api is not None:
            await api.stop()
        await sprite.destroy()

    def counts(self) -> dict[str, int]:
        counts = {"running": 0, "warm": 0, "cold": 0}
        for sprite in self.sprites.values():
            counts[sprite.status] += 1
        return counts


def encode_token(last: str) -> str:
    """An opaque continuation token (base64 JSON, as the service's examples show)."""
    return base64.urlsafe_b64encode(json.dumps({"last": last}).encode()).decode()


def decode_token(token: str) -> str | None:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, TypeError):
        return None
    last = data.get("last") if isinstance(data, dict) else None
    return last if isinstance(last, str) else None


__all__ = ["ServerState", "SpriteExists", "decode_token", "encode_token"]
