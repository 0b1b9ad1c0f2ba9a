"""health_remediate: run a command (as the Intent's Run), recreate a Sprite or restart one
of its services (carried out by the handler), or propose a pull request (an Intent of its
own)."""

from __future__ import annotations

from lattice_operator.api.v1alpha1 import Intent, LocalObjectReference
from lattice_operator.api.v1alpha1.intent import ForgeStatus, HealthRemediateParams, IntentResult
from lattice_operator.ports.cluster import ForgeGrant
from lattice_operator.reconcilers.intent_forge import followup_intent, followup_name
from lattice_operator.reconcilers.intent_kinds.run import through_run
from lattice_operator.reconcilers.intent_pass import IntentPass, RemediationWork
from lattice_operator.reconcilers.intent_reasons import IntentReason


def remediation_sprite(intent: Intent) -> str | None:
    """The Sprite a health_remediate Intent acts on (params.healthRemediate.spriteRef)."""
    params = intent.spec.params.health_remediate if intent.spec.kind == "health_remediate" else None
    if params is not None and params.sprite_ref is not None:
        return params.sprite_ref.name
    return None


class HealthRemediate:
    """health_remediate, by params.healthRemediate.remediation."""

    def sprite(self, intent: Intent) -> str | None:
        return remediation_sprite(intent)

    def grant(self, intent: Intent) -> ForgeGrant | None:
        return None  # open_pr's Intent is granted the forge, not this one

    def plan(self, step: IntentPass) -> None:
        params = step.intent.spec.params.health_remediate
        if params is None:
            step.missing_params()
        elif params.remediation == "run_command" and params.run is not None:
            through_run(step, params.run)
        elif params.remediation in ("recreate_sprite", "restart_service"):
            _remediate(step, params)
        elif params.remediation == "open_pr":
            _remediate_with_a_pr(step, params)
        else:
            step.set(
                "Succeeded",
                "Unknown",
                IntentReason.NOT_SUPPORTED,
                f"remediation {params.remediation} is not supported in this version",
            )


def _remediate(step: IntentPass, params: HealthRemediateParams) -> None:
    """recreate_sprite and restart_service: carried out once by the handler (through the
    Sprites backend port), which records the outcome in status.result; decided from it."""
    what = params.remediation
    assert what in ("recreate_sprite", "restart_service")
    missing = (
        "params.healthRemediate.spriteRef"
        if params.sprite_ref is None
        else "params.healthRemediate.service"
        if what == "restart_service" and not params.service
        else None
    )
    if missing is not None or params.sprite_ref is None:
        step.fail(IntentReason.REMEDIATION_FAILED, f"remediation {what} needs {missing}")
        return
    name = params.sprite_ref.name
    step.status.sprite_ref = LocalObjectReference(name=name)
    done = step.status.result
    if done is not None:
        if done.status == "success":
            step.set("Succeeded", "True", IntentReason.REMEDIATED, done.summary)
        else:
            step.set("Succeeded", "False", IntentReason.REMEDIATION_FAILED, done.summary)
        return
    sprite = step.world.sprite
    if sprite is None or sprite.metadata.deletion_timestamp is not None:
        step.set(
            "Succeeded", "Unknown", IntentReason.SPRITE_NOT_READY, f"waiting for Sprite {name}"
        )
        return
    # A broken sprite is what recreate_sprite is for: it does not wait for Ready.
    step.plan.remediation = RemediationWork(action=what, sprite=sprite, service=params.service)
    doing = (
        f"recreating Sprite {name}"
        if what == "recreate_sprite"
        else f"restarting service {params.service} of Sprite {name}"
    )
    step.set("Succeeded", "Unknown", IntentReason.EXECUTING, doing)


def _remediate_with_a_pr(step: IntentPass, params: HealthRemediateParams) -> None:
    """open_pr: a pr_create_from_plan Intent `<name>-pr`, owned by this one, which goes
    through policy, approval and grants like any other (nothing is opened from here)."""
    if not step.world.forge_ready:
        step.set(
            "Succeeded",
            "Unknown",
            IntentReason.NO_FORGE_CONFIGURED,
            "opening a pull request needs a forge",
        )
        return
    missing = [
        f"params.healthRemediate.{name}"
        for name, value in (("repo", params.repo), ("plan", params.plan), ("run", params.run))
        if not value
    ]
    if missing or params.repo is None or params.plan is None:
        step.fail(
            IntentReason.REMEDIATION_FAILED, f"remediation open_pr needs {', '.join(missing)}"
        )
        return
    intent = step.intent
    name = followup_name(intent)
    manifest = followup_intent(
        intent,
        {
            "kind": "pr_create_from_plan",
            "summary": intent.spec.summary,
            "proposedBy": {"type": "system", "name": intent.metadata.name},
            "params": {
                "prCreateFromPlan": {
                    "repo": params.repo,
                    "baseBranch": params.base_branch,
                    "plan": params.plan,
                    **({"run": params.run.to_wire()} if params.run is not None else {}),
                }
            },
            "allowedActions": list(intent.spec.allowed_actions),
        },
    )
    # Created (create-or-exists) on this pass and the next: a failed create is retried
    # before the remediation counts as done.
    step.plan.create.append(manifest)
    forge = step.status.forge
    if forge is None or forge.followup != name:
        step.status.forge = (forge or ForgeStatus(repo=params.repo)).model_copy(
            update={"followup": name}
        )
        step.set("Succeeded", "Unknown", IntentReason.EXECUTING, f"starting Intent {name}")
        return
    message = f"started Intent {name} (pr_create_from_plan on {params.repo})"
    step.status.result = IntentResult(status="success", summary=message)
    step.set("Succeeded", "True", IntentReason.REMEDIATED, message)


__all__ = ["HealthRemediate", "remediation_sprite"]
