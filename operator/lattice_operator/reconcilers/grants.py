"""Which Run an Intent's grants apply to, and which existing Run an Intent may adopt. Pure.

`spec.intentRef` is an ordinary field anyone who can create a Run may set, so it names
the Intent a Run *claims*, never proves anything. An Intent's grants (allowedActions,
credentials) apply to a Run only when all of these hold:

- the Run has a controller ownerReference to the Intent's uid;
- the Intent's `status.runRef` names this Run (the operator wrote it: users cannot);
- the Intent is approved and executing (Approved, Executing, Waiting).

Otherwise the Run gets nothing: every ACTION_REQUEST is refused with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from lattice_operator.api.v1alpha1 import Intent, Run
from lattice_operator.api.v1alpha1._base import OwnerReference
from lattice_operator.api.v1alpha1.resources import GROUP
from lattice_operator.api.v1alpha1.run import RunTemplate
from lattice_operator.ports import Grants

GRANTING_PHASES = frozenset({"Approved", "Executing", "Waiting"})


@dataclass(frozen=True)
class GrantDecision:
    """The grants a Run gets (None: nothing), and why not."""

    grants: Grants | None
    reason: str = ""
    """A short label for metrics when refused (no_intent, not_intent_run, intent_not_approved)."""
    message: str = ""
    """Why nothing is granted, for the sprite and for humans."""


def controller_uid(run: Run) -> str | None:
    """The uid of the Run's controller (its controller ownerReference), if any."""
    for ref in run.metadata.owner_references:
        if ref.controller:
            return ref.uid or None
    return None


def owned_by(run: Run, intent_uid: str | None) -> bool:
    """Whether the Run's controller ownerReference is the Intent with this uid."""
    return bool(intent_uid) and controller_uid(run) == intent_uid


def intent_controller(run: Run) -> OwnerReference | None:
    """The Run's controller reference if it names one of our Intents: kind `Intent` *and*
    group `lattice.dev`. A controller of kind Intent in any other group is not ours, and only
    our group's references are guarded at admission (`check-run-owner`); whether the uid names
    a real Intent is for the caller to check (`run_policy_refusal`)."""
    for ref in run.metadata.owner_references:
        if ref.controller and ref.kind == "Intent" and ref.api_version.split("/")[0] == GROUP:
            return ref
    return None


def run_policy_refusal(run: Run, sprite: str, policy: str, intent_uid: str | None) -> str | None:
    """Why the Sprite's `spec.runPolicy` refuses this Run (None: it may run there).

    A Run an Intent created has that Intent as its controller (`intent_controller`); the
    admission policy `check-run-owner` lets only the operator write such a reference.
    `intent_uid` is the uid of the Intent that reference names, as the caller found it (None:
    no such Intent, or the caller cannot tell): the Run counts as an Intent's only when the
    reference's group, kind and uid all name that real Intent."""
    if policy != "IntentOnly":
        return None
    ref = intent_controller(run)
    if ref is not None and intent_uid and ref.uid == intent_uid:
        return None
    return (
        f"Sprite {sprite} admits only Runs created by an Intent (spec.runPolicy: IntentOnly); "
        f"propose an Intent of kind sprite_task_exec instead"
    )


def decide_grants(run: Run, grants: Grants | None) -> GrantDecision:
    """The grants of the Intent `run.spec.intentRef` names (`grants`, None when there is no
    such Intent) that apply to this Run."""
    if run.spec.intent_ref is None or grants is None:
        return GrantDecision(None, "no_intent", "no Intent governs this Run: nothing is granted")
    intent, name = grants.intent, run.metadata.name
    if not owned_by(run, grants.uid) or grants.run != name:
        return GrantDecision(
            None,
            "not_intent_run",
            f"the Run is not the one its Intent created: Intent {intent}'s grants apply only "
            f"to the Run it owns and names in status.runRef"
            f" ({grants.run or 'none yet'}), not to {name}",
        )
    if grants.phase not in GRANTING_PHASES:
        return GrantDecision(
            None,
            "intent_not_approved",
            f"Intent {intent} is {grants.phase}: grants apply only while it is approved "
            f"and executing",
        )
    return GrantDecision(grants)


def adoption_refusal(intent: Intent, template: RunTemplate, run: Run) -> str | None:
    """Why an existing Run with the Intent's deterministic name must not be adopted (None: it
    is the Intent's own Run). It must be controlled by the Intent and run what was approved:
    ownerReferences can be written by whoever creates a Run, so the spec is compared too."""
    name = run.metadata.name
    if not owned_by(run, intent.metadata.uid):
        return f"Run {name} already exists and was not created by this Intent (not its controller)"
    spec = run.spec.model_dump(include=set(RunTemplate.model_fields))
    claimed = run.spec.intent_ref.name if run.spec.intent_ref else None
    if spec != template.model_dump() or claimed != intent.metadata.name:
        return f"Run {name} already exists and does not run what this Intent was approved to run"
    return None


__all__ = [
    "GRANTING_PHASES",
    "GrantDecision",
    "adoption_refusal",
    "controller_uid",
    "decide_grants",
    "intent_controller",
    "owned_by",
]
