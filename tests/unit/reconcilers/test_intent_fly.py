"""fly_machines through the pipeline, without a cluster: approval by default (a deployment
hook mutates), a wait with a clear reason while Fly is not configured, one action planned
per pass with its attempt counted, the outcome the handler recorded decides, attempts
bounded; and admission refuses params that do not fit the action, naming the field."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from lattice_operator.api.v1alpha1 import Intent
from lattice_operator.api.v1alpha1.intent import FlyStatus, IntentResult
from lattice_operator.reconcilers.intent import IntentPlan, IntentWorld, reconcile_intent
from lattice_operator.reconcilers.intent_kinds.fly import MAX_ATTEMPTS
from tests.support.admission_cases import sample
from tests.support.intent_world import NOW, advance, policy


def fly_intent(status: dict[str, Any] | None = None, **params: Any) -> Intent:
    doc = sample("intent-fly-machines.yaml")
    doc["metadata"] = {"name": "deploy", "namespace": "ns", "uid": "u", "generation": 1}
    if params:
        doc["spec"]["params"]["flyMachines"] = {"app": "preview-app", **params}
    doc["status"] = status or {}
    return Intent.model_validate(doc)


def world(it: Intent, *, allow: bool = True, fly_ready: bool = True) -> IntentWorld:
    return IntentWorld(
        intent=it,
        policies=[policy("allow")] if allow else [],
        default_policy=None,
        approvals=[],
        run=None,
        sprite=None,
        now=NOW,
        fly_ready=fly_ready,
    )


def succeeded(plan: IntentPlan) -> tuple[str, str, str]:
    done = next(c for c in plan.status.conditions if c.type == "Succeeded")
    return done.status, done.reason, done.message


def test_a_deployment_hook_needs_approval_unless_a_policy_allows_it() -> None:
    plan = reconcile_intent(world(fly_intent(), allow=False))
    assert plan.phase == "AwaitingApproval"
    assert plan.status.classification is not None
    assert plan.status.classification.outcome == "require_approval"
    assert plan.fly is None


def test_without_a_fly_token_it_waits_and_says_why() -> None:
    plan = reconcile_intent(world(fly_intent(), fly_ready=False))
    assert plan.phase == "Waiting"
    status, reason, message = succeeded(plan)
    assert (status, reason) == ("Unknown", "NoFlyConfigured")
    assert "fly.token_secret" in message
    assert plan.fly is None
    assert plan.status.fly is None


def test_an_approved_action_is_planned_once_per_pass_and_counted() -> None:
    it = fly_intent()
    plan = reconcile_intent(world(it))
    assert plan.phase == "Executing"
    assert plan.fly is not None
    assert (plan.fly.attempt, plan.fly.params.action) == (1, "start")
    assert plan.status.fly == FlyStatus(
        app="preview-app", action="start", machine_id="3d8d9015be7e89", attempts=1
    )
    again = reconcile_intent(world(advance(it, plan)))  # no outcome recorded: a crash
    assert again.fly is not None
    assert again.fly.attempt == 2


def test_a_create_names_its_machine_after_the_intent_unless_told() -> None:
    made = reconcile_intent(world(fly_intent(action="create", machine={"image": "a:1"})))
    assert made.fly is not None
    assert made.fly.machine_name == "deploy"
    named = fly_intent(action="create", machine={"image": "a:1", "name": "web-2"})
    plan = reconcile_intent(world(named))
    assert plan.fly is not None
    assert plan.fly.machine_name == "web-2"


@pytest.mark.parametrize(
    ("outcome", "phase", "reason", "event"),
    [
        ("success", "Succeeded", "Completed", ("FlyActionDone", False)),
        ("failure", "Failed", "FlyFailed", ("FlyActionFailed", True)),
    ],
)
def test_the_recorded_outcome_decides(
    outcome: str, phase: str, reason: str, event: tuple[str, bool]
) -> None:
    it = fly_intent()
    executing = advance(it, reconcile_intent(world(it)))
    recorded = executing.model_copy(deep=True)
    recorded.status.result = IntentResult(status=outcome, summary="machine 3d8d9015be7e89: x")
    assert recorded.status.fly is not None
    recorded.status.fly.finished = True
    plan = reconcile_intent(world(recorded))
    assert plan.phase == phase
    assert succeeded(plan)[1:] == (reason, "machine 3d8d9015be7e89: x")
    assert plan.fly is None
    assert [e.to_phase for e in plan.status.audit_log][-1] == phase
    [notice] = plan.notices
    assert (notice.reason, notice.warning) == event
    assert notice.message == "machine 3d8d9015be7e89: x"


def test_attempts_without_an_outcome_are_bounded() -> None:
    it = fly_intent()
    stuck = advance(it, reconcile_intent(world(it))).model_copy(deep=True)
    stuck.status.fly = FlyStatus(app="preview-app", action="start", attempts=MAX_ATTEMPTS)
    plan = reconcile_intent(world(stuck))
    assert plan.phase == "Failed"
    assert plan.fly is None
    assert "3 attempts started without an outcome" in succeeded(plan)[2]
    assert plan.status.result is not None
    assert plan.status.result.status == "failure"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"action": "start"}, "actions start and stop take machineId, not machine"),
        (
            {"action": "create", "machineId": "abc"},
            "action create takes machine (what to make), not machineId",
        ),
        (
            {"action": "stop", "machineId": "abc", "machine": {"image": "a:1"}},
            "actions start and stop take machineId, not machine",
        ),
    ],
)
def test_params_that_do_not_fit_the_action_are_refused(
    params: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        fly_intent(**params)
