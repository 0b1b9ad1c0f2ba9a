"""checkpoint_restore Intents: who holds the Sprite, and the restore at the backend."""

from __future__ import annotations

import logging
from typing import cast

import kopf

from lattice_adapters.kube import KubeApiError, resource_path
from lattice_operator.api.v1alpha1 import Intent
from lattice_operator.api.v1alpha1.intent import IntentResult
from lattice_operator.api.v1alpha1.resources import INTENTS, SPRITE_CHECKPOINTS
from lattice_operator.api.v1alpha1.spritecheckpoint import SpriteCheckpoint
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.ports.errors import AdapterError
from lattice_operator.reconcilers.intent_pass import RestoreWork
from lattice_operator.reconcilers.sprite_claims import DONE, RunClaim

log = logging.getLogger(__name__)


def sprite_holder(
    intent: Intent,
    namespace: str,
    sprite: str | None,
    claims: kopf.Index[tuple[str, str], RunClaim] | None,
) -> str | None:
    """The Run that holds (or waits in line for) the Sprite of a checkpoint_restore Intent."""
    if intent.spec.kind != "checkpoint_restore" or sprite is None or claims is None:
        return None
    active = sorted(
        (c for c in claims.get((namespace, sprite), []) if c.phase not in DONE),
        key=lambda c: c.name,
    )
    return active[0].name if active else None


async def restore(ctx: OperatorContext, intent: Intent, work: RestoreWork) -> kopf.Body | None:
    """Restore the checkpoint and record the outcome; the Intent as stored afterwards (None
    when nothing was done: no backend yet, the next pass tries again)."""
    if ctx.backend is None:
        log.warning("restore %s: %s", intent.metadata.name, ctx.backend_problem)
        return None
    namespace = intent.metadata.namespace or ""
    result = await _restore(ctx, namespace, work)
    log.info("restore %s: %s", intent.metadata.name, result.summary)
    path = resource_path(*INTENTS.gvp, namespace, intent.metadata.name, "status")
    stored = await ctx.require_kube().merge_patch(path, {"status": {"result": result.to_wire()}})
    return kopf.Body(cast(kopf.RawBody, stored))


async def _restore(ctx: OperatorContext, namespace: str, work: RestoreWork) -> IntentResult:
    backend = ctx.require_backend()
    checkpoint_id = work.checkpoint_id
    if checkpoint_id is None:
        found = await _held_by(ctx, namespace, work)
        if isinstance(found, IntentResult):
            return found
        checkpoint_id = found
    try:
        await backend.restore_checkpoint(work.sprite, checkpoint_id)
    except AdapterError as exc:
        return IntentResult(
            status="failure", summary=f"restoring {work.sprite} to {checkpoint_id}: {exc}"[:1024]
        )
    what = f" (SpriteCheckpoint {work.checkpoint})" if work.checkpoint else ""
    return IntentResult(
        status="success", summary=f"restored {work.sprite} to checkpoint {checkpoint_id}{what}"
    )


async def _held_by(ctx: OperatorContext, namespace: str, work: RestoreWork) -> str | IntentResult:
    """The backend id a SpriteCheckpoint holds, or why it cannot be restored."""
    name = work.checkpoint or ""
    path = resource_path(*SPRITE_CHECKPOINTS.gvp, namespace, name)
    try:
        checkpoint = SpriteCheckpoint.model_validate(await ctx.require_kube().get(path))
    except KubeApiError as exc:
        if not exc.not_found:
            raise
        return IntentResult(status="failure", summary=f"no SpriteCheckpoint {name}")
    if checkpoint.status.sprite_name != work.sprite or not checkpoint.status.checkpoint_id:
        return IntentResult(
            status="failure",
            summary=f"SpriteCheckpoint {name} holds no checkpoint of {work.sprite} "
            f"(phase {checkpoint.status.phase or 'Pending'})",
        )
    return checkpoint.status.checkpoint_id


__all__ = ["restore", "sprite_holder"]
