"""The Intent pipeline as a pure function: classify, gate, execute, audit."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from lattice_operator.api.v1alpha1 import Intent, Run
from lattice_operator.api.v1alpha1.run import RunTemplate
from lattice_operator.builders import run_for_intent
from lattice_operator.reconcilers.intent import reconcile_intent
from tests.support.intent_world import NOW, advance, approval, intent, policy, world


def test_allowed_intent_creates_its_run_in_one_pass() -> None:
    plan = reconcile_intent(world(intent(), policies=[policy("allow")]))
    assert plan.phase == "Executing"
    assert [m["kind"] for m in plan.create] == ["Run"]
    assert [(e.from_phase, e.to_phase) for e in plan.status.audit_log] == [
        ("Proposed", "Classified"),
        ("Classified", "Approved"),
        ("Approved", "Executing"),
    ]


def test_no_rule_means_controlled_and_awaiting_one_approval() -> None:
    plan = reconcile_intent(world(intent()))
    assert plan.phase == "AwaitingApproval"
    assert plan.status.classification is not None
    assert (plan.status.classification.risk, plan.status.classification.rule) == (
        "controlled",
        "default",
    )
    assert plan.create == []
    assert plan.status.awaiting_since == NOW


def test_two_distinct_approvers_are_needed_when_the_rule_says_so() -> None:
    it = intent()
    first = reconcile_intent(world(it, policies=[policy("require_approval", 2)]))
    it = advance(it, first)
    # The same person approving twice is one approval.
    again = reconcile_intent(
        world(
            it,
            policies=[policy("require_approval", 2)],
            approvals=[approval("alice"), approval("alice")],
        )
    )
    assert again.phase == "AwaitingApproval"
    later = NOW + timedelta(minutes=5)
    done = reconcile_intent(
        world(
            advance(it, again),
            policies=[policy("require_approval", 2)],
            approvals=[approval("alice"), approval("bob")],
            now=later,
        )
    )
    assert done.phase == "Executing"
    assert done.left_approval_after == 300.0
    approved = next(e for e in done.status.audit_log if e.to_phase == "Approved")
    assert approved.actor == "alice, bob"


def test_a_rejection_wins_and_is_terminal() -> None:
    it = advance(intent(), reconcile_intent(world(intent())))
    plan = reconcile_intent(world(it, approvals=[approval("carol", "reject")]))
    assert plan.phase == "Rejected"
    assert plan.create == []
    # Terminal: later approvals change nothing.
    plan = reconcile_intent(world(advance(it, plan), approvals=[approval("dave")]))
    assert plan.phase == "Rejected"


def test_deny_rejects_naming_the_rule() -> None:
    plan = reconcile_intent(world(intent(), policies=[policy("deny")]))
    assert plan.phase == "Rejected"
    cond = next(c for c in plan.status.conditions if c.type == "Approved")
    assert (cond.reason, "p/r" in cond.message) == ("Denied", True)


def test_spec_change_before_approval_is_classified_again() -> None:
    it = advance(intent(), reconcile_intent(world(intent())))
    changed = it.model_copy(update={"metadata": it.metadata.model_copy(update={"generation": 2})})
    plan = reconcile_intent(world(changed, policies=[policy("allow")]))
    assert plan.phase == "Executing"


def test_run_outcome_flows_up() -> None:
    it = advance(intent(), reconcile_intent(world(intent(), policies=[policy("allow")])))
    run = Run.model_validate(_run("Succeeded", summary="all good"))
    plan = reconcile_intent(world(it, policies=[policy("allow")], run=run))
    assert plan.phase == "Succeeded"
    assert plan.status.result is not None
    assert plan.status.result.summary == "all good"


def _run(phase: str, summary: str) -> dict[str, Any]:
    it = intent()
    template = it.spec.kind_params()
    assert isinstance(template, RunTemplate)
    doc = run_for_intent(it, template)  # the Run the Intent creates (and so owns)
    doc["status"] = {
        "phase": phase,
        "conditions": [
            {
                "type": "Succeeded",
                "status": "True",
                "reason": "Completed",
                "message": summary,
                "lastTransitionTime": NOW.isoformat(),
            }
        ],
        "events": {
            "completion": {
                "status": "success",
                "summary": summary,
                "at": NOW.isoformat(),
                "line": 3,
            }
        },
    }
    return doc


def test_cancel_cancels_the_run() -> None:
    it = advance(intent(), reconcile_intent(world(intent(), policies=[policy("allow")])))
    run = Run.model_validate({**_run("Running", ""), "status": {"phase": "Running"}})
    canceled = it.model_copy(update={"spec": it.spec.model_copy(update={"cancel": True})})
    plan = reconcile_intent(world(canceled, run=run))
    assert plan.phase == "Canceled"
    assert plan.run_patch == {"spec": {"cancel": True}}


def _remediation(remediation: str, *, forge_ready: bool) -> tuple[str, str, str]:
    doc = intent().to_wire()
    doc["spec"] = {
        "kind": "health_remediate",
        "summary": "remedy",
        "params": {
            "healthRemediate": {"remediation": remediation, "spriteRef": {"name": "box"}},
        },
    }
    doc["status"] = {}
    remedy = Intent.model_validate(doc)
    base = world(remedy, policies=[policy("allow")])
    plan = reconcile_intent(replace(base, forge_ready=forge_ready))
    done = next(c for c in plan.status.conditions if c.type == "Succeeded")
    return done.status, done.reason, done.message


def test_open_pr_remediation_without_a_forge_waits_for_one() -> None:
    status, reason, _ = _remediation("open_pr", forge_ready=False)
    assert (status, reason) == ("Unknown", "NoForgeConfigured")


def test_open_pr_remediation_with_a_forge_is_not_supported_rather_than_unconfigured() -> None:
    status, reason, message = _remediation("open_pr", forge_ready=True)
    assert (status, reason) == ("Unknown", "NotSupported")
    assert "pr_create_from_plan" in message


def test_recreate_sprite_and_restart_service_remediations_are_refused_honestly() -> None:
    for remediation in ("recreate_sprite", "restart_service"):
        status, reason, message = _remediation(remediation, forge_ready=True)
        assert (status, reason) == ("Unknown", "NotSupported")
        assert remediation in message
