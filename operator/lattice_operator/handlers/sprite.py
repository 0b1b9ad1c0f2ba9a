"""Sprite handlers: reconcile on create/update/resume, delete with a finalizer, observe drift."""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import Counter
from typing import Any

import kopf
from pydantic import ValidationError

from lattice_adapters.kube import KubeApiError
from lattice_operator.api.v1alpha1 import Sprite
from lattice_operator.api.v1alpha1.resources import SPRITES
from lattice_operator.handlers._context import OperatorContext, context_of
from lattice_operator.handlers._parsed import object_ref
from lattice_operator.handlers._registry import SERVING
from lattice_operator.handlers.environment import ClusterSteps, cluster_steps
from lattice_operator.metrics import (
    RECONCILE_SECONDS,
    RECONCILES,
    SPRITES_BY_PHASE,
    STATUS_PATCHES,
)
from lattice_operator.ports import SpriteView
from lattice_operator.ports.errors import AdapterError
from lattice_operator.reconcilers.fleet import FleetObserver
from lattice_operator.reconcilers.sprite import (
    SpriteBackendError,
    SpriteReconcileError,
    delete_backend_sprite,
    deletion_blocked_status,
    error_status,
    reconcile_sprite,
    unknown_status,
)
from lattice_operator.reconcilers.sprite_claims import RunClaim, holder
from lattice_operator.reconcilers.sprite_writers import sprite_key

log = logging.getLogger(__name__)
DELETE_ATTEMPTS_ANNOTATION = "lattice.dev/delete-attempts"


def parse_sprite(body: kopf.Body) -> Sprite:
    try:
        return Sprite.model_validate(dict(body))
    except ValidationError as exc:
        raise kopf.PermanentError(f"invalid Sprite: {exc}") from exc


# Both operators (serving and reconciling, each in its own thread) index every Sprite: one
# model per version of a Sprite serves both indexes. Weak: a version no index holds any more
# is gone. The models are never changed by their readers.
_shared_sprites: weakref.WeakValueDictionary[tuple[str, str], Sprite] = (
    weakref.WeakValueDictionary()
)


def shared_sprite(body: kopf.Body) -> Sprite:
    """The Sprite of a body: the model already parsed for this uid and resourceVersion, if
    the other operator's index still holds it."""
    version = str(body.get("metadata", {}).get("resourceVersion") or "")
    key = (str(body.metadata.uid or ""), version)
    sprite = _shared_sprites.get(key) if version else None
    if sprite is None:
        sprite = Sprite.model_validate(dict(body))
        if version:
            _shared_sprites[key] = sprite
    return sprite


@kopf.index(*SPRITES.gvp, registry=SERVING)  # the Run policy webhook reads it too
@kopf.index(*SPRITES.gvp)
async def sprite_directory(body: kopf.Body, **_: Any) -> dict[tuple[str, str], Sprite]:
    """Every Sprite in memory, by (namespace, name): Runs, the fleet observer and the Run
    policy webhook read it."""
    sprite = shared_sprite(body)
    return {(sprite.metadata.namespace or "", sprite.metadata.name): sprite}


@kopf.on.startup()
async def register_sprite_metrics(**kwargs: Any) -> None:
    directory: kopf.Index[tuple[str, str], Sprite] = kwargs["sprite_directory"]

    def counts() -> dict[tuple[str, ...], int]:
        return dict(
            Counter(
                (str(s.status.phase or "Pending"), str(s.status.backend_status or "unknown"))
                for sprites in directory.values()
                for s in sprites
            )
        )

    SPRITES_BY_PHASE.bind(counts)


class IndexedSprites:
    """The SpriteDirectory port over kopf's indexes (Sprites, and Runs' claims on them)."""

    def __init__(
        self,
        index: kopf.Index[tuple[str, str], Sprite],
        claims: kopf.Index[tuple[str, str], RunClaim] | None = None,
        cluster: kopf.Index[str, ClusterSteps] | None = None,
    ) -> None:
        """`cluster`: the cluster-wide Environment's steps (every ready Sprite's Runs get them)."""
        self._index = index
        self._claims = claims
        self._cluster = cluster

    def holder(self, namespace: str, sprite: str, run_uid: str) -> str | None:
        if self._claims is None:
            return None
        first = holder(self._claims.get((namespace, sprite), []), run_uid)
        return first.name if first else None

    def lookup(self, namespace: str, name: str) -> SpriteView | None:
        entries = self._index.get((namespace, name))
        if not entries:
            return None
        sprite = next(iter(entries))
        ready = next((c for c in sprite.status.conditions if c.type == "Ready"), None)
        policy = sprite.spec.run_policy
        if sprite.metadata.deletion_timestamp is not None:
            return SpriteView(
                False, sprite.status.sprite_name, "the Sprite is being deleted", policy
            )
        if ready is None or ready.status != "True":
            why = f"{ready.reason}: {ready.message}" if ready else "not reconciled yet"
            return SpriteView(False, sprite.status.sprite_name, why, policy)
        return SpriteView(
            True,
            sprite.status.sprite_name or sprite.backend_name(),
            "",
            policy,
            tuple(sprite.spec.environment),
            cluster_steps(self._cluster),
        )

    def current(self, key: tuple[str, str]) -> Sprite | None:
        """The newest version of a Sprite this operator has seen."""
        entries = self._index.get(key)
        return next(iter(entries)) if entries else None

    def all(self) -> list[Sprite]:
        return [next(iter(v)) for v in self._index.values() if v]


