"""environment_change: an approved ENVIRONMENT_PROPOSAL changes the environment future Runs
get.

- `repo_specific`: the Sprite of params.spriteRef. A step type adds (or adjusts) a step of
  its `spec.environment`; `enable_network_access` adds allow rules to its
  `spec.networkPolicy` (the Sprite reconciler applies it at the backend). The patch is
  written before the Intent's status, guarded by the Sprite's resourceVersion, so the Intent
  never says Succeeded for a change that was not made; a pass that finds the change there
  already just succeeds.
- `global_candidate`: nothing is applied; the Intent ends Succeeded (reason
  GlobalCandidate), a candidate that a human promotes with `lattice env promote`.
- `escalate_to_human`: a warning Event and the result; nothing runs.
"""

from __future__ import annotations

from lattice_operator.api.v1alpha1 import Intent
from lattice_operator.api.v1alpha1.intent import EnvironmentChangeParams, IntentResult
from lattice_operator.ports.cluster import ForgeGrant
from lattice_operator.reconcilers.intent_kinds.environment_steps import (
    AdjustmentInvalid,
    domains_of,
    step_of,
    with_domains,
    with_step,
)
from lattice_operator.reconcilers.intent_pass import IntentPass, Notice, SpritePatch
from lattice_operator.reconcilers.intent_reasons import IntentReason

CHANGED_EVENT = "EnvironmentChanged"
CANDIDATE_EVENT = "EnvironmentCandidate"
ESCALATED_EVENT = "EnvironmentEscalated"


def environment_sprite(intent: Intent) -> str | None:
    """The Sprite an environment_change Intent changes (None: none named)."""
    params = intent.spec.params.environment_change
    if params is None or params.sprite_ref is None:
        return None
    return params.sprite_ref.name


def _succeed(step: IntentPass, reason: IntentReason, summary: str, event: str) -> None:
    step.status.result = IntentResult(status="success", summary=summary[:1024])
    step.set("Succeeded", "True", reason, summary)
    step.plan.notices.append(Notice(event, summary, warning=reason != IntentReason.COMPLETED))


class EnvironmentChange:
    """environment_change, by params.environmentChange's scope and adjustment type."""

    def sprite(self, intent: Intent) -> str | None:
        return environment_sprite(intent)

    def grant(self, intent: Intent) -> ForgeGrant | None:
        return None

    def plan(self, step: IntentPass) -> None:
        params = step.intent.spec.params.environment_change
        if params is None:
            step.missing_params()
            return
        kind = params.suggested_adjustment.type
        evidence = f" ({params.observed_failure.phase}: {params.observed_failure.stderr_hint})"
        if kind == "escalate_to_human":
            _succeed(
                step,
                IntentReason.ESCALATED_TO_HUMAN,
                f"the sprite asks a human to look at its environment{evidence}; nothing applied",
                ESCALATED_EVENT,
            )
            return
        if params.scope == "global_candidate":
            _succeed(
                step,
                IntentReason.GLOBAL_CANDIDATE,
                f"{kind} recorded as a global candidate, not applied: "
                f"`lattice env promote {step.intent.metadata.name} --sprite NAME` applies it",
                CANDIDATE_EVENT,
            )
            return
        try:
            self._apply(step, params)
        except AdjustmentInvalid as exc:
            step.fail(IntentReason.INVALID_SPEC, str(exc))

    def _apply(self, step: IntentPass, params: EnvironmentChangeParams) -> None:
        name = environment_sprite(step.intent)
        if name is None:
            step.fail(
                IntentReason.INVALID_SPEC,
                "params.environmentChange.spriteRef must name the Sprite a repo_specific "
                "change applies to",
            )
            return
        sprite = step.world.sprite
        if sprite is None:
            step.fail(IntentReason.SPRITE_FAILED, f"Sprite {name} not found: nothing changed")
            return
        adjustment = params.suggested_adjustment
        guard = {"resourceVersion": sprite.metadata.resource_version}
        if adjustment.type == "enable_network_access":
            domains = domains_of(adjustment)
            policy = with_domains(sprite.spec.network_policy, domains)
            what = ", ".join(domains)
            if policy is not None:
                step.plan.sprite_patch = SpritePatch(
                    name, {"metadata": guard, "spec": {"networkPolicy": policy.to_wire()}}
                )
                summary = f"Sprite {name}'s networkPolicy now allows {what}"
            elif sprite.spec.network_policy is None:
                summary = (
                    f"Sprite {name} has no spec.networkPolicy: the operator's default policy "
                    f"applies to {what} and was not changed"
                )
            else:
                summary = f"Sprite {name}'s networkPolicy allows {what} already"
            _succeed(step, IntentReason.COMPLETED, summary, CHANGED_EVENT)
            return
        new = step_of(step.intent.metadata.name, adjustment)
        current = sprite.spec.environment
        if new not in current:
            steps = with_step(current, new)
            step.plan.sprite_patch = SpritePatch(
                name, {"metadata": guard, "spec": {"environment": [s.to_wire() for s in steps]}}
            )
        _succeed(
            step,
            IntentReason.COMPLETED,
            f"Sprite {name}'s environment has step {new.name} ({new.type}): {new.command}",
            CHANGED_EVENT,
        )


__all__ = [
    "CANDIDATE_EVENT",
    "CHANGED_EVENT",
    "ESCALATED_EVENT",
    "EnvironmentChange",
    "environment_sprite",
]
