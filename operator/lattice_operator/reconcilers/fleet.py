"""One observer per backend: list the whole fleet per interval and fan results out.

Backend calls per interval do not grow with the number of Sprite objects beyond
one LIST page per `page_size` sprites (plus the writes needed to recreate a
sprite that vanished). Status is patched only when what the backend reports
differs from what the Sprite's status already says.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from lattice_operator.api.v1alpha1 import Sprite
from lattice_operator.api.v1alpha1.sprite import NetworkPolicy
from lattice_operator.clock import Clock
from lattice_operator.ports.errors import AdapterError, NotFound
from lattice_operator.ports.sprites import SpriteBackend, SpriteInfo
from lattice_operator.reconcilers.sprite import (
    SpriteBackendError,
    SpriteReconcileError,
    error_status,
    missing_status,
    owns,
    reconcile_sprite,
)
from lattice_operator.reconcilers.sprite_warmth import (
    KeepWarm,
    same_conditions,
    warmth_conditions,
)
from lattice_operator.reconcilers.sprite_writers import SpriteKey, SpriteWriters, sprite_key
from lattice_operator.settings import BackendSettings

log = logging.getLogger(__name__)

PatchStatus = Callable[[Sprite, dict[str, Any]], Awaitable[None]]


@dataclass
class FleetObservation:
    """What one pass did, for tests and logs."""

    list_calls: int = 0
    listed: int = 0
    patched: int = 0
    recreated: int = 0
    deferred: int = 0
    """Sprites left to their handler this pass: changed since the pass began (a new
    generation not reconciled yet, deleted or gone)."""
    missing: int = 0
    resynced: int = 0
    """Sprites re-read in full this pass."""
    repaired: int = 0
    """Of those, sprites whose backend had drifted from the spec (and was brought back)."""
    woken: int = 0
    """Kept-warm sprites woken this pass (spec.keepWarm)."""


class FleetObserver:
    def __init__(
        self,
        *,
        backend: SpriteBackend,
        sprites: Callable[[], list[Sprite]],
        patch_status: PatchStatus,
        clock: Clock,
        settings: BackendSettings,
        default_policy: NetworkPolicy | None = None,
        current: Callable[[SpriteKey], Sprite | None] | None = None,
        writers: SpriteWriters | None = None,
    ) -> None:
        """`current` is the newest view of a Sprite (the index the handlers run from);
        `writers` the lock the handlers hold while they write a backend sprite."""
        self._default_policy = default_policy
        self._current = current
        self._writers = writers if writers is not None else SpriteWriters()
        self._backend = backend
        self._sprites = sprites
        self._patch = patch_status
        self._clock = clock
        self._settings = settings
        self._resync_from = ""
        """Where the next pass's resync window starts (by backend name, in turn)."""
        self._keep_warm = KeepWarm(settings.keep_warm_interval, clock.monotonic)

    async def run_forever(self) -> None:
        while True:
            try:
                result = await self.observe_once()
                log.debug("fleet pass: %s", result)
            except AdapterError as exc:
                log.warning("fleet observation failed: %s", exc)
            except Exception:  # an API server gone mid-write, say: the next pass tries again
                log.exception("fleet pass failed")
            await asyncio.sleep(self._settings.observe_interval)

    async def list_fleet(self, result: FleetObservation) -> dict[str, SpriteInfo]:
        fleet: dict[str, SpriteInfo] = {}
        token: str | None = None
        while True:
            page = await self._backend.list_sprites(
                page_size=self._settings.page_size, continuation_token=token
            )
            result.list_calls += 1
            for info in page.sprites:
                fleet[info.name] = info
            if not page.has_more or not page.next_token:
                return fleet
            token = page.next_token

    async def observe_once(self) -> FleetObservation:
        result = FleetObservation()
        # The objects are read first: a Sprite created after the LIST is not judged by it.
        sprites = [
            s
            for s in self._sprites()
            if s.metadata.deletion_timestamp is None and s.status.sprite_id is not None
        ]
        fleet = await self.list_fleet(result)
        result.listed = len(fleet)
        for sprite in sprites:
            info = fleet.get(sprite.backend_name())
            if info is None:
                await self._vanished(sprite, result)
            else:
                await self._observed(sprite, info, result)
                await self._keep_warm_pass(sprite, info, result)
        self._keep_warm.keep_only(sprite_key(s) for s in sprites if s.spec.keep_warm)
        await self._resync([s for s in sprites if _resyncable(s, fleet)], result)
        return result

    def resync_window(self, sprites: list[Sprite]) -> list[Sprite]:
        """The next `resync_per_pass` sprites after the last window, by backend name,
        wrapping around: every Sprite is re-read in turn, whatever the fleet's size."""
        limit = self._settings.resync_per_pass
        if limit <= 0 or not sprites:
            return []
        ordered = sorted(sprites, key=lambda s: s.backend_name())
        start = next((i for i, s in enumerate(ordered) if s.backend_name() > self._resync_from), 0)
        window = (ordered[start:] + ordered[:start])[: min(limit, len(ordered))]
        self._resync_from = window[-1].backend_name()
        return window

    async def _resync(self, sprites: list[Sprite], result: FleetObservation) -> None:
        """Converge a window of Sprites in full: what someone changed at the backend behind
        the operator (a network policy, a service) is put back as the spec says."""
        for seen in self.resync_window(sprites):
            async with self._writers.hold(sprite_key(seen)):
                sprite = self._latest(seen)
                if (
                    sprite is None
                    or sprite.status.phase != "Ready"
                    or sprite.status.observed_generation != sprite.metadata.generation
                ):
                    result.deferred += 1  # a spec change is its handler's to converge
                    continue
                result.resynced += 1
                try:
                    outcome = await reconcile_sprite(
                        sprite,
                        self._backend,
                        self._clock.now(),
                        default_policy=self._default_policy,
                    )
                except (SpriteReconcileError, SpriteBackendError) as exc:
                    log.warning("resync of %s failed: %s", sprite.backend_name(), exc)
                    continue
            if outcome.writes:
                result.repaired += 1
                log.info(
                    "sprite %s had drifted from its spec at the backend: repaired (%d writes)",
                    sprite.backend_name(),
                    outcome.writes,
                )
                await self._patch(sprite, outcome.status.to_patch())
                result.patched += 1

    def _latest(self, seen: Sprite) -> Sprite | None:
        """The newest view of a Sprite the pass began with; None when it is being deleted
        or gone. Read under the Sprite's writer lock: a handler that converged a newer
        spec did so after that spec reached the index (kopf indexes an event before its
        handlers run), so the view read here is never older than what the backend has."""
        sprite = seen if self._current is None else self._current(sprite_key(seen))
        if sprite is None or sprite.metadata.deletion_timestamp is not None:
            return None
        return sprite

    async def _keep_warm_pass(
        self, sprite: Sprite, info: SpriteInfo, result: FleetObservation
    ) -> None:
        """Wake a kept-warm sprite that is due (see sprite_warmth): one forwarded request."""
        key = sprite_key(sprite)
        if not sprite.spec.keep_warm or not self._keep_warm.due(key, info.status):
            return
        self._keep_warm.woken(key)
        try:
            await self._backend.list_sessions(info.name)
        except AdapterError as exc:
            log.warning("could not wake %s to keep it warm: %s", info.name, exc)
            return
        result.woken += 1

    async def _observed(self, sprite: Sprite, info: SpriteInfo, result: FleetObservation) -> None:
        now = self._clock.now()
        seen = sprite.status.last_seen_time
        stale = seen is None or now - seen >= timedelta(seconds=self._settings.last_seen_interval)
        update: dict[str, object] = {
            "backend_status": info.status,
            "url": info.url,
            "last_seen_time": now,
            "last_running_time": info.last_running_at,
            "last_warming_time": info.last_warming_at,
        }
        # Warm is judged for the generation reconciled: a newer one is its handler's to judge.
        conditions = sprite.status.conditions
        if sprite.status.observed_generation == sprite.metadata.generation:
            conditions = warmth_conditions(sprite, info.status, now)
            update["conditions"] = conditions
        # Ours, but another sprite than the one recorded (a remediation recreated it): the
        # write carries the one seen, never the view's older id back.
        replaced = info.id != sprite.status.sprite_id and owns(sprite, info)
        if replaced:
            update["sprite_id"] = info.id
        if (
            stale
            or replaced
            or info.status != sprite.status.backend_status
            or info.url != sprite.status.url
            or info.last_running_at != sprite.status.last_running_time
            or info.last_warming_at != sprite.status.last_warming_time
            or not same_conditions(conditions, sprite.status.conditions)
        ):
            status = sprite.status.model_copy(update=update)
            await self._patch(sprite, status.to_patch())
            result.patched += 1

    async def _vanished(self, sprite: Sprite, result: FleetObservation) -> None:
        now = self._clock.now()
        if not sprite.spec.recreate:
            # A paged LIST can miss a sprite (pages shift under concurrent creates and
            # deletes): only a GET's NotFound makes it Missing.
            try:
                info = await self._backend.get_sprite(sprite.backend_name())
            except NotFound:
                pass
            except AdapterError as exc:
                log.warning("cannot confirm %s is gone: %s", sprite.backend_name(), exc)
                return
            else:
                await self._observed(sprite, info, result)
                return
            if sprite.status.phase != "Missing":
                await self._patch(sprite, missing_status(sprite, now).to_patch())
                result.patched += 1
            result.missing += 1
            return
        async with self._writers.hold(sprite_key(sprite)):
            latest = self._latest(sprite)
            if latest is None or not latest.spec.recreate:
                result.deferred += 1
                return
            sprite = latest
            log.info("backend sprite %s vanished: recreating it", sprite.backend_name())
            try:
                outcome = await reconcile_sprite(
                    sprite, self._backend, now, default_policy=self._default_policy
                )
            except (SpriteReconcileError, SpriteBackendError) as exc:
                await self._patch(sprite, error_status(sprite, exc, now).to_patch())
                result.patched += 1
                return
        await self._patch(sprite, outcome.status.to_patch())
        result.patched += 1
        result.recreated += 1


def _resyncable(sprite: Sprite, fleet: dict[str, SpriteInfo]) -> bool:
    """Whether the resync may re-read the Sprite now. Its reads are forwarded to the sprite
    and wake it: one left to go cold (spec.keepWarm: false) is re-read only while the
    backend reports it running anyway."""
    info = fleet.get(sprite.backend_name())
    if info is None or sprite.status.phase != "Ready":
        return False
    return sprite.spec.keep_warm is not False or info.status == "running"
