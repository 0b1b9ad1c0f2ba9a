"""The Intent pipeline as a pure function: classify, gate, execute, audit."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from lattice_operator.api.v1alpha1 import Run
from lattice_operator.api.v1alpha1.intent import IntentResult
from lattice_operator.api.v1alpha1.run import RunTemplate
from lattice_operator.builders import run_for_intent
from lattice_operator.reconcilers.intent import reconcile_intent
from tests.support.intent_world import (
    BOX,
    NOW,
    advance,
    approval,
    intent,
    policy,
    remediation_world,
    world,
)


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


def test_a_runs_start_is_no_status_change_of_its_intent() -> None:
    """Created → queued → starting → running → resuming: the Intent reads the same
    throughout (the Run's own status says how far it is), so the Run's start and phases cost
    the Intent no status write; only its creation and its end do."""
    it = advance(intent(), reconcile_intent(world(intent(), policies=[policy("allow")])))
    created = it.status.to_patch()

    def status_with(run: dict[str, Any] | None) -> Any:
        parsed = Run.model_validate(run) if run is not None else None
        return reconcile_intent(world(it, policies=[policy("allow")], run=parsed)).status

    pending = {**_run("Pending", ""), "status": {}}
    assert status_with(pending).to_patch() == created  # a Run not started: nothing to write
    for phase in ("Pending", "Starting", "Running", "Resuming"):
        assert status_with({**_run(phase, ""), "status": {"phase": phase}}).to_patch() == created
    [cond] = [c for c in status_with(_run("Running", "")).conditions if c.type == "Succeeded"]
    assert cond.message == f"Run {_run('Running', '')['metadata']['name']} executes it"
    assert status_with(_run("Succeeded", "done")).to_patch() != created


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


def _succeeded(plan: Any) -> tuple[str, str, str]:
    done = next(c for c in plan.status.conditions if c.type == "Succeeded")
    return done.status, done.reason, done.message


def _remediation(remediation: str, *, forge_ready: bool) -> tuple[str, str, str]:
    it = remediation_world(remediation, forge_ready=forge_ready, spriteRef={"name": "box"})
    return _succeeded(reconcile_intent(it))


def test_open_pr_remediation_without_a_forge_waits_for_one() -> None:
    status, reason, _ = _remediation("open_pr", forge_ready=False)
    assert (status, reason) == ("Unknown", "NoForgeConfigured")


def test_open_pr_remediation_names_what_it_lacks() -> None:
    status, reason, message = _remediation("open_pr", forge_ready=True)
    assert (status, reason) == ("False", "RemediationFailed")
    assert message == (
        "remediation open_pr needs params.healthRemediate.repo, params.healthRemediate.plan, "
        "params.healthRemediate.run"
    )


def test_open_pr_remediation_proposes_a_pr_intent_that_goes_through_the_pipeline() -> None:
    agent = {"spriteRef": {"name": "box"}, "command": ["python3", "/agent.py"]}
    base = remediation_world(
        "open_pr", repo="octo/app", plan="Raise the pool size", run=agent, baseBranch="trunk"
    )
    first = reconcile_intent(base)
    assert first.phase == "Executing"
    assert _succeeded(first)[2] == "starting Intent i-pr"
    (child,) = first.create
    assert (child["kind"], child["metadata"]["name"]) == ("Intent", "i-pr")
    owner = child["metadata"]["ownerReferences"][0]
    assert (owner["name"], owner["uid"], owner["controller"]) == ("i", "u", True)
    # An ordinary Intent: classified, gated and granted like any other (no status given).
    assert "status" not in child
    assert child["spec"]["kind"] == "pr_create_from_plan"
    params = dict(child["spec"]["params"]["prCreateFromPlan"])
    run = params.pop("run")
    assert params == {"repo": "octo/app", "baseBranch": "trunk", "plan": "Raise the pool size"}
    assert (run["spriteRef"], run["command"]) == (agent["spriteRef"], agent["command"])
    assert child["spec"]["proposedBy"] == {"type": "system", "name": "i"}
    # The next pass creates it again (create-or-exists: a failed create is retried) and is done.
    second = reconcile_intent(replace(base, intent=advance(base.intent, first)))
    assert [m["metadata"]["name"] for m in second.create] == ["i-pr"]
    assert _succeeded(second) == (
        "True",
        "Remediated",
        "started Intent i-pr (pr_create_from_plan on octo/app)",
    )
    assert second.status.forge is not None
    assert second.status.forge.followup == "i-pr"


def test_recreate_sprite_waits_for_its_sprite_then_hands_the_work_to_the_handler() -> None:
    waiting = reconcile_intent(remediation_world("recreate_sprite", spriteRef={"name": "box"}))
    assert _succeeded(waiting)[:2] == ("Unknown", "SpriteNotReady")
    assert waiting.remediation is None
    assert waiting.status.sprite_ref is not None
    assert waiting.status.sprite_ref.name == "box"
    base = remediation_world("recreate_sprite", spriteRef={"name": "box"})
    plan = reconcile_intent(replace(base, sprite=BOX))  # not Ready: recreating is the cure
    assert plan.phase == "Executing"
    assert _succeeded(plan)[2] == "recreating Sprite box"
    assert plan.remediation is not None
    assert (plan.remediation.action, plan.remediation.sprite.metadata.name) == (
        "recreate_sprite",
        "box",
    )


def test_restart_service_names_the_service_and_needs_one() -> None:
    base = remediation_world("restart_service", spriteRef={"name": "box"}, service="web")
    plan = reconcile_intent(replace(base, sprite=BOX))
    assert plan.remediation is not None
    assert (plan.remediation.action, plan.remediation.service) == ("restart_service", "web")
    assert _succeeded(plan)[2] == "restarting service web of Sprite box"
    refused = reconcile_intent(remediation_world("restart_service", spriteRef={"name": "box"}))
    assert _succeeded(refused) == (
        "False",
        "RemediationFailed",
        "remediation restart_service needs params.healthRemediate.service",
    )
    assert refused.remediation is None
    assert refused.phase == "Failed"


def test_a_recorded_remediation_outcome_decides_the_intent() -> None:
    base = remediation_world("recreate_sprite", spriteRef={"name": "box"})
    for outcome, expected in (
        ("success", ("True", "Remediated")),
        ("failure", ("False", "RemediationFailed")),
    ):
        it = base.intent.model_copy(deep=True)
        it.status.result = IntentResult(status=outcome, summary=f"it was a {outcome}")
        plan = reconcile_intent(replace(base, intent=it, sprite=BOX))
        assert _succeeded(plan) == (*expected, f"it was a {outcome}")
        assert plan.remediation is None  # carried out once
