"""The GitHub kinds in the Intent pipeline (pure): what waits, what is prepared, what runs,
what is taken back; approvals relayed from GitHub; an incident's one issue."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from lattice_operator.api.v1alpha1 import Intent
from lattice_operator.api.v1alpha1.healthcheck import HealthIssue, Incident, IncidentIssue
from lattice_operator.forge.incidents import incident_step
from lattice_operator.reconcilers.approvals import ApprovalRefused, parse_request, record_for
from lattice_operator.reconcilers.intent import reconcile_intent
from tests.support.forge_pipeline import pr_intent, prepared, run, sprite, world
from tests.support.intent_world import NOW


def test_without_github_the_kind_waits_with_a_reason() -> None:
    plan = reconcile_intent(world(pr_intent(), forge_ready=False))
    assert plan.phase == "Waiting"
    assert plan.status.conditions[-1].reason == "NoForgeConfigured"
    assert plan.forge is None


def test_without_an_agent_the_kind_waits_with_a_reason() -> None:
    it = pr_intent()
    it.spec.params.pr_create_from_plan.run = None  # type: ignore[union-attr]
    plan = reconcile_intent(world(it))
    assert plan.status.conditions[-1].reason == "NoAgentConfigured"


def test_the_workspace_is_prepared_once_the_sprite_is_ready() -> None:
    waiting = reconcile_intent(world(pr_intent(), sprite=sprite(ready=False)))
    assert waiting.status.conditions[-1].reason == "SpriteNotReady"
    plan = reconcile_intent(world(pr_intent()))
    assert plan.forge is not None
    assert (plan.forge.step, plan.forge.sprite, plan.forge.head_branch) == (
        "prepare",
        "ns-box",
        "lattice/pr",
    )
    assert plan.status.forge is not None
    assert plan.status.forge.attempts == 1
    assert plan.create == []  # no Run before the workspace is there


def test_a_prepared_intent_runs_its_agent_told_where_things_are() -> None:
    plan = reconcile_intent(world(pr_intent(**prepared())))
    [manifest] = plan.create
    env = {e["name"]: e["value"] for e in manifest["spec"]["env"]}
    assert env["LATTICE_FORGE_BRANCH"] == "lattice/pr"
    assert env["LATTICE_FORGE_CHECKOUT"] == "/workspace/repo"
    assert env["LATTICE_FORGE_CONTEXT"] == "/workspace/.lattice/forge/context.json"


def test_a_pr_opened_by_the_run_ends_it_with_the_pr_in_status() -> None:
    done = run(
        "Succeeded",
        actionResults=[
            {
                "requestId": "1",
                "action": "OPEN_PR",
                "status": "fulfilled",
                "number": 7,
                "url": "https://x/pull/7",
            }
        ],
    )
    plan = reconcile_intent(world(pr_intent(**prepared()), run=done))
    assert plan.phase == "Succeeded"
    assert plan.status.forge is not None
    assert plan.status.forge.pull_request is not None
    assert plan.status.forge.pull_request.number == 7
    assert plan.status.result is not None
    assert "pr_url: https://x/pull/7" in plan.status.result.artifacts


def test_a_run_that_opened_no_pr_has_its_branch_taken_back() -> None:
    plan = reconcile_intent(world(pr_intent(**prepared()), run=run("Succeeded")))
    assert plan.phase == "Executing"
    assert plan.forge is not None
    assert plan.forge.step == "finish"


def test_github_unreachable_waits_with_a_reason_until_the_retry_time() -> None:
    failing = prepared(
        problem="GitHub unreachable (transport_error, safe_retry)",
        retryAt=(NOW + timedelta(seconds=30)).isoformat(),
        attempts=2,
    )
    plan = reconcile_intent(world(pr_intent(**failing), run=run("Succeeded")))
    assert plan.phase == "Waiting"
    assert plan.status.conditions[-1].reason == "ForgeUnavailable"
    assert "GitHub unreachable" in plan.status.conditions[-1].message
    later = reconcile_intent(
        world(pr_intent(**failing), run=run("Succeeded"), now=NOW + timedelta(seconds=31))
    )
    assert later.forge is not None
    assert later.forge.attempt == 3


def test_retries_are_bounded() -> None:
    spent = prepared(problem="boom", attempts=5)
    plan = reconcile_intent(world(pr_intent(**spent), run=run("Succeeded")))
    assert plan.phase == "Failed"
    assert plan.status.conditions[-1].reason == "ForgeFailed"


def _forge_request(**extra: Any) -> dict[str, str]:
    import json

    data = {
        "decision": "approve",
        "reason": "on GitHub",
        "forgeUser": "octocat",
        "user": "alice",
        "groups": ["team"],
        "forgeRef": "https://x#c1",
        **extra,
    }
    return {"approval.lattice.dev/request": json.dumps(data)}


def test_a_github_approval_is_recorded_under_both_identities_once() -> None:
    request = parse_request(_forge_request())
    assert request is not None
    assert request.subject({"username": "operator"}) == {"username": "alice", "groups": ["team"]}
    records = record_for(
        request, {"username": "operator"}, [], NOW, "sha256:d", operator="operator"
    )
    [record] = records
    assert (record.user, record.forge_user, record.forge_ref) == (
        "alice",
        "octocat",
        "https://x#c1",
    )
    again = record_for(
        request, {"username": "operator"}, records, NOW, "sha256:d", operator="operator"
    )
    assert again == records  # the same comment delivered again


def test_only_the_operator_relays_a_github_approval() -> None:
    request = parse_request(_forge_request())
    assert request is not None
    with pytest.raises(ApprovalRefused) as refused:
        record_for(request, {"username": "mallory"}, [], NOW, "sha256:d", operator="operator")
    assert refused.value.code == 403


def _incident(**fields: Any) -> Incident:
    values: dict[str, Any] = {
        "state": "Open",
        "openedAt": NOW,
        "updatedAt": NOW,
        "failures": 1,
        "lastSignal": "exit 1",
    }
    values.update(fields)
    return Incident.model_validate(values)


def test_an_incident_is_one_issue_opened_commented_and_closed() -> None:
    spec = HealthIssue(repo="octo/app")
    opened = incident_step("smoke", "uid", _incident(), spec)
    assert opened.action == "open"
    issue = IncidentIssue(number=4, reported_failures=1)
    assert incident_step("smoke", "uid", _incident(issue=issue), spec).action == "none"
    more = incident_step("smoke", "uid", _incident(issue=issue, failures=3), spec)
    assert (more.action, more.failures) == ("comment", 3)
    assert more.key == f"{opened.key}:3"
    closed = incident_step("smoke", "uid", _incident(issue=issue, state="Closed"), spec)
    assert closed.action == "close"
    done = IncidentIssue(number=4, reported_failures=1, closed=True)
    assert incident_step("smoke", "uid", _incident(issue=done, state="Closed"), spec).action == (
        "none"
    )


def test_drafted_tasks_are_parsed_defensively() -> None:
    from lattice_operator.forge.builders import parse_tasks

    assert parse_tasks("not json") == []
    assert parse_tasks('{"title": "x"}') == []
    drafts = parse_tasks(
        '[{"title": " A "}, {"title": ""}, {"body": "no title"}, 3, {"title": "B", "body": 7}]'
    )
    assert drafts == [{"title": "A", "body": ""}, {"title": "B", "body": ""}]
    many = parse_tasks("[" + ",".join('{"title": "t"}' for _ in range(40)) + "]")
    assert len(many) == 30


def test_an_approved_plan_with_drafts_creates_issues_and_no_pull_request() -> None:
    it = Intent.model_validate(
        {
            "metadata": {"name": "plan", "namespace": "ns", "uid": "u-2", "generation": 1},
            "spec": {
                "kind": "issue_plan_approve",
                "params": {
                    "issuePlanApprove": {
                        "repo": "octo/app",
                        "issueNumber": 3,
                        "plan": "issues",
                        "tasks": [{"title": "one"}, {"title": "two"}],
                    }
                },
            },
        }
    )
    plan = reconcile_intent(world(it))
    assert plan.create == []  # no pr_create_from_plan
    assert plan.forge is not None
    assert plan.forge.step == "finish"
