"""The Intent pipeline: propose → classify → gate → execute, level-based and pure.

`reconcile_intent(world)` reads everything it needs from `IntentWorld` (the
Intent, the policies, the verified approval records, the child Run or Sprite)
and returns an `IntentPlan`: the status to write and the few writes to make.
Conditions are the source of truth (Classified, Approved, Succeeded); the phase
is derived from them, and every phase change is appended to the audit log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from lattice_operator.api.v1alpha1 import (
    AuditEntry,
    Classification,
    Intent,
    IntentPhase,
    IntentStatus,
    LocalObjectReference,
    Run,
    Sprite,
    find_condition,
    set_condition,
)
from lattice_operator.api.v1alpha1.fileops import FileOpsRequest
from lattice_operator.api.v1alpha1.intent import (
    ApprovalRecord,
    FileOpsStatus,
    ForgePullRequestRef,
    ForgeStatus,
    HealthDetectParams,
    HealthRemediateParams,
    IntentResult,
    IntentWaiting,
    QueuedAction,
    SpriteCreateParams,
)
from lattice_operator.api.v1alpha1.run import RunTemplate
from lattice_operator.builders import run_for_intent, sprite_for_intent
from lattice_operator.forge.context import FORGE_KINDS, forge_params
from lattice_operator.policy import CompiledPolicy, Decision, classify, intent_document
from lattice_operator.reconcilers.approvals import for_spec, spec_digest
from lattice_operator.reconcilers.grants import adoption_refusal, owned_by
from lattice_operator.reconcilers.intent_forge import (
    ForgeWork,
    decide_forge,
    followup_intent,
    followup_name,
    opened_pr,
)
from lattice_operator.reconcilers.intent_reasons import WAITING_REASONS, IntentReason

OPERATOR = "lattice-operator"
AUDIT_LIMIT = 64
FORGE_ACTIONS = frozenset({"OPEN_PR", "POST_COMMENT", "LABEL_ISSUE"})
TERMINAL = frozenset({"Succeeded", "Failed", "Rejected", "Canceled"})

# Kinds whose execution needs a capability this installation does not have yet: recorded as
# Waiting with a reason, never silently succeeded.
UNAVAILABLE: dict[str, tuple[IntentReason, str]] = {
    "issue_triage": (
        IntentReason.NO_FORGE_CONFIGURED,
        "triaging an issue needs a forge (GitHub) integration",
    ),
    "issue_plan_approve": (
        IntentReason.NO_FORGE_CONFIGURED,
        "acting on an issue needs a forge integration",
    ),
    "pr_create_from_plan": (
        IntentReason.NO_FORGE_CONFIGURED,
        "opening a pull request needs a forge",
    ),
    "pr_fixup_from_feedback": (
        IntentReason.NO_FORGE_CONFIGURED,
        "pushing to a pull request needs a forge",
    ),
    "health_detect": (IntentReason.NO_FORGE_CONFIGURED, "recording a health issue needs a forge"),
    "environment_change": (
        IntentReason.NO_ENVIRONMENT_MANAGER,
        "approved environment changes wait for the "
        "environment manager, which is not enabled in this version",
    ),
}

Phase = IntentPhase


@dataclass(frozen=True)
class IntentWorld:
    """Everything the pipeline reads."""

    intent: Intent
    policies: Sequence[CompiledPolicy]
    default_policy: CompiledPolicy | None
    approvals: Sequence[ApprovalRecord]
    run: Run | None
    sprite: Sprite | None
    now: datetime
    forge_ready: bool = False
    """The operator has a GitHub credential (the GitHub kinds wait for one otherwise)."""
    decision: Decision | None = None
    """The policies' decision for this spec, when the caller made it already (off its event
    loop: evaluating rules takes up to a step budget); None: classified here if due."""


@dataclass(frozen=True)
class FileOpsWork:
    """Carry out `request` in the backend sprite `sprite` (attempt `attempt`)."""

    request: FileOpsRequest
    sprite: str
    attempt: int


@dataclass(frozen=True)
class RemediationWork:
    """Recreate the Sprite's backend sprite, or restart one of its services (after this
    plan's status is written); the handler records the outcome in `status.result`."""

    action: Literal["recreate_sprite", "restart_service"]
    sprite: Sprite
    service: str | None = None


@dataclass(frozen=True)
class Notice:
    """An Event to post on the Intent."""

    reason: str
    message: str
    warning: bool = False


