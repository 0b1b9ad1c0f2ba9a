"""The GitHub kinds' execution, decided from the Intent, its Run and its Sprite (pure).

- issue_triage: the agent reads the issue (context file), asks or plans with POST_COMMENT;
  a plan it declares (ARTIFACT kind `plan`) becomes an issue_plan_approve Intent. A research
  triage's notes (ARTIFACT kind `notes`, loop 4) are posted on the issue, then its plan.
- issue_plan_approve: gated like every Intent (approval from GitHub maps to a Kubernetes
  identity); once approved it starts a pr_create_from_plan Intent and says so on the issue.
- pr_create_from_plan: the sprite gets a clone (a bundle, no credential), works on its own
  branch; OPEN_PR pushes it and opens the pull request (or the operator does it when the
  Run succeeds without one). The PR is an artifact of the Run and in `status.forge`.
- pr_fixup_from_feedback: a clone of the PR's branch and the review; when the Run succeeds
  its commits are pushed to the same branch (a fast-forward only) and the PR is commented.

Each step with side effects (`ForgeWork`) is carried out by the handler after the status
that announces it is written; `status.forge.attempts` bounds the retries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from lattice_operator.api.v1alpha1 import Intent, Run, Sprite, find_condition
from lattice_operator.api.v1alpha1.intent import (
    IssuePlanApproveParams,
    IssueTriageParams,
    PrCreateFromPlanParams,
)
from lattice_operator.api.v1alpha1.run import EnvVar, RunTemplate
from lattice_operator.forge.context import (
    WORKSPACE_KINDS,
    forge_params,
    head_branch,
    repo_slug,
)
from lattice_operator.forge.workspace import CONTEXT_FILE, REPO_DIR
from lattice_operator.reconcilers.intent_reasons import IntentReason

MAX_FORGE_ATTEMPTS = 5


@dataclass(frozen=True)
class ForgeWork:
    """A forge step for the handler to carry out (after this pass's status is written)."""

    step: Literal["prepare", "finish"]
    kind: str
    repo: str
    sprite: str | None
    """The backend sprite (prepare writes into it, finish reads the branch back)."""
    base_branch: str | None
    head_branch: str | None
    attempt: int


@dataclass(frozen=True)
class ForgeDecision:
    """What the pipeline does next for a GitHub Intent."""

    action: Literal["wait", "work", "run", "done"]
    reason: IntentReason = IntentReason.EXECUTING
    message: str = ""
    work: ForgeWork | None = None
    template: RunTemplate | None = None
    success: bool = True
    create: list[dict[str, Any]] = field(default_factory=list)


def _sprite_ready(sprite: Sprite | None) -> str | None:
    if sprite is None:
        return None
    ready = find_condition(sprite.status.conditions, "Ready")
    if ready is None or ready.status != "True":
        return None
    return sprite.status.sprite_name or sprite.backend_name()


def agent_template(intent: Intent, template: RunTemplate) -> RunTemplate:
    """The agent's Run, told where its context and (for PR kinds) its clone and branch are."""
    forge = intent.status.forge
    extra = [
        EnvVar(name="LATTICE_FORGE_CONTEXT", value=CONTEXT_FILE),
        EnvVar(name="LATTICE_FORGE_REPO", value=forge.repo if forge else ""),
    ]
    if intent.spec.kind in WORKSPACE_KINDS and forge is not None:
        extra += [
            EnvVar(name="LATTICE_FORGE_CHECKOUT", value=REPO_DIR),
            EnvVar(name="LATTICE_FORGE_BRANCH", value=forge.head_branch or ""),
            EnvVar(name="LATTICE_FORGE_BASE", value=forge.base_branch or ""),
        ]
    names = {e.name for e in extra}
    env = [e for e in template.env if e.name not in names] + extra
    return template.model_copy(update={"env": env})


def decide_forge(
    intent: Intent,
    run: Run | None,
    sprite: Sprite | None,
    *,
    forge_ready: bool,
    now: datetime | None = None,
) -> ForgeDecision:
    params = forge_params(intent)
    assert params is not None
    forge = intent.status.forge
    if not forge_ready:
        return ForgeDecision(
            "wait", IntentReason.NO_FORGE_CONFIGURED, "no GitHub is configured for the operator"
        )
    attempts = forge.attempts if forge else 0
    if forge is not None and forge.finished:
        return ForgeDecision("done", message=_done_message(intent))
    if (
        forge is not None
        and forge.retry_at is not None
        and now is not None
        and now < forge.retry_at
    ):
        return ForgeDecision(
            "wait",
            IntentReason.FORGE_UNAVAILABLE,
            f"{forge.problem or 'the forge failed'}; trying again at {forge.retry_at:%H:%M:%S}",
        )
    if isinstance(params, IssuePlanApproveParams):
        return _plan_approved(intent, params, attempts)
    template = params.run
    if template is None:
        return ForgeDecision(
            "wait",
            IntentReason.NO_AGENT_CONFIGURED,
            f"{intent.spec.kind} needs an agent: params.{_member(intent)}.run (a "
            "GitHubRepository's spec.agent fills it in)",
        )
    if attempts >= MAX_FORGE_ATTEMPTS and (
        forge is None or not forge.prepared_at or _finishing(run)
    ):
        return ForgeDecision(
            "done",
            IntentReason.FORGE_FAILED,
            f"the forge step failed {attempts} times: {forge.problem if forge else ''}",
            success=False,
        )
    if forge is None or forge.prepared_at is None:
        backend_name = _sprite_ready(sprite)
        if backend_name is None:
            return ForgeDecision(
                "wait",
                IntentReason.SPRITE_NOT_READY,
                f"waiting for Sprite {template.sprite_ref.name} to be Ready",
            )
        base = params.base_branch if isinstance(params, PrCreateFromPlanParams) else None
        return ForgeDecision(
            "work",
            message="preparing the sprite's workspace",
            work=ForgeWork(
                "prepare",
                intent.spec.kind,
                params.repo,
                backend_name,
                base,
                head_branch(intent),
                attempts + 1,
            ),
        )
    if _finishing(run):
        assert run is not None
        if isinstance(params, IssueTriageParams):
            artifacts = run.status.events.artifacts
            # Loop 4's notes are posted on the issue by the finish step, plan or not.
            declared = next((a for a in artifacts if a.kind in ("plan", "tasks", "notes")), None)
            if declared is None:
                return ForgeDecision("done", message="triaged (no plan proposed yet)")
        if isinstance(params, PrCreateFromPlanParams) and _opened_pr(run) is not None:
            return ForgeDecision("done", message=_done_message(intent))
        if isinstance(params, PrCreateFromPlanParams) and params.docs is not None:
            # Loop 6: the docs agent found them current (and reported no lag): nothing to
            # take back, no pull request without commits.
            kinds = {a.kind for a in run.status.events.artifacts}
            if "docs_current" in kinds and "docs_lag" not in kinds:
                return ForgeDecision("done", message="the docs are current: nothing to change")
        return ForgeDecision(
            "work",
            message="taking the sprite's work back",
            work=ForgeWork(
                "finish",
                intent.spec.kind,
                params.repo,
                _sprite_ready(sprite),
                forge.base_branch,
                forge.head_branch,
                attempts + 1,
            ),
        )
    return ForgeDecision("run", template=agent_template(intent, template))


def _finishing(run: Run | None) -> bool:
    return run is not None and run.status.phase == "Succeeded"


def _opened_pr(run: Run) -> tuple[int, str] | None:
    for result in run.status.action_results:
        if result.action == "OPEN_PR" and result.status == "fulfilled" and result.number:
            return result.number, result.url or ""
    return None


def opened_pr(run: Run | None) -> tuple[int, str] | None:
    """The pull request the Run's OPEN_PR opened, if any."""
    return _opened_pr(run) if run is not None else None


def _member(intent: Intent) -> str:
    from lattice_operator.api.v1alpha1.intent import params_field

    return params_field(intent.spec.kind)


def _done_message(intent: Intent) -> str:
    forge = intent.status.forge
    if forge is None:
        return "done"
    if forge.pull_request is not None:
        pushed = f" at {forge.pushed_sha[:12]}" if forge.pushed_sha else ""
        return f"pull request #{forge.pull_request.number}{pushed}: {forge.pull_request.url}"
    if forge.followup:
        return f"started Intent {forge.followup}"
    params = forge_params(intent)
    if forge.issues and isinstance(params, PrCreateFromPlanParams) and params.docs is not None:
        return f"docs lag reported on issue #{forge.issues[0]}"
    if forge.issues:
        return "created issues " + ", ".join(f"#{n}" for n in forge.issues)
    return "done on GitHub"


def followup_name(intent: Intent) -> str:
    return f"{intent.metadata.name[:240]}-pr"


def followup_intent(intent: Intent, spec: dict[str, Any]) -> dict[str, Any]:
    """The Intent `<name>-pr` this one starts, owned by it (it goes with it), with `spec`."""
    return {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Intent",
        "metadata": {
            "name": followup_name(intent),
            "namespace": intent.metadata.namespace,
            "labels": {"lattice.dev/intent": intent.metadata.name[:63]},
            "ownerReferences": [
                {
                    "apiVersion": "lattice.dev/v1alpha1",
                    "kind": "Intent",
                    "name": intent.metadata.name,
                    "uid": intent.metadata.uid,
                    "controller": True,
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "spec": spec,
    }


def _plan_approved(intent: Intent, params: IssuePlanApproveParams, attempts: int) -> ForgeDecision:
    """Approved (the gate is behind us): start the pull request and say so on the issue."""
    if attempts >= MAX_FORGE_ATTEMPTS:
        forge = intent.status.forge
        return ForgeDecision(
            "done",
            IntentReason.FORGE_FAILED,
            f"announcing the approval failed {attempts} times: {forge.problem if forge else ''}",
            success=False,
        )
    if params.tasks:
        return ForgeDecision(
            "work",
            message=f"plan approved: creating {len(params.tasks)} issues",
            work=ForgeWork(
                "finish",
                intent.spec.kind,
                params.repo,
                None,
                params.base_branch,
                None,
                attempts + 1,
            ),
        )
    name = followup_name(intent)
    spec: dict[str, Any] = {
        "kind": "pr_create_from_plan",
        "summary": f"Implement the approved plan for {params.repo}#{params.issue_number}"[:1024],
        "proposedBy": {"type": "system", "name": intent.metadata.name},
        "subject": {"type": "issue", "ref": f"{params.repo}#{params.issue_number}"},
        "params": {
            "prCreateFromPlan": {
                "repo": params.repo,
                "baseBranch": params.base_branch,
                "headBranch": f"lattice/{repo_slug(params.repo)}-{params.issue_number}"[:255],
                "plan": params.plan,
                "issueNumber": params.issue_number,
                **({"run": params.run.to_wire()} if params.run is not None else {}),
            }
        },
        "allowedActions": list(intent.spec.allowed_actions),
    }
    manifest = followup_intent(intent, spec)
    return ForgeDecision(
        "work",
        message=f"plan approved: starting Intent {name}",
        create=[manifest],
        work=ForgeWork(
            "finish", intent.spec.kind, params.repo, None, params.base_branch, None, attempts + 1
        ),
    )


__all__ = [
    "MAX_FORGE_ATTEMPTS",
    "ForgeDecision",
    "ForgeWork",
    "agent_template",
    "decide_forge",
    "followup_name",
    "opened_pr",
]
