"""kopf wiring of SpriteCheckpoints: take the backend checkpoint once, delete it with the
object (kopf's finalizer holds the object until then), keep the Sprite's retention and its
status list of the newest checkpoints.

`_list_into_sprite` is the one writer of a Sprite's `status.checkpoints`: a SpriteCheckpoint
taken or deleted, and a Run gone WAITING (the checkpoint it resumes from) call it, one at a
time per Sprite, each listing the backend afresh."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from typing import Any

import kopf
from pydantic import ValidationError

from lattice_adapters.kube import KubeApiError
from lattice_adapters.kube import NotFound as ObjectNotFound
from lattice_operator.api.v1alpha1 import Sprite, set_condition
from lattice_operator.api.v1alpha1.resources import RUNS, SPRITE_CHECKPOINTS, SPRITES
from lattice_operator.api.v1alpha1.spritecheckpoint import SpriteCheckpoint
from lattice_operator.handlers._context import OperatorContext, context_of
from lattice_operator.handlers._parsed import object_ref
from lattice_operator.modeling import first_error
from lattice_operator.ports.errors import AdapterError, Conflict, NotFound
from lattice_operator.reconcilers.sprite_checkpoint import (
    backend_comment,
    decide_take,
    deletes_backend,
    sprite_entries,
    taken_before,
    to_prune,
    with_phase,
)

log = logging.getLogger(__name__)
RETRY = 5.0
# One listing and write at a time per Sprite: a slower, older listing never lands last.
_listing: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = weakref.WeakValueDictionary()


@kopf.on.resume(*SPRITE_CHECKPOINTS.gvp)
@kopf.on.create(*SPRITE_CHECKPOINTS.gvp)
async def take_checkpoint(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    ctx = context_of(memo)
    try:
        checkpoint = SpriteCheckpoint.model_validate(dict(body))
    except ValidationError as exc:
        await _fail_spec(ctx, body, first_error("", exc))
        return
    sprite = await _sprite(ctx, checkpoint)
    decision = decide_take(checkpoint, sprite)
    if decision.action == "done":
        return
    now = ctx.clock.now()
    if decision.action == "fail":
        await _write(
            ctx,
            checkpoint,
            with_phase(checkpoint, "Failed", decision.reason, decision.message, now).to_patch(),
        )
        return
    if decision.action == "wait" or ctx.backend is None:
        reason = decision.reason or "BackendNotConfigured"
        message = decision.message or ctx.backend_problem
        await _write(
            ctx, checkpoint, with_phase(checkpoint, "Pending", reason, message, now).to_patch()
        )
        raise kopf.TemporaryError(message, delay=RETRY)
    backend, backend_sprite = ctx.backend, decision.sprite or ""
    try:
        taken = taken_before(
            await backend.list_checkpoints(backend_sprite), checkpoint.metadata.uid or ""
        )
        if taken is None:
            taken = await backend.create_checkpoint(backend_sprite, backend_comment(checkpoint))
    except AdapterError as exc:
        message = f"the backend did not take the checkpoint: {exc}"
        await _write(
            ctx,
            checkpoint,
            with_phase(checkpoint, "Pending", "BackendError", message, ctx.clock.now()).to_patch(),
        )
        raise kopf.TemporaryError(message, delay=RETRY) from exc
    status = with_phase(
        checkpoint,
        "Ready",
        "Taken",
        f"checkpoint {taken.id} of {backend_sprite}",
        ctx.clock.now(),
        taken=taken,
        sprite=backend_sprite,
    )
    await _write(ctx, checkpoint, status.to_patch())
    await ctx.require_writer().post_event(
        object_ref(body), reason="Taken", note=f"checkpoint {taken.id} of {backend_sprite}"
    )
    if sprite is not None:
        await _prune_and_list(ctx, sprite)


@kopf.on.delete(*SPRITE_CHECKPOINTS.gvp)
async def delete_checkpoint(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    ctx = context_of(memo)
    try:
        checkpoint = SpriteCheckpoint.model_validate(dict(body))
    except ValidationError:
        return  # never taken: nothing at the backend
    sprite = await _sprite(ctx, checkpoint)
    if not deletes_backend(checkpoint) or checkpoint.status.sprite_name is None:
        return
    if ctx.backend is None:
        raise kopf.TemporaryError(ctx.backend_problem, delay=RETRY)
    checkpoint_id = checkpoint.status.checkpoint_id or ""
    if checkpoint.status.phase != "Deleting":
        message = f"deleting checkpoint {checkpoint_id} of {checkpoint.status.sprite_name}"
        deleting = with_phase(checkpoint, "Deleting", "Deleting", message, ctx.clock.now())
        with contextlib.suppress(KubeApiError):  # gone already: nothing to say
            await _write(ctx, checkpoint, deleting.to_patch())
    try:
        await ctx.backend.delete_checkpoint(checkpoint.status.sprite_name, checkpoint_id)
    except NotFound:
        pass  # already gone (or the sprite is)
    except Conflict as exc:
        # The checkpoint the sprite's files are on now: the backend keeps it; holding the
        # object for ever would not free it.
        await ctx.require_writer().post_event(
            object_ref(body),
            reason="BackendKept",
            note=f"{checkpoint_id}: {exc}"[:1024],
            warning=True,
        )
    except AdapterError as exc:
        raise kopf.TemporaryError(f"deleting {checkpoint_id}: {exc}", delay=RETRY) from exc
    if sprite is not None:
        await _list_into_sprite(ctx, sprite, exclude=checkpoint.metadata.name)


@kopf.on.event(*RUNS.gvp, field="status.phase", value="Waiting")
async def list_run_checkpoint(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """A Run gone WAITING has a checkpoint to resume from (the sprite's or one the operator
    took): it is listed in its Sprite's status now, not at the next SpriteCheckpoint change."""
    ctx = context_of(memo)
    resume = body.get("status", {}).get("resume") or {}
    checkpoint = resume.get("checkpointId")
    sprite_name = (body.get("spec", {}).get("spriteRef") or {}).get("name")
    namespace = body.metadata.namespace or ""
    if not checkpoint or not sprite_name:
        return
    key = (namespace, str(sprite_name), str(checkpoint))
    if key in ctx.listed_waits:
        return
    sprite = await _sprite_named(ctx, namespace, str(sprite_name))
    if sprite is None:
        return
    if all(entry.id != checkpoint for entry in sprite.status.checkpoints):
        await _list_into_sprite(ctx, sprite)
    ctx.listed_waits.first(key)