@dataclass
class IntentPlan:
    """What to write."""

    status: IntentStatus
    create: list[dict[str, Any]] = field(default_factory=list)
    run_patch: dict[str, Any] | None = None
    fileops: FileOpsWork | None = None
    """A FileOps request to carry out now (after this plan's status is written)."""
    forge: ForgeWork | None = None
    """A forge step to carry out now (after this plan's status is written)."""
    remediation: RemediationWork | None = None
    """A health_remediate step to carry out now (after this plan's status is written)."""
    notices: list[Notice] = field(default_factory=list)
    decision: Decision | None = None
    left_approval_after: float | None = None
    """Seconds spent in AwaitingApproval, when this pass left it."""

    @property
    def phase(self) -> str:
        return self.status.phase or "Proposed"


def derive_phase(status: IntentStatus) -> Phase:
    """The phase from the conditions (never the other way round)."""
    done = find_condition(status.conditions, "Succeeded")
    if done is not None:
        if done.status == "True":
            return "Succeeded"
        if done.status == "False":
            return "Canceled" if done.reason == IntentReason.CANCELED else "Failed"
        return "Waiting" if done.reason in WAITING_REASONS else "Executing"
    approved = find_condition(status.conditions, "Approved")
    if approved is not None:
        if approved.status == "False":
            return "Rejected"
        return "Approved" if approved.status == "True" else "AwaitingApproval"
    classified = find_condition(status.conditions, "Classified")
    return "Classified" if classified is not None and classified.status == "True" else "Proposed"


class _Pass:
    """One reconcile pass: conditions set in order, each phase change audited."""

    def __init__(self, world: IntentWorld) -> None:
        self.world = world
        self.intent = world.intent
        self.status = world.intent.status.model_copy(deep=True)
        self.plan = IntentPlan(status=self.status)
        self.generation = world.intent.metadata.generation
        self.phase: Phase = derive_phase(self.status)

    def set(
        self,
        type: str,
        status: Literal["True", "False", "Unknown"],
        reason: IntentReason,
        message: str,
        actor: str = OPERATOR,
    ) -> None:
        self.status.conditions = set_condition(
            self.status.conditions,
            type=type,
            status=status,
            reason=reason,
            message=message[:1024],
            observed_generation=self.generation,
            now=self.world.now,
        )
        phase = derive_phase(self.status)
        if phase != self.phase:
            if self.phase == "AwaitingApproval" and self.status.awaiting_since is not None:
                waited = self.world.now - self.status.awaiting_since
                self.plan.left_approval_after = waited.total_seconds()
            entry = AuditEntry(
                from_phase=self.phase,
                to_phase=phase,
                time=self.world.now,
                actor=actor[:512],
                reason=message[:1024],
            )
            self.status.audit_log = [*self.status.audit_log, entry][-AUDIT_LIMIT:]
            self.phase = phase

    def finish(self) -> IntentPlan:
        self.status.phase = self.phase
        self.status.observed_generation = self.generation
        return self.plan


def reconcile_intent(world: IntentWorld) -> IntentPlan:
    """One level-based pass over the pipeline."""
    step = _Pass(world)
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
    _execute(step)
    return step.finish()


def _cancel(step: _Pass) -> None:
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


def _classified(step: _Pass) -> bool:
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


def _gate(step: _Pass) -> bool:
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


def _execute(step: _Pass) -> None:
    intent = step.intent
    kind = intent.spec.kind
    params = intent.spec.kind_params()
    if kind == "sprite_task_exec":
        assert isinstance(params, RunTemplate)
        _through_run(step, params)
    elif kind == "health_remediate":
        assert isinstance(params, HealthRemediateParams)
        if params.remediation == "run_command" and params.run is not None:
            _through_run(step, params.run)
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
    elif kind == "sprite_create":
        assert isinstance(params, SpriteCreateParams)
        _create_sprite(step, params)
    elif isinstance(params, HealthDetectParams) and params.probe is not None:
        _through_run(step, params.probe)
    elif kind == "fileops":
        assert isinstance(params, FileOpsRequest)
        _fileops(step, params)
    elif kind in FORGE_KINDS:
        _forge(step)
    else:
        reason, message = UNAVAILABLE[kind]
        step.set("Succeeded", "Unknown", reason, message)


