"""A health_remediate Intent's recreate_sprite and restart_service, carried out through the
Sprites backend port once the pipeline (policy, approval, grants) let it execute; the outcome
goes to the Intent's status.result, from which the next pass decides."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.api.v1alpha1 import API_VERSION, Intent
from lattice_operator.api.v1alpha1.intent import IntentResult
from lattice_operator.api.v1alpha1.resources import INTENTS, SPRITES
from lattice_operator.errors import LatticeError
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.ports.errors import AdapterError, NotFound
from lattice_operator.reconcilers.intent import RemediationWork
from lattice_operator.reconcilers.sprite import reconcile_sprite
from lattice_operator.reconcilers.sprite_writers import sprite_key

log = logging.getLogger(__name__)


async def remediate(
    ctx: OperatorContext, intent: Intent, work: RemediationWork
) -> dict[str, Any] | None:
    """Carry the work out and record its outcome; the Intent as stored afterwards (None when
    nothing was done: no backend yet, the next pass tries again). A crash between the
    remediation and its record repeats it on the next pass (both are safe to repeat)."""
    if ctx.backend is None:
        log.warning("remediation %s: %s", intent.metadata.name, ctx.backend_problem)
        return None
    sprite = work.sprite
    name = sprite.backend_name()
    try:
        if work.action == "restart_service":
            assert work.service is not None
            await ctx.backend.stop_service(name, work.service)
            await ctx.backend.start_service(name, work.service)
            result = IntentResult(
                status="success",
                summary=f"service {work.service} of Sprite {sprite.metadata.name} restarted",
            )
        else:
            result = await _recreate(ctx, work)
    except (AdapterError, LatticeError) as exc:
        what = work.action.replace("_", " ")
        result = IntentResult(status="failure", summary=f"{what} failed: {exc}"[:1024])
    log.info("remediation %s: %s", intent.metadata.name, result.summary)
    return await ctx.require_writer().patch_status(
        INTENTS.gvp,
        intent.metadata.namespace or "",
        intent.metadata.name,
        {"result": result.to_wire()},
    )


async def _recreate(ctx: OperatorContext, work: RemediationWork) -> IntentResult:
    """Delete the backend sprite and make it again as the Sprite's spec says (its network
    policy and services too), whatever its deletionPolicy and spec.recreate say: that is
    what was asked for. The Sprite's status records the new sprite; an Event says why."""
    backend = ctx.require_backend()
    sprite = work.sprite
    name = sprite.backend_name()
    before = sprite.status.sprite_id
    namespace = sprite.metadata.namespace or ""
    async with ctx.sprite_writers.hold(sprite_key(sprite)):
        with contextlib.suppress(NotFound):  # already gone: what a broken sprite may look like
            await backend.delete_sprite(name)
        spec = sprite.spec.model_copy(update={"recreate": True})
        outcome = await reconcile_sprite(
            sprite.model_copy(update={"spec": spec}),
            backend,
            ctx.clock.now(),
            default_policy=ctx.settings.sprites.default_network_policy,
        )
    status: dict[str, Any] = outcome.status.to_patch()
    await ctx.require_writer().patch_status(SPRITES.gvp, namespace, sprite.metadata.name, status)
    summary = (
        f"Sprite {sprite.metadata.name} recreated: backend sprite {name} "
        f"{before or '?'} -> {outcome.status.sprite_id or '?'}"
    )
    regarding = ObjectRef(
        api_version=API_VERSION,
        kind="Sprite",
        namespace=namespace,
        name=sprite.metadata.name,
        uid=sprite.metadata.uid or "",
    )
    await ctx.require_writer().post_event(regarding, reason="Recreated", note=summary)
    return IntentResult(status="success", summary=summary[:1024])
