"""The forge steps of GitHub Intents, carried out after the pass that announced them wrote
its status: the sprite's workspace prepared, its work taken back, the Intents a plan starts.
What was done goes into `status.forge`; a failure is recorded there with its class and a
time to try again (the Intent shows ForgeUnavailable meanwhile)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from lattice_operator.api.v1alpha1 import Intent, Run
from lattice_operator.api.v1alpha1.intent import (
    IssuePlanApproveParams,
    IssueTriageParams,
    PrCreateFromPlanParams,
    PrFixupFromFeedbackParams,
)
from lattice_operator.api.v1alpha1.resources import INTENTS
from lattice_operator.forge.builders import parse_tasks, plan_intent, tasks_plan
from lattice_operator.forge.context import forge_params
from lattice_operator.forge.delivery import DeliveryLimits
from lattice_operator.forge.research import notes_comment, parse_notes, plan_comment
from lattice_operator.forge.steps import StepInput, finish, prepare, read_plan
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.lifeloop.classes import RetryClass
from lattice_operator.metrics import FORGE_STEPS
from lattice_operator.ports.errors import AdapterError, InvalidRequest
from lattice_operator.reconcilers.intent_forge import MAX_FORGE_ATTEMPTS, ForgeWork, followup_name
from lattice_operator.reconcilers.intent_pass import Notice

log = logging.getLogger(__name__)


def step_input(intent: Intent, work: ForgeWork) -> StepInput:
    params = forge_params(intent)
    assert params is not None
    forge = intent.status.forge
    number = plan = feedback = review = None
    tasks: tuple[tuple[str, str], ...] = ()
    if isinstance(params, IssueTriageParams | IssuePlanApproveParams):
        number = params.issue_number
    research = isinstance(params, IssueTriageParams) and params.research
    if isinstance(params, IssuePlanApproveParams | PrCreateFromPlanParams):
        plan = params.plan
    if isinstance(params, IssuePlanApproveParams):
        tasks = tuple((t.title, t.body) for t in params.tasks)
    docs = None
    if isinstance(params, PrCreateFromPlanParams):
        number, docs = params.issue_number, params.docs
    if isinstance(params, PrFixupFromFeedbackParams):
        number, feedback, review = params.pr_number, params.feedback, params.review_id
    return StepInput(
        kind=intent.spec.kind,
        uid=intent.metadata.uid or intent.metadata.name,
        name=intent.metadata.name,
        repo=params.repo,
        number=number,
        sprite=work.sprite,
        base_branch=(forge.base_branch if forge and forge.base_branch else work.base_branch),
        head_branch=(forge.head_branch if forge and forge.head_branch else work.head_branch),
        base_sha=forge.base_sha if forge else None,
        summary=intent.spec.summary or intent.metadata.name,
        plan=plan,
        review_id=review,
        feedback=feedback,
        tasks=tasks,
        research=research,
        docs=docs,
    )


@dataclass(frozen=True)
class ForgeStepDone:
    """A forge step carried out and recorded: the Intent as stored afterwards, and the Events
    to post on it (the daemon posts them: only it holds kopf's body)."""

    stored: dict[str, Any]
    notices: tuple[Notice, ...] = ()


async def forge_step(
    ctx: OperatorContext, intent: Intent, work: ForgeWork, run: Run | None
) -> ForgeStepDone | None:
    """Carry out `work` (None: no forge, nothing recorded)."""
    access = ctx.forge
    if access is None:
        return None
    notices: list[Notice] = []
    namespace = intent.metadata.namespace or ""
    now = ctx.clock.now()
    fields: dict[str, Any]
    try:
        step = step_input(intent, work)
        if work.step == "prepare":
            fields = await prepare(access.forge, ctx.require_backend(), step, now)
        else:
            followup = None
            if intent.spec.kind == "issue_plan_approve" and not _has_tasks(intent):
                followup = followup_name(intent)
            if intent.spec.kind == "issue_triage" and run is not None:
                followup = await _plan_from_triage(ctx, intent, run, work)
                if step.research:
                    step = await _research_comments(ctx, step, run, followup)
            if step.docs is not None and run is not None:
                step = replace(step, lag=await _docs_lag(ctx, step, run))
            limits = DeliveryLimits(
                max_bytes=access.max_bundle_bytes,
                max_commits=access.max_commits,
                protected=access.protected_branches,
            )
            pushed = intent.status.forge.pushed_sha if intent.status.forge else None
            fields, refusal = await finish(
                access.forge,
                ctx.require_backend(),
                step,
                limits,
                pushed=pushed,
                followup=followup,
            )
            if followup and intent.spec.kind == "issue_triage":
                fields["followup"] = followup
            if refusal is not None:
                fields["attempts"] = MAX_FORGE_ATTEMPTS  # final: nothing is pushed, ever
                notices.append(Notice("BranchRefused", refusal[:1024], warning=True))
        fields.setdefault("problem", None)
        fields.setdefault("retryAt", None)
        FORGE_STEPS.labels(step=work.step, outcome="done").inc()
    except AdapterError as exc:
        FORGE_STEPS.labels(step=work.step, outcome=exc.failure_class.value).inc()
        delay = min(60.0, 2.0**work.attempt)
        retry_at = now + timedelta(seconds=delay)
        log.warning("forge %s of %s: %s", work.step, intent.metadata.name, exc)
        fields = {
            "problem": f"{exc} ({exc.failure_class.value}, {exc.retry_class.value})"[:1024],
            "retryAt": retry_at.isoformat().replace("+00:00", "Z"),
        }
        if exc.retry_class is RetryClass.DO_NOT_RETRY:
            fields["attempts"] = MAX_FORGE_ATTEMPTS
    stored = await ctx.require_writer().patch_status(
        INTENTS.gvp, namespace, intent.metadata.name, {"forge": fields}
    )
    return ForgeStepDone(stored, tuple(notices))


def _has_tasks(intent: Intent) -> bool:
    params = forge_params(intent)
    return isinstance(params, IssuePlanApproveParams) and bool(params.tasks)


async def _plan_from_triage(
    ctx: OperatorContext, intent: Intent, run: Run, work: ForgeWork
) -> str | None:
    """The plan the triage agent declared, made into an issue_plan_approve Intent."""
    artifacts = run.status.events.artifacts
    artifact = next((a for a in artifacts if a.kind in ("plan", "tasks")), None)
    if artifact is None or not artifact.ref or work.sprite is None:
        return None
    text = await read_plan(ctx.require_backend(), work.sprite, artifact.ref)
    tasks = parse_tasks(text) if artifact.kind == "tasks" else []
    manifest = plan_intent(intent, text if not tasks else tasks_plan(tasks), tasks=tasks)
    await ctx.require_writer().create(INTENTS.gvp, intent.metadata.namespace or "", manifest)
    return str(manifest["metadata"]["name"])


async def _research_comments(
    ctx: OperatorContext, step: StepInput, run: Run, followup: str | None
) -> StepInput:
    """A research triage's notes (and the plan it proposed) as the comments to post."""
    artifacts = run.status.events.artifacts
    notes = next((a for a in artifacts if a.kind == "notes"), None)
    plan = next((a for a in artifacts if a.kind == "plan"), None)
    backend = ctx.require_backend()
    notes_text = proposal = None
    if notes is not None and notes.ref and step.sprite is not None:
        text = await read_plan(backend, step.sprite, notes.ref)
        notes_text = notes_comment(parse_notes(text, notes.ref))
    if followup and plan is not None and plan.ref and step.sprite is not None:
        proposal = plan_comment(await read_plan(backend, step.sprite, plan.ref), followup)
    return replace(step, notes=notes_text, proposal=proposal)


async def _docs_lag(ctx: OperatorContext, step: StepInput, run: Run) -> str | None:
    """The lag a docs agent reported (ARTIFACT kind `docs_lag`, a text file), if any."""
    artifact = next((a for a in run.status.events.artifacts if a.kind == "docs_lag"), None)
    if artifact is None or not artifact.ref or step.sprite is None:
        return None
    text = await read_plan(ctx.require_backend(), step.sprite, artifact.ref)
    if not text.strip():
        raise InvalidRequest(f"the docs_lag artifact {artifact.ref[:200]!r} is empty")
    return text


__all__ = ["ForgeStepDone", "forge_step", "step_input"]
