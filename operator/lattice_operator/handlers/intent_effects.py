"""What an Intent's work loop (`reconcilers.intent_loop`) hands its plans to: the writes
through the cluster writer port, the Events, and the work each kind announces (FileOps, a
forge step, a remediation, a Fly action, a restore), each recording its outcome in the
Intent's status and handing back the Intent as stored."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import kopf

from lattice_adapters.kube import KubeApiError
from lattice_operator.api.v1alpha1 import Intent, Run
from lattice_operator.api.v1alpha1.resources import INTENTS, RUNS, SPRITES, resource_of_kind
from lattice_operator.fileops.executor import execute as execute_fileops
from lattice_operator.fileops.executor import for_status as fileops_for_status
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.handlers._parsed import parse_run
from lattice_operator.handlers._writes import is_gone
from lattice_operator.handlers.intent_fly import fly_step
from lattice_operator.handlers.intent_forge import forge_step
from lattice_operator.handlers.intent_remediation import remediate
from lattice_operator.handlers.intent_restore import intent_ref, restore
from lattice_operator.metrics import (
    AWAITING_APPROVAL_SECONDS,
    FILEOPS_DONE,
    INTENT_DECISION_SECONDS,
    INTENT_DECISIONS,
    STATUS_PATCHES,
)
from lattice_operator.policy import Decision
from lattice_operator.ports.errors import AdapterError
from lattice_operator.reconcilers.intent import IntentPlan, Notice
from lattice_operator.reconcilers.intent_created_runs import CreatedRuns
from lattice_operator.reconcilers.intent_forge import ForgeWork
from lattice_operator.reconcilers.intent_loop import IntentGone
from lattice_operator.reconcilers.intent_pass import FlyWork, RemediationWork, RestoreWork

log = logging.getLogger(__name__)


class ClusterEffects:
    """`reconcilers.intent_loop.IntentEffects` for this operator (its writer, backend, forge
    and Fly)."""

    def __init__(self, ctx: OperatorContext) -> None:
        self._ctx = ctx

    async def apply(self, intent: Intent, plan: IntentPlan, created: CreatedRuns) -> bool:
        return await apply_plan(self._ctx, intent, plan, created)

    def decided(self, intent: Intent, decision: Decision) -> None:
        count_decision(self._ctx, intent, decision)

    async def read(self, intent: Intent) -> Mapping[str, Any]:
        namespace = intent.metadata.namespace or ""
        return await self._ctx.require_writer().read(INTENTS.gvp, namespace, intent.metadata.name)

    async def exists(self, intent: Intent) -> bool:
        return not await _gone(self._ctx, intent)

    async def fileops(self, intent: Intent, plan: IntentPlan) -> Mapping[str, Any] | None:
        return await carry_out_fileops(self._ctx, intent, plan)

    async def forge(
        self, intent: Intent, work: ForgeWork, run: Run | None
    ) -> Mapping[str, Any] | None:
        done = await forge_step(self._ctx, intent, work, run)
        if done is None:
            return None
        await post_notices(self._ctx, intent, done.notices)
        return done.stored

    async def remediate(self, intent: Intent, work: RemediationWork) -> Mapping[str, Any] | None:
        return await remediate(self._ctx, intent, work)

    async def fly(self, intent: Intent, work: FlyWork) -> Mapping[str, Any] | None:
        return await fly_step(self._ctx, intent, work)

    async def restore(self, intent: Intent, work: RestoreWork) -> Mapping[str, Any] | None:
        return await restore(self._ctx, intent, work)


async def apply_plan(
    ctx: OperatorContext, intent: Intent, plan: IntentPlan, created_runs: CreatedRuns
) -> bool:
    """Hand a pass's plan to the cluster writer. False: the Intent changed since the pass read
    it (nothing written; the next pass decides again on the new version). A Run it creates
    (or finds there) is noted in `created_runs`, for the passes before the Run index shows it."""
    writer = ctx.require_writer()
    now = ctx.clock.monotonic()
    namespace = intent.metadata.namespace or ""
    name = intent.metadata.name
    status_written = False
    if plan.sprite_patch is not None:
        # Before the status: an Intent never says Succeeded for a change not made. A 409 (the
        # Sprite changed since the pass read it) is decided again on the newer one.
        try:
            await writer.patch(
                SPRITES.gvp, namespace, plan.sprite_patch.sprite, plan.sprite_patch.patch
            )
        except KubeApiError as exc:
            raise kopf.TemporaryError(f"cannot change the Sprite: {exc}", delay=2) from exc
    if plan.phase != (intent.status.phase or "Proposed"):
        # A phase change (above all into Approved, after which the spec is frozen) was
        # decided on this spec: write it only if the spec is still that one, so an edit made
        # meanwhile (after the last approval, say) is decided again. And write it before
        # creating anything from it.
        written = await writer.replace_status_if(
            INTENTS.gvp,
            namespace,
            name,
            plan.status.to_wire(),
            generation=intent.metadata.generation,
        )
        if written is None:
            log.info("intent %s was edited while deciding; deciding again", name)
            return False
        status_written = True
    elif plan.create and await _gone(ctx, intent):
        # No Intent write goes before these creates (its Run deleted, say, and created again):
        # a deleted Intent's loop, which no watch event stopped, must not create it again.
        raise IntentGone(f"Intent {namespace}/{name} is gone; nothing is created for it")
    for manifest in plan.create:
        resource = resource_of_kind(manifest["kind"]).gvp
        if manifest["kind"] == "Run":
            # Born with the finalizer kopf would add: its daemon starts on the first event,
            # and one PATCH (with its watch event and admission pass) less per Run.
            manifest = {
                **manifest,
                "metadata": {**manifest["metadata"], "finalizers": [ctx.settings.finalizer]},
            }
        try:
            if manifest["kind"] != "Run":
                # A Sprite already there is a retried pass's: that is success.
                await writer.create(resource, namespace, manifest)
                continue
            stored, created = await writer.create_or_read(resource, namespace, manifest)
        except KubeApiError as exc:
            raise kopf.TemporaryError(f"cannot create {manifest['kind']}: {exc}", delay=5) from exc
        if stored is not None:
            created_runs.note(parse_run(stored), now)
        if not created:
            # Already there: ours from a retried pass, or someone else's. Write nothing more
            # until a pass decides on it (the reconciler adopts only a Run this Intent owns).
            return status_written
    if plan.run_patch is not None and plan.status.run_ref is not None:
        with contextlib.suppress(KubeApiError):
            await writer.patch(RUNS.gvp, namespace, plan.status.run_ref.name, plan.run_patch)
    if not status_written:
        await writer.patch_status(INTENTS.gvp, namespace, name, plan.status.to_patch())
    STATUS_PATCHES.labels(kind="Intent").inc()
    # Once per Intent and spec generation, as a decision is counted: a pass on a view that does
    # not show its own write yet, with its Run already noted, plans the same exit (soak).
    left = ("left-approval", intent.metadata.uid or name, intent.metadata.generation)
    if plan.left_approval_after is not None and ctx.decisions_counted.first(left):
        AWAITING_APPROVAL_SECONDS.observe(plan.left_approval_after)
    await post_notices(ctx, intent, plan.notices)
    return True


async def _gone(ctx: OperatorContext, intent: Intent) -> bool:
    namespace = intent.metadata.namespace or ""
    return await is_gone(
        ctx.require_writer(), INTENTS.gvp, namespace, intent.metadata.name, intent.metadata.uid
    )


async def post_notices(ctx: OperatorContext, intent: Intent, notices: Iterable[Notice]) -> None:
    regarding = intent_ref(intent)
    for notice in notices:
        await ctx.require_writer().post_event(
            regarding, reason=notice.reason, note=notice.message, warning=notice.warning
        )


async def carry_out_fileops(
    ctx: OperatorContext, intent: Intent, plan: IntentPlan
) -> dict[str, Any] | None:
    """Run a fileops Intent's request in its sprite and record the response; the Intent as
    stored afterwards (None when nothing was recorded: the next pass retries, bounded by
    the attempts the status counts)."""
    work = plan.fileops
    assert work is not None
    if ctx.backend is None:
        log.warning("fileops %s: %s", intent.metadata.name, ctx.backend_problem)
        return None
    try:
        response = await execute_fileops(
            ctx.backend, work.sprite, work.request, now=ctx.clock.now()
        )
    except AdapterError as exc:
        log.warning("fileops %s: the sprite failed us: %s", intent.metadata.name, exc)
        return None
    namespace = intent.metadata.namespace or ""
    recorded = {
        "attempts": work.attempt,
        "startedAt": plan.status.fileops.to_wire()["startedAt"] if plan.status.fileops else None,
        "finishedAt": ctx.clock.now().isoformat().replace("+00:00", "Z"),
        "response": fileops_for_status(response),
    }
    stored = await ctx.require_writer().patch_status(
        INTENTS.gvp, namespace, intent.metadata.name, {"fileops": recorded}
    )
    FILEOPS_DONE.labels(status=response.status).inc()
    return stored


def count_decision(ctx: OperatorContext, intent: Intent, decision: Decision) -> None:
    # A pass may decide again on a view that does not show its own decision yet (kopf's body
    # lags behind our writes, a daemon may be restarted): a decision is counted once per
    # Intent and spec generation in this operator.
    key = (intent.metadata.uid or intent.metadata.name, intent.metadata.generation)
    if not ctx.decisions_counted.first(key):
        return
    INTENT_DECISIONS.labels(
        policy=decision.policy or "default", rule=decision.rule, outcome=decision.outcome
    ).inc()
    born = intent.metadata.creation_timestamp
    if born is not None:
        waited = (ctx.clock.now() - born).total_seconds()
        INTENT_DECISION_SECONDS.labels(outcome=decision.outcome).observe(max(0.0, waited))


__all__ = ["ClusterEffects", "apply_plan", "carry_out_fileops", "count_decision", "post_notices"]