def _through_run(step: _Pass, template: RunTemplate) -> None:
    manifest = run_for_intent(step.intent, template)
    name = manifest["metadata"]["name"]
    run = step.world.run
    refusal = adoption_refusal(step.intent, template, run) if run is not None else None
    if refusal is not None:
        # Someone made a Run with this Intent's name first: never execute through it (it
        # would run their command with this Intent's grants).
        step.status.run_ref = None
        step.status.result = IntentResult(status="failure", summary=refusal[:1024])
        step.set("Succeeded", "False", IntentReason.RUN_NAME_TAKEN, refusal)
        return
    step.status.run_ref = LocalObjectReference(name=name)
    if run is None:
        step.plan.create.append(manifest)
        step.set("Succeeded", "Unknown", IntentReason.EXECUTING, _executing(name, "Pending"))
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
        step.status.result = _result("success", run, message)
        step.set("Succeeded", "True", IntentReason.COMPLETED, f"Run {name} succeeded: {message}")
    elif phase == "Failed":
        step.status.result = _result("failure", run, message)
        step.set("Succeeded", "False", IntentReason.RUN_FAILED, f"Run {name} failed: {message}")
    elif phase == "Canceled":
        step.status.result = _result("canceled", run, message)
        step.set("Succeeded", "False", IntentReason.CANCELED, f"Run {name} was canceled")
    else:
        step.set("Succeeded", "Unknown", IntentReason.EXECUTING, _executing(name, phase))


def _executing(run: str, phase: str) -> str:
    """What an executing Intent says of its Run: Pending (created, not started: queued for
    its Sprite, say) or running. Starting, Running and Resuming read the same, so a Run's
    start costs its Intent no status write of its own beyond the one that says it runs."""
    return f"Run {run} is Pending" if phase == "Pending" else f"Run {run} is running"


def _forge(step: _Pass) -> None:
    intent = step.intent
    params = forge_params(intent)
    assert params is not None
    forge = step.status.forge or ForgeStatus(repo=params.repo)
    step.status.forge = forge
    run = step.world.run
    pull = opened_pr(run)
    if pull is not None and forge.pull_request is None:
        forge.pull_request = ForgePullRequestRef(number=pull[0], url=pull[1][:1024])
    decision = decide_forge(
        intent, run, step.world.sprite, forge_ready=step.world.forge_ready, now=step.world.now
    )
    if decision.action == "wait":
        step.set("Succeeded", "Unknown", decision.reason, decision.message)
    elif decision.action == "work":
        assert decision.work is not None
        step.plan.create.extend(decision.create)
        step.plan.forge = decision.work
        forge.attempts = decision.work.attempt
        step.set("Succeeded", "Unknown", IntentReason.EXECUTING, decision.message)
    elif decision.action == "run":
        assert decision.template is not None
        _through_run(step, decision.template)
    else:
        artifacts = list(step.status.result.artifacts) if step.status.result else []
        if run is not None:
            artifacts = _result("success", run, "").artifacts
        if forge.pull_request is not None:
            artifacts = [*artifacts, f"pr_url: {forge.pull_request.url}"][:32]
        outcome: Literal["success", "failure"] = "success" if decision.success else "failure"
        step.status.result = IntentResult(
            status=outcome, summary=decision.message[:1024], artifacts=artifacts
        )
        reason = IntentReason.COMPLETED if decision.success else decision.reason
        step.set("Succeeded", "True" if decision.success else "False", reason, decision.message)


def _result(
    status: Literal["success", "failure", "canceled"], run: Run, message: str
) -> IntentResult:
    events = run.status.events
    summary = (
        events.completion.summary if events.completion and events.completion.summary else message
    )
    artifacts = [f"{a.kind}: {a.url or a.ref or ''}".rstrip(": ") for a in events.artifacts][:32]
    return IntentResult(status=status, summary=(summary or "")[:1024], artifacts=artifacts)


def remediation_sprite(intent: Intent) -> str | None:
    """The Sprite a health_remediate Intent acts on (params.healthRemediate.spriteRef)."""
    params = intent.spec.kind_params() if intent.spec.kind == "health_remediate" else None
    if isinstance(params, HealthRemediateParams) and params.sprite_ref is not None:
        return params.sprite_ref.name
    return None


def _remediate(step: _Pass, params: HealthRemediateParams) -> None:
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
        message = f"remediation {what} needs {missing}"
        step.status.result = IntentResult(status="failure", summary=message)
        step.set("Succeeded", "False", IntentReason.REMEDIATION_FAILED, message)
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


def _remediate_with_a_pr(step: _Pass, params: HealthRemediateParams) -> None:
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
        message = f"remediation open_pr needs {', '.join(missing)}"
        step.status.result = IntentResult(status="failure", summary=message)
        step.set("Succeeded", "False", IntentReason.REMEDIATION_FAILED, message)
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


