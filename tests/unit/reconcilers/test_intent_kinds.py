"""What the pipeline plans for each Intent kind once it is approved (pure): the Run, Sprite
or Intent it creates, the work it hands the handler, the reason it waits or ends with, and
the bounds it keeps the status in."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from lattice_operator.api.v1alpha1 import AuditEntry, Intent, Run, Sprite
from lattice_operator.api.v1alpha1.run import RunTemplate
from lattice_operator.builders import run_for_intent
from lattice_operator.reconcilers.intent import IntentPlan, reconcile_intent
from tests.support.admission_cases import sample
from tests.support.intent_world import NOW, advance, approval, intent, policy, world

NO_GITHUB = "no GitHub is configured for the operator"
SPRITE = "sample"


def of_sample(name: str, **status: Any) -> Intent:
    doc = sample(name)
    doc["metadata"] = {"name": "i", "namespace": "ns", "uid": "u", "generation": 1}
    doc["status"] = status
    return Intent.model_validate(doc)


def plan_for(it: Intent, *, forge_ready: bool = False, **world_fields: Any) -> IntentPlan:
    base = world(it, policies=[policy("allow")])
    return reconcile_intent(replace(base, forge_ready=forge_ready, **world_fields))


def succeeded(plan: IntentPlan) -> tuple[str, str, str]:
    done = next(c for c in plan.status.conditions if c.type == "Succeeded")
    return done.status, done.reason, done.message


def created(plan: IntentPlan) -> list[tuple[str, str]]:
    return [(m["kind"], m["metadata"]["name"]) for m in plan.create]


@pytest.mark.parametrize(
    ("name", "forge_ready", "phase", "reason", "message", "creates"),
    [
        ("sprite-task-exec", False, "Executing", "Executing", "Run i-run executes it", "Run"),
        ("health-remediate", False, "Executing", "Executing", "Run i-run executes it", "Run"),
        ("sprite-create", False, "Executing", "Executing", "created Sprite repo-work", "Sprite"),
        (
            "fileops",
            False,
            "Waiting",
            "SpriteNotReady",
            f"waiting for Sprite {SPRITE} to be Ready",
            None,
        ),
        ("issue-triage", False, "Waiting", "NoForgeConfigured", NO_GITHUB, None),
        ("issue-plan-approve", False, "Waiting", "NoForgeConfigured", NO_GITHUB, None),
        ("pr-create-from-plan", False, "Waiting", "NoForgeConfigured", NO_GITHUB, None),
        ("pr-fixup-from-feedback", False, "Waiting", "NoForgeConfigured", NO_GITHUB, None),
        (
            "issue-plan-approve",
            True,
            "Executing",
            "Executing",
            "plan approved: starting Intent i-pr",
            "Intent",
        ),
        (
            "issue-triage",
            True,
            "Waiting",
            "NoAgentConfigured",
            "issue_triage needs an agent: params.issueTriage.run "
            "(a GitHubRepository's spec.agent fills it in)",
            None,
        ),
    ],
)
def test_what_each_kind_plans_first(
    name: str, forge_ready: bool, phase: str, reason: str, message: str, creates: str | None
) -> None:
    plan = plan_for(of_sample(f"intent-{name}.yaml"), forge_ready=forge_ready)
    assert plan.phase == phase
    assert succeeded(plan) == ("Unknown", reason, message)
    kinds = [kind for kind, _ in created(plan)]
    assert kinds == ([creates] if creates else [])
    # Only an approved plan's forge step is handed to the handler on a first pass.
    assert (plan.forge is not None) == (name == "issue-plan-approve" and forge_ready)
    assert plan.fileops is None
    assert plan.remediation is None


@pytest.mark.parametrize("forge_ready", [False, True])
def test_a_health_detect_made_by_hand_without_a_probe_names_what_it_lacks(
    forge_ready: bool,
) -> None:
    # Not NoForgeConfigured: a forge would give it nothing to run, so waiting for one
    # would wait forever.
    it = of_sample("intent-health-detect.yaml")
    assert it.spec.params.health_detect is not None
    assert it.spec.params.health_detect.probe is None
    plan = plan_for(it, forge_ready=forge_ready)
    assert plan.phase == "Failed"
    status, reason, message = succeeded(plan)
    assert (status, reason) == ("False", "InvalidSpec")
    assert message.startswith("params.healthDetect.probe must be set")
    assert plan.status.result is not None
    assert plan.status.result.summary == message
    assert plan.create == []


def test_a_health_detect_with_a_probe_runs_it() -> None:
    it = of_sample("intent-health-detect.yaml")
    params = it.spec.params.health_detect
    assert params is not None
    params.probe = RunTemplate.model_validate(
        {"spriteRef": {"name": "sample"}, "command": ["sh", "-c", "exit 0"]}
    )
    plan = plan_for(it)
    assert created(plan) == [("Run", "i-run")]
    assert plan.create[0]["spec"]["command"] == ["sh", "-c", "exit 0"]
    assert plan.status.run_ref is not None
    assert plan.status.run_ref.name == "i-run"


def test_run_command_without_a_command_is_not_supported() -> None:
    it = of_sample("intent-health-remediate.yaml")
    params = it.spec.params.health_remediate
    assert params is not None
    params.run = None
    plan = plan_for(it)
    assert plan.phase == "Waiting"
    assert succeeded(plan) == (
        "Unknown",
        "NotSupported",
        "remediation run_command is not supported in this version",
    )
    assert plan.create == []


def _sprite(ready: str | None, message: str = "") -> Sprite:
    conditions = (
        []
        if ready is None
        else [
            {
                "type": "Ready",
                "status": ready,
                "reason": "Ready" if ready == "True" else "BackendError",
                "message": message,
                "lastTransitionTime": NOW.isoformat(),
            }
        ]
    )
    return Sprite.model_validate(
        {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": "Sprite",
            "metadata": {"name": "repo-work", "namespace": "ns", "uid": "s"},
            "spec": {},
            "status": {"url": "https://repo-work.example", "conditions": conditions},
        }
    )


def test_sprite_create_follows_its_sprite_to_ready_or_failed() -> None:
    it = of_sample("intent-sprite-create.yaml")
    first = plan_for(it)
    it = advance(it, first)
    waiting = plan_for(it, sprite=_sprite(None))
    assert succeeded(waiting) == ("Unknown", "Executing", "waiting for Sprite repo-work")
    assert waiting.create == []  # created once: now it is there
    ready = plan_for(it, sprite=_sprite("True"))
    assert succeeded(ready) == ("True", "SpriteReady", "Sprite repo-work is ready")
    assert ready.status.result is not None
    assert ready.status.result.summary == "Sprite repo-work is ready at https://repo-work.example"
    failed = plan_for(it, sprite=_sprite("False", "quota exceeded"))
    assert failed.phase == "Failed"
    assert succeeded(failed) == ("False", "SpriteFailed", "Sprite repo-work: quota exceeded")
    assert failed.status.result is not None
    assert failed.status.result.summary == "quota exceeded"


def _fileops_plan(response: dict[str, Any]) -> IntentPlan:
    wire = {"proto": "triflow.fileops.v1", "id": "S2", **response}
    return plan_for(of_sample("intent-fileops.yaml", fileops={"attempts": 1, "response": wire}))


@pytest.mark.parametrize(
    ("response", "status", "summary"),
    [
        (
            {"status": "ok", "changedFiles": ["a.md", "b.md"], "ops": [], "proof": {}},
            "True",
            "0 ops done; changed: a.md, b.md",
        ),
        (
            {"status": "ok", "changedFiles": [], "ops": [], "proof": {}},
            "True",
            "0 ops done; changed: nothing",
        ),
        ({"status": "split", "split": {"substeps": ["a"]}}, "True", "the step needs substeps"),
        ({"status": "ask", "ask": {"questions": ["which?", "why?"]}}, "True", "which?; why?"),
        ({"status": "fail", "fail": {"reason": "exited 1"}}, "False", "exited 1"),
        (
            {
                "status": "validation_error",
                "errors": [
                    {"field": "ops[0].path", "error": "required field missing"},
                    {"field": "id", "error": "too long"},
                ],
            },
            "False",
            "ops[0].path: required field missing; id: too long",
        ),
    ],
)
def test_a_fileops_response_decides_the_intent(
    response: dict[str, Any], status: str, summary: str
) -> None:
    plan = _fileops_plan(response)
    reason = "Completed" if status == "True" else "FileOpsFailed"
    assert succeeded(plan) == (status, reason, f"FileOps {response['status']}: {summary}")
    assert plan.status.result is not None
    assert plan.status.result.summary == summary
    assert plan.status.result.status == ("success" if status == "True" else "failure")
    assert plan.fileops is None


def test_long_texts_are_cut_to_what_the_status_holds() -> None:
    question = "q" * 3000
    plan = _fileops_plan({"status": "ask", "ask": {"questions": [question]}})
    assert plan.status.result is not None
    assert plan.status.result.summary == question[:1024]
    assert succeeded(plan)[2] == f"FileOps ask: {question}"[:1024]
    entry = plan.status.audit_log[-1]
    assert entry.reason == f"FileOps ask: {question}"[:1024]


def test_a_runs_artifacts_are_copied_up() -> None:
    it = intent()
    template = it.spec.kind_params()
    assert isinstance(template, RunTemplate)
    doc = run_for_intent(it, template)
    doc["status"] = {
        "phase": "Succeeded",
        "events": {
            "artifacts": [
                {"kind": "file", "ref": f"out/{n}.txt", "line": n, "session": 1, "at": NOW}
                for n in range(32)
            ],
            "completion": {"status": "success", "summary": "done", "at": NOW, "line": 40},
        },
    }
    run = Run.model_validate(doc)
    plan = reconcile_intent(world(advance(it, plan_for(it)), policies=[policy("allow")], run=run))
    assert plan.phase == "Succeeded"
    assert plan.status.result is not None
    assert plan.status.result.artifacts == [f"file: out/{n}.txt" for n in range(32)]


def test_the_audit_log_keeps_the_latest_64() -> None:
    old = [
        AuditEntry(from_phase="Proposed", to_phase="Proposed", time=NOW, actor="x", reason=str(n))
        for n in range(64)
    ]
    it = intent(auditLog=[e.to_wire() for e in old])
    plan = plan_for(it)
    log = plan.status.audit_log
    assert len(log) == 64
    assert [e.reason for e in log[:61]] == [str(n) for n in range(3, 64)]
    assert [(e.from_phase, e.to_phase) for e in log[61:]] == [
        ("Proposed", "Classified"),
        ("Classified", "Approved"),
        ("Approved", "Executing"),
    ]


def test_an_actor_is_cut_to_512() -> None:
    users = [f"{c * 200}" for c in "abc"]
    it = advance(intent(), reconcile_intent(world(intent())))
    plan = reconcile_intent(
        world(
            it,
            approvals=[approval(u) for u in users],
            now=NOW + timedelta(seconds=1),
        )
    )
    approved = next(e for e in plan.status.audit_log if e.to_phase == "Approved")
    assert approved.actor == ", ".join(users)[:512]
