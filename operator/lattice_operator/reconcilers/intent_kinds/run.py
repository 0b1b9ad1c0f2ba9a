"""Executing an Intent through its Run (sprite_task_exec, health_detect's probe,
health_remediate's run_command, a GitHub kind's agent): create it, adopt only our own,
forward resume and cancel, copy its outcome up."""

from __future__ import annotations

from typing import Literal

from lattice_operator.api.v1alpha1 import Intent, LocalObjectReference, Run, find_condition
from lattice_operator.api.v1alpha1.intent import IntentResult, IntentWaiting, QueuedAction
from lattice_operator.api.v1alpha1.run import RunTemplate
from lattice_operator.builders import run_for_intent
from lattice_operator.ports.cluster import ForgeGrant
from lattice_operator.reconcilers.grants import adoption_refusal
from lattice_operator.reconcilers.intent_limits import (
    ARTIFACT_CHARS,
    ARTIFACTS_KEPT,
    SUMMARY_CHARS,
)
from lattice_operator.reconcilers.intent_pass import IntentPass
from lattice_operator.reconcilers.intent_reasons import IntentReason

FORGE_ACTIONS = frozenset({"OPEN_PR", "POST_COMMENT", "LABEL_ISSUE"})
"""The ACTION_REQUESTs an Intent shows as queued for the forge (status.actions)."""


def through_run(step: IntentPass, template: RunTemplate) -> None:
    """Execute through the Intent's Run of `template`, created on the first pass."""
    manifest = run_for_intent(step.intent, template)
    name = manifest["metadata"]["name"]
    run = step.world.run
    refusal = adoption_refusal(step.intent, template, run) if run is not None else None
    if refusal is not None:
        # Someone made a Run with this Intent's name first: never execute through it (it
        # would run their command with this Intent's grants).
        step.status.run_ref = None
        step.fail(IntentReason.RUN_NAME_TAKEN, refusal)
        return
    step.status.run_ref = LocalObjectReference(name=name)
    if run is None:
        step.plan.create.append(manifest)
        step.set("Succeeded", "Unknown", IntentReason.EXECUTING, executing(name))
        return
    events = run.status.events
    step.status.proposals = list(run.status.proposals)
    step.status.actions = [
        QueuedAction(request_id=r.request_id, action=r.action.value, blocking=r.blocking)
        for r in events.action_requests
        if r.state == "Pending" and r.action.value in FORGE_ACTIONS
    ]
    resume = step.intent.spec.resume
    if resume is not None and run.status.phase == "Waiting":
        current = run.spec.resume
        if current is None or (current.checkpoint_id, current.inputs) != (
            resume.checkpoint_id,
            resume.inputs,
        ):
            wanted = {"checkpointId": resume.checkpoint_id, "inputs": resume.inputs}
            step.plan.run_patch = {"spec": {"resume": wanted}}
    phase = run.status.phase or "Pending"
    cond = find_condition(run.status.conditions, "Succeeded")
    message = cond.message if cond else ""
    if phase == "Waiting" and events.waiting is not None:
        step.status.waiting = IntentWaiting(
            reason=events.waiting.reason,
            checkpoint_id=events.waiting.checkpoint_id,
            expected_inputs=dict(events.waiting.expected_inputs),
        )
        step.set(
            "Succeeded",
            "Unknown",
            IntentReason.WAITING,
            f"Run {name} waits: {events.waiting.reason}",
        )
        return
    step.status.waiting = None
    if phase == "Succeeded":
        step.status.result = run_result("success", run, message)
        step.set("Succeeded", "True", IntentReason.COMPLETED, f"Run {name} succeeded: {message}")
    elif phase == "Failed":
        step.status.result = run_result("failure", run, message)
        step.set("Succeeded", "False", IntentReason.RUN_FAILED, f"Run {name} failed: {message}")
    elif phase == "Canceled":
        step.status.result = run_result("canceled", run, message)
        step.set("Succeeded", "False", IntentReason.CANCELED, f"Run {name} was canceled")
    else:
        step.set("Succeeded", "Unknown", IntentReason.EXECUTING, executing(name))


def executing(run: str) -> str:
    """What an executing Intent says of its Run, whatever the Run's phase (queued, starting,
    running, resuming: the Run's own status says which): the Run's start and its phases cost
    the Intent no status write, only its creation and its end do."""
    return f"Run {run} executes it"


def run_result(
    status: Literal["success", "failure", "canceled"], run: Run, message: str
) -> IntentResult:
    """The Intent's result from its Run: the sprite's COMPLETED summary, its artifacts."""
    events = run.status.events
    summary = (
        events.completion.summary if events.completion and events.completion.summary else message
    )
    artifacts = [
        f"{a.kind}: {a.url or a.ref or ''}".rstrip(": ")[:ARTIFACT_CHARS] for a in events.artifacts
    ][:ARTIFACTS_KEPT]
    return IntentResult(status=status, summary=(summary or "")[:SUMMARY_CHARS], artifacts=artifacts)


HEALTH_DETECT_NEEDS_PROBE = (
    "params.healthDetect.probe must be set: a health_detect Intent runs its probe as its Run "
    "(a HealthCheck's firing sets it; one made by hand must give spriteRef and command)"
)


class SpriteTaskExec:
    """sprite_task_exec: run the command of params.spriteTaskExec as the Intent's Run."""

    def sprite(self, intent: Intent) -> str | None:
        return None  # the Run reads its own Sprite

    def grant(self, intent: Intent) -> ForgeGrant | None:
        return None

    def plan(self, step: IntentPass) -> None:
        template = step.intent.spec.params.sprite_task_exec
        if template is None:
            step.missing_params()
            return
        through_run(step, template)


class HealthDetect:
    """health_detect: run the probe (a HealthCheck's firing sets it) as the Intent's Run.
    One made by hand without a probe has nothing to run: it ends Failed naming the field
    (a forge would not help it, so it must not wait for one)."""

    def sprite(self, intent: Intent) -> str | None:
        return None

    def grant(self, intent: Intent) -> ForgeGrant | None:
        return None

    def plan(self, step: IntentPass) -> None:
        params = step.intent.spec.params.health_detect
        if params is None:
            step.missing_params()
        elif params.probe is not None:
            through_run(step, params.probe)
        else:
            step.fail(IntentReason.INVALID_SPEC, HEALTH_DETECT_NEEDS_PROBE)


__all__ = [
    "FORGE_ACTIONS",
    "HEALTH_DETECT_NEEDS_PROBE",
    "HealthDetect",
    "SpriteTaskExec",
    "executing",
    "run_result",
    "through_run",
]
