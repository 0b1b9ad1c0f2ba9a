"""checkpoint_restore Intents: the restore at the backend, and its Lifeloop receipts
(published once the outcome is stored in the Intent's status)."""

from __future__ import annotations

import logging
from typing import Any

from lattice_adapters.kube import NotFound as ObjectNotFound
from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.api.v1alpha1 import Intent
from lattice_operator.api.v1alpha1.intent import IntentResult
from lattice_operator.api.v1alpha1.resources import INTENTS, SPRITE_CHECKPOINTS
from lattice_operator.api.v1alpha1.spritecheckpoint import SpriteCheckpoint
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.lifeloop.classes import FailureClass
from lattice_operator.lifeloop.mapping import SpriteOperation
from lattice_operator.lifeloop.operations import operation_receipts
from lattice_operator.lifeloop.receipts import LifecycleReceipt
from lattice_operator.ports.errors import AdapterError
from lattice_operator.reconcilers.intent_pass import RestoreWork

log = logging.getLogger(__name__)


async def restore(ctx: OperatorContext, intent: Intent, work: RestoreWork) -> dict[str, Any] | None:
    """Restore the checkpoint and record the outcome, then publish its receipts; the Intent
    as stored afterwards (None when nothing was done: no backend yet, the next pass tries
    again)."""
    if ctx.backend is None:
        log.warning("restore %s: %s", intent.metadata.name, ctx.backend_problem)
        return None
    namespace = intent.metadata.namespace or ""
    result, checkpoint_id, failure = await _restore(ctx, namespace, work)
    log.info("restore %s: %s", intent.metadata.name, result.summary)
    stored = await ctx.require_writer().patch_status(
        INTENTS.gvp, namespace, intent.metadata.name, {"result": result.to_wire()}
    )
    # Status before receipts: the outcome is stored, whatever happens to its receipts.
    receipts = restore_receipts(ctx, intent, work, result, checkpoint_id, failure)
    try:
        await ctx.require_writer().publish_receipts(intent_ref(intent), receipts)
    except Exception as exc:  # evidence only: the restore and its status stand
        log.warning("restore %s: its receipts were not posted: %s", intent.metadata.name, exc)
    return stored


def intent_ref(intent: Intent) -> ObjectRef:
    """What an Event regarding the Intent points at (its receipts keyed by its uid)."""
    return ObjectRef(
        api_version=intent.api_version,
        kind="Intent",
        namespace=intent.metadata.namespace or "",
        name=intent.metadata.name,
        uid=intent.metadata.uid or intent.metadata.name,
    )


def restore_receipts(
    ctx: OperatorContext,
    intent: Intent,
    work: RestoreWork,
    result: IntentResult,
    checkpoint_id: str | None,
    failure: FailureClass | None,
) -> list[LifecycleReceipt]:
    """Which checkpoint, which Sprite, whose approval (`policy` when no one's was needed)."""
    params = intent.spec.params.checkpoint_restore
    facts: dict[str, object] = {
        "sprite": params.sprite if params is not None else work.sprite,
        "backend_sprite": work.sprite,
        "checkpoint_id": checkpoint_id,
        "sprite_checkpoint": work.checkpoint,
        "approved_by": list(work.approved_by) or ["policy"],
    }
    succeeded = result.status == "success"
    return operation_receipts(
        SpriteOperation.CHECKPOINT_RESTORED
        if succeeded
        else SpriteOperation.CHECKPOINT_RESTORE_FAILED,
        scope=intent.metadata.uid or intent.metadata.name,
        task=intent.metadata.name,
        sprite=work.sprite,
        facts=facts,
        clock=ctx.clock,
        failure=failure,
        warning="" if succeeded else result.summary,
    )


async def _restore(
    ctx: OperatorContext, namespace: str, work: RestoreWork
) -> tuple[IntentResult, str | None, FailureClass | None]:
    """The outcome, the backend checkpoint (when known) and, on failure, its class."""
    backend = ctx.require_backend()
    checkpoint_id = work.checkpoint_id
    if checkpoint_id is None:
        found = await _held_by(ctx, namespace, work)
        if isinstance(found, IntentResult):
            return found, None, FailureClass.INVALID_REQUEST
        checkpoint_id = found
    try:
        await backend.restore_checkpoint(work.sprite, checkpoint_id)
    except AdapterError as exc:
        summary = f"restoring {work.sprite} to {checkpoint_id}: {exc}"[:1024]
        return IntentResult(status="failure", summary=summary), checkpoint_id, exc.failure_class
    what = f" (SpriteCheckpoint {work.checkpoint})" if work.checkpoint else ""
    summary = f"restored {work.sprite} to checkpoint {checkpoint_id}{what}"
    return IntentResult(status="success", summary=summary), checkpoint_id, None


async def _held_by(ctx: OperatorContext, namespace: str, work: RestoreWork) -> str | IntentResult:
    """The backend id a SpriteCheckpoint holds, or why it cannot be restored."""
    name = work.checkpoint or ""
    try:
        stored = await ctx.require_writer().read(SPRITE_CHECKPOINTS.gvp, namespace, name)
    except ObjectNotFound:
        return IntentResult(status="failure", summary=f"no SpriteCheckpoint {name}")
    checkpoint = SpriteCheckpoint.model_validate(stored)
    if checkpoint.status.sprite_name != work.sprite or not checkpoint.status.checkpoint_id:
        return IntentResult(
            status="failure",
            summary=f"SpriteCheckpoint {name} holds no checkpoint of {work.sprite} "
            f"(phase {checkpoint.status.phase or 'Pending'})",
        )
    return checkpoint.status.checkpoint_id


__all__ = ["intent_ref", "restore"]