async def _sprite(ctx: OperatorContext, checkpoint: SpriteCheckpoint) -> Sprite | None:
    return await _sprite_named(
        ctx, checkpoint.metadata.namespace or "", checkpoint.spec.sprite_ref.name
    )


async def _sprite_named(ctx: OperatorContext, namespace: str, name: str) -> Sprite | None:
    try:
        return Sprite.model_validate(await ctx.require_writer().read(SPRITES.gvp, namespace, name))
    except ObjectNotFound:
        return None
    except ValidationError:
        return None


async def _objects(ctx: OperatorContext, sprite: Sprite) -> list[SpriteCheckpoint]:
    """The SpriteCheckpoints of a Sprite."""
    namespace = sprite.metadata.namespace or ""
    found = []
    for item in await ctx.require_writer().list(SPRITE_CHECKPOINTS.gvp, namespace):
        try:
            parsed = SpriteCheckpoint.model_validate(item)
        except ValidationError:
            continue
        if parsed.spec.sprite_ref.name == sprite.metadata.name:
            found.append(parsed)
    return found


async def _prune_and_list(ctx: OperatorContext, sprite: Sprite) -> None:
    """Delete the objects past the Sprite's retention (each deletes its backend checkpoint
    in turn), then list the newest checkpoints in its status."""
    objects = await _objects(ctx, sprite)
    retention = sprite.spec.checkpoints.retention if sprite.spec.checkpoints else None
    namespace = sprite.metadata.namespace or ""
    pruned = to_prune(objects, retention)
    for name in pruned:
        log.info("SpriteCheckpoint %s/%s is past its Sprite's retention", namespace, name)
        await ctx.require_writer().delete(SPRITE_CHECKPOINTS.gvp, namespace, name)
    await _list_into_sprite(
        ctx, sprite, objects=[o for o in objects if o.metadata.name not in pruned]
    )


async def _list_into_sprite(
    ctx: OperatorContext,
    sprite: Sprite,
    *,
    objects: list[SpriteCheckpoint] | None = None,
    exclude: str | None = None,
) -> None:
    """Write the Sprite's newest backend checkpoints into its status (best effort: the
    next take or delete writes them again)."""
    backend_name = sprite.status.sprite_name
    if ctx.backend is None or not backend_name:
        return
    key = (sprite.metadata.namespace or "", sprite.metadata.name)
    lock = _listing.get(key)
    if lock is None:
        lock = _listing[key] = asyncio.Lock()
    async with lock:
        await _list_now(ctx, sprite, backend_name, objects, exclude)


async def _list_now(
    ctx: OperatorContext,
    sprite: Sprite,
    backend_name: str,
    objects: list[SpriteCheckpoint] | None,
    exclude: str | None,
) -> None:
    assert ctx.backend is not None
    if objects is None:
        objects = [o for o in await _objects(ctx, sprite) if o.metadata.name != exclude]
    try:
        listed = await ctx.backend.list_checkpoints(backend_name)
    except AdapterError as exc:
        log.warning("listing the checkpoints of %s: %s", backend_name, exc)
        return
    entries = [e.to_wire() for e in sprite_entries(listed, objects)]
    # The Sprite deleted meanwhile: nothing to list into.
    with contextlib.suppress(ObjectNotFound):
        await ctx.require_writer().patch_status(
            SPRITES.gvp,
            sprite.metadata.namespace or "",
            sprite.metadata.name,
            {"checkpoints": entries},
        )


async def _write(
    ctx: OperatorContext, checkpoint: SpriteCheckpoint, status: dict[str, Any]
) -> None:
    await ctx.require_writer().patch_status(
        SPRITE_CHECKPOINTS.gvp,
        checkpoint.metadata.namespace or "",
        checkpoint.metadata.name,
        status,
    )


async def _fail_spec(ctx: OperatorContext, body: kopf.Body, message: str) -> None:
    """A spec the CRD let through but the model refuses: said in the status, with the field."""
    conditions = set_condition(
        [],
        type="Ready",
        status="False",
        reason="InvalidSpec",
        message=message[:1024],
        observed_generation=body.metadata.get("generation"),
        now=ctx.clock.now(),
    )
    wire = [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in conditions]
    await ctx.require_writer().patch_status(
        SPRITE_CHECKPOINTS.gvp,
        body.metadata.namespace or "",
        body.metadata.name or "",
        {"phase": "Failed", "conditions": wire},
    )
    await ctx.require_writer().post_event(
        object_ref(body), reason="InvalidSpec", note=message[:1024], warning=True
    )


__all__ = ["delete_checkpoint", "take_checkpoint"]