def fileops_sprite(intent: Intent) -> str | None:
    """The Sprite a fileops Intent works in (its subject)."""
    subject = intent.spec.subject
    return subject.ref if subject is not None and subject.type == "sprite" else None


def _fileops(step: _Pass, request: FileOpsRequest) -> None:
    name = fileops_sprite(step.intent)
    if name is None:
        message = "a fileops Intent names its Sprite: subject {type: sprite, ref: NAME}"
        step.status.result = IntentResult(status="failure", summary=message)
        step.set("Succeeded", "False", IntentReason.FILEOPS_NO_SPRITE, message)
        return
    step.status.sprite_ref = LocalObjectReference(name=name)
    done = step.status.fileops
    response = done.response if done is not None else None
    if response is not None:
        outcome = str(response.get("status"))
        summary = _fileops_summary(response)
        if outcome in ("ok", "split", "ask"):
            step.status.result = IntentResult(status="success", summary=summary[:1024])
            step.set("Succeeded", "True", IntentReason.COMPLETED, f"FileOps {outcome}: {summary}")
        else:
            step.status.result = IntentResult(status="failure", summary=summary[:1024])
            step.set(
                "Succeeded", "False", IntentReason.FILEOPS_FAILED, f"FileOps {outcome}: {summary}"
            )
        return
    attempts = done.attempts if done is not None else 0
    if attempts >= request.constraints.max_attempts:
        message = (
            f"the request was started {attempts} times and never finished "
            f"(constraints.max_attempts is {request.constraints.max_attempts})"
        )
        step.status.result = IntentResult(status="failure", summary=message)
        step.set("Succeeded", "False", IntentReason.FILEOPS_FAILED, message)
        return
    sprite = step.world.sprite
    ready = find_condition(sprite.status.conditions, "Ready") if sprite is not None else None
    backend_name = sprite.status.sprite_name or sprite.backend_name() if sprite else None
    if ready is None or ready.status != "True" or not backend_name:
        step.set(
            "Succeeded",
            "Unknown",
            IntentReason.SPRITE_NOT_READY,
            f"waiting for Sprite {name} to be Ready",
        )
        return
    step.status.fileops = FileOpsStatus(attempts=attempts + 1, started_at=step.world.now)
    step.plan.fileops = FileOpsWork(request=request, sprite=backend_name, attempt=attempts + 1)
    step.set(
        "Succeeded",
        "Unknown",
        IntentReason.EXECUTING,
        f"carrying out {len(request.ops)} ops in Sprite {name} (attempt {attempts + 1})",
    )


def _fileops_summary(response: dict[str, Any]) -> str:
    outcome = response.get("status")
    if outcome == "ok":
        changed = ", ".join(response.get("changedFiles") or []) or "nothing"
        return f"{len(response.get('ops') or [])} ops done; changed: {changed}"
    for key, field_name in (("fail", "reason"), ("split", None), ("ask", "questions")):
        value = response.get(key)
        if isinstance(value, dict):
            if field_name is None:
                return "the step needs substeps"
            found = value.get(field_name)
            return "; ".join(found) if isinstance(found, list) else str(found)
    errors = response.get("errors") or []
    return "; ".join(f"{e.get('field')}: {e.get('error')}" for e in errors if isinstance(e, dict))


def _create_sprite(step: _Pass, params: SpriteCreateParams) -> None:
    step.status.sprite_ref = LocalObjectReference(name=params.name)
    sprite = step.world.sprite
    if sprite is None:
        step.plan.create.append(sprite_for_intent(step.intent, params))
        step.set("Succeeded", "Unknown", IntentReason.EXECUTING, f"created Sprite {params.name}")
        return
    ready = find_condition(sprite.status.conditions, "Ready")
    if ready is not None and ready.status == "True":
        step.status.result = IntentResult(
            status="success", summary=f"Sprite {params.name} is ready at {sprite.status.url}"
        )
        step.set("Succeeded", "True", IntentReason.SPRITE_READY, f"Sprite {params.name} is ready")
    elif ready is not None and ready.status == "False":
        step.status.result = IntentResult(status="failure", summary=ready.message)
        step.set(
            "Succeeded",
            "False",
            IntentReason.SPRITE_FAILED,
            f"Sprite {params.name}: {ready.message}",
        )
    else:
        step.set(
            "Succeeded", "Unknown", IntentReason.EXECUTING, f"waiting for Sprite {params.name}"
        )
