"""checkpoint_restore: roll a Sprite's files back to one of its checkpoints.

Refused while a Run holds the Sprite (or waits in line for it): a restore ends the sprite's
sessions and swaps its files under whatever runs there. The handler carries the restore out
once Executing is written, and records the outcome in status.result; the next pass ends the
Intent on it (the audit log then says who approved and what was restored)."""

from __future__ import annotations

from lattice_operator.api.v1alpha1 import Intent, LocalObjectReference, find_condition
from lattice_operator.ports.cluster import ForgeGrant
from lattice_operator.reconcilers.intent_pass import IntentPass, Notice, RestoreWork
from lattice_operator.reconcilers.intent_reasons import IntentReason

RESTORED_EVENT = "CheckpointRestored"
RESTORE_FAILED_EVENT = "CheckpointRestoreFailed"


def restore_sprite(intent: Intent) -> str | None:
    """The Sprite a checkpoint_restore Intent rolls back."""
    params = intent.spec.params.checkpoint_restore
    return params.sprite if params is not None else None


def _approvers(step: IntentPass) -> tuple[str, ...]:
    return tuple(sorted({a.user for a in step.status.approvals if a.decision == "approve"}))


class CheckpointRestore:
    """checkpoint_restore: the Sprite and checkpoint of params.checkpointRestore."""

    def sprite(self, intent: Intent) -> str | None:
        return restore_sprite(intent)

    def grant(self, intent: Intent) -> ForgeGrant | None:
        return None

    def plan(self, step: IntentPass) -> None:
        params = step.intent.spec.params.checkpoint_restore
        if params is None:
            step.missing_params()
            return
        step.status.sprite_ref = LocalObjectReference(name=params.sprite)
        what = params.checkpoint_id or f"SpriteCheckpoint {params.checkpoint}"
        result = step.status.result
        if result is not None:
            # An Event on the Intent says what was restored, approved by whom.
            approvers = _approvers(step)
            who = f"; approved by {', '.join(approvers)}" if approvers else ""
            if result.status == "success":
                step.set("Succeeded", "True", IntentReason.RESTORED, result.summary)
                step.plan.notices.append(Notice(RESTORED_EVENT, f"{result.summary}{who}"))
            else:
                step.set("Succeeded", "False", IntentReason.RESTORE_FAILED, result.summary)
                step.plan.notices.append(
                    Notice(RESTORE_FAILED_EVENT, f"{result.summary}{who}", warning=True)
                )
            return
        # Planned again on each pass until its outcome is recorded (an operator that stopped
        # between Executing and the restore does it then): restoring twice is the same.
        holder = step.world.sprite_holder
        if holder is not None:
            step.fail(
                IntentReason.SPRITE_HELD,
                f"Run {holder} holds Sprite {params.sprite}: a restore would end its session "
                "and swap its files; restore once it is done",
            )
            return
        sprite = step.world.sprite
        ready = find_condition(sprite.status.conditions, "Ready") if sprite is not None else None
        backend = sprite.status.sprite_name if sprite is not None else None
        if ready is None or ready.status != "True" or not backend:
            step.set(
                "Succeeded",
                "Unknown",
                IntentReason.SPRITE_NOT_READY,
                f"waiting for Sprite {params.sprite} to be Ready",
            )
            return
        step.plan.restore = RestoreWork(
            sprite=backend,
            checkpoint_id=params.checkpoint_id,
            checkpoint=params.checkpoint,
            approved_by=_approvers(step),
        )
        step.set(
            "Succeeded",
            "Unknown",
            IntentReason.EXECUTING,
            f"restoring Sprite {params.sprite} to {what}",
        )


__all__ = ["RESTORED_EVENT", "RESTORE_FAILED_EVENT", "CheckpointRestore", "restore_sprite"]
