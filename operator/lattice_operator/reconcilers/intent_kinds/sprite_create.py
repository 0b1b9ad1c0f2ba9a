"""sprite_create: create the Sprite of params.spriteCreate; it succeeds when it is Ready."""

from __future__ import annotations

from lattice_operator.api.v1alpha1 import Intent, LocalObjectReference, find_condition
from lattice_operator.api.v1alpha1.intent import IntentResult
from lattice_operator.builders import sprite_for_intent
from lattice_operator.ports.cluster import ForgeGrant
from lattice_operator.reconcilers.intent_pass import IntentPass
from lattice_operator.reconcilers.intent_reasons import IntentReason


class SpriteCreate:
    """sprite_create: the Sprite of params.spriteCreate."""

    def sprite(self, intent: Intent) -> str | None:
        return None  # read once status.spriteRef names it (after the create)

    def grant(self, intent: Intent) -> ForgeGrant | None:
        return None

    def plan(self, step: IntentPass) -> None:
        params = step.intent.spec.params.sprite_create
        if params is None:
            step.missing_params()
            return
        step.status.sprite_ref = LocalObjectReference(name=params.name)
        sprite = step.world.sprite
        if sprite is None:
            step.plan.create.append(sprite_for_intent(step.intent, params))
            step.set(
                "Succeeded", "Unknown", IntentReason.EXECUTING, f"created Sprite {params.name}"
            )
            return
        ready = find_condition(sprite.status.conditions, "Ready")
        if ready is not None and ready.status == "True":
            step.status.result = IntentResult(
                status="success", summary=f"Sprite {params.name} is ready at {sprite.status.url}"
            )
            step.set(
                "Succeeded", "True", IntentReason.SPRITE_READY, f"Sprite {params.name} is ready"
            )
        elif ready is not None and ready.status == "False":
            step.status.result = IntentResult(status="failure", summary=ready.message)
            step.set(
                "Succeeded",
                "False",
                IntentReason.SPRITE_FAILED,
                f"Sprite {params.name}: {ready.message}",
            )
        else:
            step.set(
                "Succeeded", "Unknown", IntentReason.EXECUTING, f"waiting for Sprite {params.name}"
            )


__all__ = ["SpriteCreate"]