@kopf.on.create(*SPRITES.gvp)
@kopf.on.update(*SPRITES.gvp, field="spec")
@kopf.on.resume(*SPRITES.gvp)
async def sprite_reconcile(
    body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, reason: str, **_: Any
) -> None:
    ctx = context_of(memo)
    sprite = parse_sprite(body)
    if sprite.metadata.deletion_timestamp is not None:
        return
    synced = next((c for c in sprite.status.conditions if c.type == "Synced"), None)
    if (
        reason == "resume"
        and synced is not None
        and synced.status == "True"
        and sprite.status.observed_generation == sprite.metadata.generation
    ):
        return  # already converged for this generation: drift is the observer's job
    started = time.monotonic()
    now = ctx.clock.now()
    if ctx.backend is None:
        patch.status.update(
            unknown_status(sprite, "BackendNotConfigured", ctx.backend_problem, now).to_patch()
        )
        raise kopf.TemporaryError(ctx.backend_problem, delay=30)
    try:
        async with ctx.sprite_writers.hold(sprite_key(sprite)):
            result = await reconcile_sprite(
                sprite,
                ctx.backend,
                now,
                default_policy=ctx.settings.sprites.default_network_policy,
            )
    except SpriteReconcileError as exc:
        patch.status.update(error_status(sprite, exc, now).to_patch())
        RECONCILES.labels(kind="Sprite", outcome="blocked").inc()
        raise kopf.PermanentError(str(exc)) from exc
    except SpriteBackendError as exc:
        # The status records the backend sprite if it exists, so the retry knows it is ours.
        patch.status.update(error_status(sprite, exc, now).to_patch())
        RECONCILES.labels(kind="Sprite", outcome="error").inc()
        raise kopf.TemporaryError(f"backend: {exc}", delay=_retry_delay(exc.error)) from exc
    finally:
        RECONCILE_SECONDS.labels(kind="Sprite").observe(time.monotonic() - started)
    patch.status.update(result.status.to_patch())
    STATUS_PATCHES.labels(kind="Sprite").inc()
    RECONCILES.labels(kind="Sprite", outcome="ok").inc()


@kopf.on.delete(*SPRITES.gvp)
async def sprite_delete(
    body: kopf.Body, memo: kopf.Memo, retry: int, logger: kopf.Logger, **_: Any
) -> None:
    ctx = context_of(memo)
    sprite = parse_sprite(body)
    if sprite.spec.deletion_policy == "Orphan":
        return  # the user asked to keep the backend sprite
    if ctx.backend is None and sprite.status.sprite_id is None:
        return  # never reconciled against a backend: nothing of ours there
    name = sprite.backend_name()
    try:
        async with ctx.sprite_writers.hold(sprite_key(sprite)):
            await delete_backend_sprite(sprite, ctx.require_backend())
    except AdapterError as exc:
        timings = ctx.settings.sprites
        if retry + 1 < timings.delete_attempts:
            raise kopf.TemporaryError(
                f"deleting backend sprite {name!r} failed ({exc}); retry {retry + 1} of "
                f"{timings.delete_attempts - 1}",
                delay=timings.delete_backoff * 2**retry,
            ) from exc
        message = (
            f"the backend sprite {name!r} could not be deleted after {retry + 1} attempts "
            f"({exc}). It is retried every {timings.blocked_recheck:.0f}s. To release this "
            "object without deleting the backend sprite, set spec.deletionPolicy: Orphan "
            f"(kubectl patch sprite {sprite.metadata.name} --type merge "
            '-p \'{"spec":{"deletionPolicy":"Orphan"}}\'), or remove the finalizer '
            f"{ctx.settings.finalizer}."
        )
        await _patch_status(
            ctx, sprite, deletion_blocked_status(sprite, message, ctx.clock.now()).to_patch()
        )
        await ctx.require_writer().post_event(
            object_ref(body), reason="DeletionBlocked", note=message[:1000], warning=True
        )
        logger.warning(message)
        raise kopf.TemporaryError(message, delay=timings.blocked_recheck) from exc


async def _patch_status(ctx: OperatorContext, sprite: Sprite, status: dict[str, Any]) -> None:
    """The fleet observer's write of a whole status computed from `sprite`, its view of the
    object. The view can be older than a handler's write (the watch lags): the view's
    resourceVersion is a precondition, so such a write fails with 409 instead of putting old
    values (observedGeneration, conditions, the sprite's id) back; the next pass sees the new."""
    namespace, name = sprite.metadata.namespace or "", sprite.metadata.name
    try:
        await ctx.require_writer().patch_status(
            SPRITES.gvp, namespace, name, status, resource_version=sprite.metadata.resource_version
        )
    except KubeApiError as exc:
        log.debug("status of %s/%s not written (%s): the next pass decides", namespace, name, exc)
        return
    STATUS_PATCHES.labels(kind="Sprite").inc()


def _retry_delay(exc: AdapterError) -> float:
    retry_after = getattr(exc, "retry_after", None)
    return float(retry_after) if retry_after else 10.0


# -- the fleet observer -----------------------------------------------------------------------


@kopf.on.startup()
async def start_fleet_observer(memo: kopf.Memo, **kwargs: Any) -> None:
    ctx = context_of(memo)
    sprite_directory: kopf.Index[tuple[str, str], Sprite] = kwargs["sprite_directory"]
    if ctx.backend is None:
        return
    indexed = IndexedSprites(sprite_directory)
    observer = FleetObserver(
        backend=ctx.require_backend(),
        sprites=indexed.all,
        current=indexed.current,
        writers=ctx.sprite_writers,
        patch_status=lambda sprite, status: _patch_status(ctx, sprite, status),
        clock=ctx.clock,
        settings=ctx.settings.backend,
        default_policy=ctx.settings.sprites.default_network_policy,
    )
    # Stopped by `close`, before the clients it writes through are closed.
    ctx.background.append(asyncio.create_task(observer.run_forever(), name="fleet-observer"))
