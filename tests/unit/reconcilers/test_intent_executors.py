"""The executors of the Intent kinds (reconcilers/intent_kinds/): every kind has one, what a
pass reads and grants by kind, an Intent no executor knows ends Failed instead of crashing
the pass, and what the status cannot hold is cut to its schema's bounds."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from lattice_operator.api.v1alpha1 import INTENT_KINDS, Intent, LocalObjectReference, Run
from lattice_operator.api.v1alpha1.intent import (
    AuditEntry,
    ForgePullRequestRef,
    IntentParams,
    IntentResult,
    IntentStatus,
)
from lattice_operator.api.v1alpha1.run import RunTemplate
from lattice_operator.builders import run_for_intent
from lattice_operator.forge.context import forge_grant
from lattice_operator.reconcilers import intent_limits
from lattice_operator.reconcilers.intent import IntentPlan, reconcile_intent
from lattice_operator.reconcilers.intent_kinds import EXECUTORS, forge_grant_of, sprite_to_read
from tests.support.admission_cases import sample
from tests.support.forge_pipeline import pr_intent, prepared
from tests.support.forge_pipeline import run as pr_run
from tests.support.forge_pipeline import world as forge_world
from tests.support.intent_world import NOW, advance, intent, policy, world


def of_kind(kind: str) -> Intent:
    doc = sample(f"intent-{kind.replace('_', '-')}.yaml")
    doc["metadata"] = {"name": "i", "namespace": "ns", "uid": "u", "generation": 1}
    return Intent.model_validate(doc)


def succeeded(plan: IntentPlan) -> tuple[str, str, str]:
    done = next(c for c in plan.status.conditions if c.type == "Succeeded")
    return done.status, done.reason, done.message


def test_every_kind_has_an_executor() -> None:
    assert sorted(EXECUTORS) == sorted(INTENT_KINDS)
    assert sorted(INTENT_KINDS) == sorted(IntentParams.model_fields)


# What the daemon reads for each sample (handlers/intent.py picks the same Sprite).
SPRITE_READ = {
    "sprite_task_exec": None,
    "health_detect": None,
    "health_remediate": None,  # the sample runs a command: no spriteRef
    "sprite_create": None,  # read once status.spriteRef names it
    "fileops": "sample",
    "environment_change": "sample",  # the Sprite it changes
    "fly_machines": None,
    "issue_triage": None,  # no agent in the sample
    "issue_plan_approve": None,
    "pr_create_from_plan": None,
    "pr_fixup_from_feedback": None,
    "checkpoint_restore": "sample",
}


@pytest.mark.parametrize("kind", INTENT_KINDS)
def test_what_a_pass_reads_and_grants_by_kind(kind: str) -> None:
    it = of_kind(kind)
    assert sprite_to_read(it) == SPRITE_READ[kind]
    assert forge_grant_of(it) == forge_grant(it)


def test_an_agent_or_a_remediated_sprite_is_read() -> None:
    assert sprite_to_read(pr_intent()) == "box"
    it = of_kind("health_remediate")
    params = it.spec.params.health_remediate
    assert params is not None
    params.remediation, params.sprite_ref = "recreate_sprite", LocalObjectReference(name="box")
    assert sprite_to_read(it) == "box"


def test_an_unknown_kind_ends_failed_naming_it() -> None:
    it = intent()
    # Admission refuses the kind: only an object that got past it (an older CRD) has one.
    it = it.model_copy(update={"spec": it.spec.model_copy(update={"kind": "teleport"})})
    plan = reconcile_intent(world(it, policies=[policy("allow")]))
    assert plan.phase == "Failed"
    status, reason, message = succeeded(plan)
    assert (status, reason) == ("False", "InvalidSpec")
    assert message.startswith("spec.kind 'teleport' is not a kind this operator carries out")
    assert plan.create == []
    assert plan.status.result is not None
    assert plan.status.result.status == "failure"


def test_missing_params_end_failed_naming_the_member() -> None:
    it = intent()
    empty = it.spec.model_copy(update={"params": IntentParams()})
    plan = reconcile_intent(
        world(it.model_copy(update={"spec": empty}), policies=[policy("allow")])
    )
    assert plan.phase == "Failed"
    assert succeeded(plan) == (
        "False",
        "InvalidSpec",
        "params.spriteTaskExec must be set when kind is sprite_task_exec",
    )


def test_an_artifact_longer_than_the_status_holds_is_cut() -> None:
    it = intent()
    template = it.spec.kind_params()
    assert isinstance(template, RunTemplate)
    doc = run_for_intent(it, template)
    url = "https://example.com/" + "a" * 1004  # the Run's bound on an artifact's url: 1024
    doc["status"] = {
        "phase": "Succeeded",
        "events": {
            "artifacts": [{"kind": "pr_url", "url": url, "line": 1, "session": 1, "at": NOW}]
        },
    }
    done = Run.model_validate(doc)
    started = advance(it, reconcile_intent(world(it, policies=[policy("allow")])))
    plan = reconcile_intent(world(started, policies=[policy("allow")], run=done))
    assert plan.phase == "Succeeded"
    assert plan.status.result is not None
    assert plan.status.result.artifacts == [f"pr_url: {url}"[:1024]]


def test_a_pull_request_url_as_long_as_the_run_allows_is_cut_in_the_result() -> None:
    url = "https://x/" + "p" * 1014
    opened = pr_run(
        "Succeeded",
        actionResults=[
            {"requestId": "1", "action": "OPEN_PR", "status": "fulfilled", "number": 7, "url": url}
        ],
    )
    plan = reconcile_intent(forge_world(pr_intent(**prepared()), run=opened))
    assert plan.phase == "Succeeded"
    assert plan.status.result is not None
    assert plan.status.result.artifacts == [f"pr_url: {url}"[:1024]]


def _fileops_plan(response: dict[str, Any]) -> IntentPlan:
    doc = of_kind("fileops").to_wire()
    doc["status"] = {"fileops": {"attempts": 1, "response": response}}
    return reconcile_intent(world(Intent.model_validate(doc), policies=[policy("allow")]))


def test_a_response_kept_slim_in_the_status_is_read() -> None:
    """As for_status keeps a big one: no outputs, a killed command's exit code omitted, and
    where the whole response is."""
    plan = _fileops_plan(
        {
            "proto": "triflow.fileops.v1",
            "id": "S2",
            "status": "fail",
            "fail": {"reason": "run: `sleep 9` did not finish in 1s (killed)", "hint": ""},
            "ops": [{"opIndex": 0, "status": "fail", "summary": "killed"}],
            "proof": {"commands": [{"cmd": "sleep 9"}], "notes": ""},
            "responseRef": "/workspace/.lattice/fileops/S2/response.json",
        }
    )
    assert succeeded(plan) == (
        "False",
        "FileOpsFailed",
        "FileOps fail: run: `sleep 9` did not finish in 1s (killed)",
    )


def test_a_response_that_is_not_a_fileops_res_ends_failed_naming_the_field() -> None:
    plan = _fileops_plan({"proto": "triflow.fileops.v1", "id": "S2", "status": "ok"})
    assert plan.phase == "Failed"
    status, reason, message = succeeded(plan)
    assert (status, reason) == ("False", "FileOpsFailed")
    assert message.startswith("status.fileops.response is not a FileOpsRES: ")
    assert "changed_files, ops, proof" in message


BUILDERS: dict[str, Any] = {
    "MESSAGE_CHARS": lambda n: AuditEntry(to_phase="Failed", time=NOW, actor="a", reason="r" * n),
    "ACTOR_CHARS": lambda n: AuditEntry(to_phase="Failed", time=NOW, actor="a" * n),
    "SUMMARY_CHARS": lambda n: IntentResult(status="success", summary="s" * n),
    "ARTIFACTS_KEPT": lambda n: IntentResult(status="success", artifacts=["a"] * n),
    "ARTIFACT_CHARS": lambda n: IntentResult(status="success", artifacts=["a" * n]),
    "URL_CHARS": lambda n: ForgePullRequestRef(number=1, url="u" * n),
    "AUDIT_KEPT": lambda n: IntentStatus(
        audit_log=[AuditEntry(to_phase="Failed", time=NOW, actor="a")] * n
    ),
}


@pytest.mark.parametrize("limit", sorted(BUILDERS))
def test_each_limit_is_what_the_schema_holds(limit: str) -> None:
    """Cut to the limit, the status is valid; one more and the API server would refuse it."""
    assert sorted(BUILDERS) == sorted(intent_limits.__all__)
    value = getattr(intent_limits, limit)
    BUILDERS[limit](value)
    with pytest.raises(ValidationError):
        BUILDERS[limit](value + 1)
