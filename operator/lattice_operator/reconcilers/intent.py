"""The Intent pipeline: propose → classify → gate → execute, level-based and pure.

`reconcile_intent(world)` reads everything it needs from `IntentWorld` (the
Intent, the policies, the verified approval records, the child Run or Sprite)
and returns an `IntentPlan`: the status to write and the few writes to make.
Conditions are the source of truth (Classified, Approved, Succeeded); the phase
is derived from them, and every phase change is appended to the audit log. What an
approved Intent does is its kind's executor's (reconcilers/intent_kinds/).
"""

from __future__ import annotations

from typing import Any

from lattice_operator.api.v1alpha1 import Classification, Intent, find_condition
from lattice_operator.api.v1alpha1.intent import ApprovalRecord, IntentResult
from lattice_operator.policy import classify, intent_document
from lattice_operator.reconcilers.approvals import for_spec, spec_digest
from lattice_operator.reconcilers.grants import owned_by
from lattice_operator.reconcilers.intent_kinds import execute, fileops_sprite, remediation_sprite
from lattice_operator.reconcilers.intent_pass import (
    TERMINAL,
    FileOpsWork,
    FlyWork,
    IntentPass,
    IntentPlan,
    IntentWorld,
    Notice,
    RemediationWork,
    derive_phase,
)
from lattice_operator.reconcilers.intent_reasons import IntentReason


def reconcile_intent(world: IntentWorld) -> IntentPlan:
    """One level-based pass over the pipeline."""
    step = IntentPass(world)
    step.status.approvals = list(world.approvals)
    if step.phase in TERMINAL:
        return step.finish()
    if world.intent.spec.cancel:
        _cancel(step)
        return step.finish()
    if not _classified(step):
        return step.finish()
    if not _gate(step):
        return step.finish()
    execute(step)
    return step.finish()


def _cancel(step: IntentPass) -> None:
    run = step.world.run
    ours = run is not None and owned_by(run, step.intent.metadata.uid)
    if run is not None and ours and not run.is_done() and not run.spec.cancel:
        step.plan.run_patch = {"spec": {"cancel": True}}
    step.status.result = IntentResult(status="canceled", summary="canceled by spec.cancel")
    step.status.waiting = None
    step.set(
        "Succeeded", "False", IntentReason.CANCELED, "canceled by spec.cancel", actor="spec.cancel"
    )


def classification_due(intent: Intent) -> bool:
    """Whether a pass over this Intent classifies it (again): not yet for this generation,
    and not approved (after approval the spec is frozen)."""
    conditions = intent.status.conditions
    if derive_phase(intent.status) in TERMINAL or intent.spec.cancel:
        return False
    cond = find_condition(conditions, "Classified")
    approved = find_condition(conditions, "Approved")
    fresh = cond is not None and cond.observed_generation == intent.metadata.generation
    return not (
        cond is not None and (fresh or (approved is not None and approved.status == "True"))
    )


def policy_document(intent: Intent) -> dict[str, Any]:
    """What policy rules see of this Intent as `intent`."""
    return intent_document(
        intent.metadata.model_dump(by_alias=True, exclude_none=True), intent.spec.to_wire()
    )


def _classified(step: IntentPass) -> bool:
    if not classification_due(step.intent):
        return True
    intent = step.intent
    decision = step.world.decision or classify(
        policy_document(intent), step.world.policies, step.world.default_policy
    )
    step.plan.decision = decision
    step.status.classification = Classification(
        risk=decision.risk,
        outcome=decision.outcome,
        approvers_required=decision.approvers,
        policy=decision.policy,
        rule=decision.rule,
    )
    for error in decision.evaluation_errors:
        step.plan.notices.append(Notice("PolicyRuleError", error, warning=True))
    stale = for_spec(step.world.approvals, spec_digest(intent.spec)).stale_approvers()
    if stale:
        message = f"the spec changed after approval by {', '.join(stale)}; approvals reset"
        step.plan.notices.append(Notice("ApprovalsReset", message, warning=True))
    if decision.evaluation_errors:
        reason = (
            IntentReason.POLICY_RULE_ERROR
        )  # failed closed: the message names the rule and the error
    else:
        reason = IntentReason.POLICY_RULE if decision.policy else IntentReason.NO_RULE_MATCHED
    step.set("Classified", "True", reason, f"{decision.risk}: {decision.message}")
    return True


def _gate(step: IntentPass) -> bool:
    """Whether the Intent may execute (Approved=True)."""
    classification = step.status.classification
    assert classification is not None
    rule = (
        f"{classification.policy}/{classification.rule}"
        if classification.policy
        else "default (no rule matched)"
    )
    approved = find_condition(step.status.conditions, "Approved")
    if approved is not None and approved.status == "True":
        return True
    # Only decisions on this very spec count: an edit after an approval resets it.
    decisions = for_spec(step.world.approvals, spec_digest(step.intent.spec))
    latest: dict[str, ApprovalRecord] = {}
    for record in decisions.current:
        latest[record.user] = record  # a later decision by the same person replaces theirs
    rejections = [r for r in latest.values() if r.decision == "reject"]
    approvers = sorted(r.user for r in latest.values() if r.decision == "approve")
    stale = decisions.stale_approvers()
    reset = (
        f"; the spec changed after approval by {', '.join(stale)}: those approvals were reset"
        if stale
        else ""
    )
    if classification.outcome == "deny":
        step.set(
            "Approved",
            "False",
            IntentReason.DENIED,
            f"denied by policy rule {rule}",
            actor=_actor(rule),
        )
        return False
    if rejections:
        who = rejections[-1]
        message = f"rejected by {who.user}" + (f": {who.reason}" if who.reason else "")
        step.set("Approved", "False", IntentReason.REJECTED, message, actor=who.user)
        return False
    if classification.outcome == "allow":
        step.set(
            "Approved",
            "True",
            IntentReason.AUTO_APPROVED,
            f"allowed by policy rule {rule}",
            actor=_actor(rule),
        )
        return True
    needed = classification.approvers_required
    if len(approvers) >= needed:
        step.status.awaiting_since = step.status.awaiting_since or step.world.now
        step.set(
            "Approved",
            "True",
            IntentReason.APPROVED,
            f"approved by {', '.join(approvers)}",
            actor=", ".join(approvers),
        )
        return True
    if step.status.awaiting_since is None:
        step.status.awaiting_since = step.world.now
    step.set(
        "Approved",
        "Unknown",
        IntentReason.AWAITING_APPROVAL,
        f"rule {rule} requires {needed} approval(s) of the current spec; {len(approvers)} so far"
        + (f" ({', '.join(approvers)})" if approvers else "")
        + reset,
        actor=_actor(rule),
    )
    return False


def _actor(rule: str) -> str:
    return f"policy:{rule.split(' ')[0]}"


__all__ = [
    "TERMINAL",
    "FileOpsWork",
    "FlyWork",
    "IntentPlan",
    "IntentWorld",
    "Notice",
    "RemediationWork",
    "classification_due",
    "derive_phase",
    "fileops_sprite",
    "policy_document",
    "reconcile_intent",
    "remediation_sprite",
]
