"""Intent handlers: a daemon per open Intent drives the pipeline; IntentPolicies are checked."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal, cast

import kopf
from pydantic import ValidationError

from lattice_adapters.kube import KubeApiError
from lattice_operator.api.v1alpha1 import Intent, Run, Sprite, set_condition
from lattice_operator.api.v1alpha1.intentpolicy import IntentPolicy, IntentPolicySpec
from lattice_operator.api.v1alpha1.resources import (
    INTENT_POLICIES,
    INTENTS,
    RUNS,
    SPRITES,
    resource_of_kind,
)
from lattice_operator.builders import may_be_an_intents_run
from lattice_operator.builders import run_name as run_name_of
from lattice_operator.fileops.executor import execute as execute_fileops
from lattice_operator.fileops.executor import for_status as fileops_for_status
from lattice_operator.forge.context import FORGE_KINDS, agent_of, forge_grant
from lattice_operator.handlers._context import OperatorContext, context_of
from lattice_operator.handlers._created_runs import CreatedRuns
from lattice_operator.handlers._parsed import indexed_run, model_of, parse_run, per_version
from lattice_operator.handlers._writes import deleted_under
from lattice_operator.handlers.intent_fly import fly_step
from lattice_operator.handlers.intent_forge import forge_step
from lattice_operator.handlers.intent_remediation import remediate
from lattice_operator.handlers.intent_restore import intent_ref, restore, sprite_holder
from lattice_operator.metrics import (
    AWAITING_APPROVAL_SECONDS,
    FILEOPS_DONE,
    INTENT_DECISION_SECONDS,
    INTENT_DECISIONS,
    INTENT_OLDEST_AWAITING,
    INTENTS_BY_PHASE,
    STATUS_PATCHES,
    reconcile_timer,
)
from lattice_operator.policy import (
    CompiledPolicy,
    Decision,
    PolicyInvalid,
    classify_off_loop,
    compile_policy_off_loop,
)
from lattice_operator.ports import Grants
from lattice_operator.ports.errors import AdapterError
from lattice_operator.reconcilers.approvals import parse_records
from lattice_operator.reconcilers.intent import (
    TERMINAL,
    IntentPlan,
    IntentWorld,
    Notice,
    classification_due,
    fileops_sprite,
    policy_document,
    reconcile_intent,
    remediation_sprite,
)
from lattice_operator.reconcilers.intent_kinds import restore_sprite
from lattice_operator.reconcilers.intent_kinds.environment import environment_sprite
from lattice_operator.reconcilers.sprite_claims import RunClaim

log = logging.getLogger(__name__)


def parse_intent(body: kopf.Body) -> Intent:
    try:
        return model_of(Intent, body)
    except ValidationError as exc:
        raise kopf.PermanentError(f"invalid Intent: {exc}") from exc


# -- indexes: what the pipeline reads, from memory ---------------------------------------------


@kopf.index(*INTENT_POLICIES.gvp)
async def compiled_policies(body: kopf.Body, **_: Any) -> dict[str, tuple[str, CompiledPolicy]]:
    name = body.metadata.name or ""
    try:
        policy = model_of(IntentPolicy, body)
        compiled = await compile_policy_off_loop(name, policy.spec)
    except (ValidationError, PolicyInvalid) as exc:
        log.warning("IntentPolicy %s/%s is not used: %s", body.metadata.namespace, name, exc)
        return {}
    return {body.metadata.namespace or "": (name, compiled)}


@kopf.index(*RUNS.gvp)
async def runs_by_name(body: kopf.Body, **_: Any) -> dict[tuple[str, str], Run]:
    """The Runs the Intent pipeline reads, whole (it reads their status): only those whose
    name an Intent's Run can have, so a Run made by hand costs no model here, finished or not."""
    if not may_be_an_intents_run(body.metadata.name or ""):
        return {}
    run = indexed_run(body)
    return {(run.metadata.namespace or "", run.metadata.name): run}


@kopf.index(*INTENTS.gvp)
async def intent_grants(body: kopf.Body, **_: Any) -> dict[tuple[str, str], tuple[str, Grants]]:
    """What each Intent grants its sprite (and its uid, to post Events on it)."""
    spec = body.get("spec", {})
    credentials = {
        c["name"]: (c["secretKeyRef"]["name"], c["secretKeyRef"]["key"])
        for c in spec.get("credentials", [])
    }
    status = body.get("status", {})
    forge = None
    if spec.get("kind") in FORGE_KINDS:
        with contextlib.suppress(ValidationError):
            forge = forge_grant(model_of(Intent, body))
    grants = Grants(
        intent=body.metadata.name or "",
        allowed_actions=frozenset(spec.get("allowedActions", [])),
        credentials=credentials,
        uid=str(body.metadata.uid or ""),
        phase=str(status.get("phase") or "Proposed"),
        run=(status.get("runRef") or {}).get("name"),
        forge=forge,
    )
    return {
        (body.metadata.namespace or "", body.metadata.name or ""): (str(body.metadata.uid), grants)
    }


@kopf.index(*INTENTS.gvp)
async def intent_phases(
    body: kopf.Body, **_: Any
) -> dict[tuple[str, str], tuple[str, float | None]]:
    """Intents by phase and kind (uid), with since when each in AwaitingApproval waits (Unix
    time), for the alert on the longest wait: one index, one handler call per watch event."""
    status = body.get("status", {})
    phase = str(status.get("phase") or "Proposed")
    since = status.get("awaitingSince")
    waiting = (
        datetime.fromisoformat(str(since).replace("Z", "+00:00")).timestamp()
        if phase == "AwaitingApproval" and since
        else None
    )
    key = (phase, str(body.get("spec", {}).get("kind", "")))
    return {key: (str(body.metadata.uid), waiting)}


@kopf.on.startup()
async def register_intent_metrics(**kwargs: Any) -> None:
    phases: kopf.Index[tuple[str, str], tuple[str, float | None]] = kwargs["intent_phases"]

    def counts() -> dict[tuple[str, ...], int]:
        return {key: len(entries) for key, entries in phases.items()}

    def awaiting() -> list[float]:
        return [
            since
            for (phase, _), entries in phases.items()
            if phase == "AwaitingApproval"
            for _, since in entries
            if since is not None
        ]

    INTENTS_BY_PHASE.bind(counts)
    INTENT_OLDEST_AWAITING.bind(awaiting)


# -- the pipeline ------------------------------------------------------------------------------

# An Intent's daemon sleeps until something it reads changes: the Intent itself, its Run,
# its Sprite. kopf's raw event handlers wake it; a slow timer is only a safety net.
SAFETY_POLL = 10.0
MAX_QUICK_REDECISIONS = 5
"""Conflicts in a row decided again at once; after that, the pass waits for a change."""


def _wakeups(memo: kopf.Memo) -> dict[tuple[str, str], asyncio.Event]:
    # kopf gives every object its own (shallow) copy of the memo: the table lives in the
    # operator-wide context that all the copies share.
    return context_of(memo).intent_wakeups


def _open(body: kopf.Body, **_: Any) -> bool:
    return body.get("status", {}).get("phase") not in TERMINAL


@kopf.daemon(*INTENTS.gvp, when=_open, cancellation_backoff=2.0, cancellation_timeout=10.0)
async def intent_daemon(
    body: kopf.Body, memo: kopf.Memo, stopped: kopf.DaemonStopped, **kwargs: Any
) -> None:
    ctx = context_of(memo)
    policies: kopf.Index[str, tuple[str, CompiledPolicy]] = kwargs["compiled_policies"]
    runs: kopf.Index[tuple[str, str], Run] = kwargs["runs_by_name"]
    sprites: kopf.Index[tuple[str, str], Sprite] = kwargs["sprite_directory"]
    claims: kopf.Index[tuple[str, str], RunClaim] | None = kwargs.get("run_claims")
    key = (body.metadata.namespace or "", body.metadata.name or "")
    wakeup = _wakeups(memo).setdefault(key, asyncio.Event())
    try:
        await _drive_intent(ctx, body, stopped, wakeup, policies, runs, sprites, claims)
    except Exception as exc:
        writer = ctx.require_writer()
        if await deleted_under(writer, exc, INTENTS.gvp, key[0], key[1], body.metadata.uid):
            log.info("Intent %s/%s is gone; its daemon ends", key[0], key[1])
            return
        raise
    finally:
        _wakeups(memo).pop(key, None)


async def _drive_intent(
    ctx: OperatorContext,
    body: kopf.Body,
    stopped: kopf.DaemonStopped,
    wakeup: asyncio.Event,
    policies: kopf.Index[str, tuple[str, CompiledPolicy]],
    runs: kopf.Index[tuple[str, str], Run],
    sprites: kopf.Index[tuple[str, str], Sprite],
    claims: kopf.Index[tuple[str, str], RunClaim] | None = None,
) -> None:
    written: dict[str, Any] | None = None
    # After a conflict, the object as the API server has it now (the watch may lag behind).
    fresh: kopf.Body | None = None
    conflicts = 0
    # Runs this daemon created, as the API server answered, until the Run index shows them:
    # a pass woken by the Intent's own status write (its watch event often comes before the
    # Run's) would otherwise create the Run again, to be refused as already there.
    created = CreatedRuns()
    # Parsed again only when it changed: most passes are woken by its Run or its Sprite.
    parse = per_version(parse_intent)
    while not stopped:
        wakeup.clear()
        source, fresh = fresh or body, None
        # Each pass is one kind="Intent" reconcile in the metrics.
        with reconcile_timer("Intent", blocked=(kopf.PermanentError,)):
            intent = parse(source)
            namespace = intent.metadata.namespace or ""
            status = intent.status
            # Before runRef is set, by the deterministic name: a Run someone else made under
            # that name is seen, and refused.
            run_name = status.run_ref.name if status.run_ref else run_name_of(intent)
            sprite_name = status.sprite_ref.name if status.sprite_ref else None
            if sprite_name is None and intent.spec.kind == "fileops":
                sprite_name = fileops_sprite(intent)
            if sprite_name is None and intent.spec.kind == "health_remediate":
                sprite_name = remediation_sprite(intent)
            if sprite_name is None and intent.spec.kind == "checkpoint_restore":
                sprite_name = restore_sprite(intent)
            if sprite_name is None and intent.spec.kind == "environment_change":
                sprite_name = environment_sprite(intent)
            agent = agent_of(intent)
            if sprite_name is None and agent is not None:
                sprite_name = agent.sprite_ref.name
            indexed = _one(runs.get((namespace, run_name))) if run_name else None
            in_force = [p for _, p in sorted(policies.get(namespace, []), key=lambda x: x[0])]
            decision = (
                await classify_off_loop(policy_document(intent), in_force, ctx.default_policy)
                if classification_due(intent)
                else None
            )
            world = IntentWorld(
                intent=intent,
                policies=in_force,
                default_policy=ctx.default_policy,
                decision=decision,
                approvals=parse_records(dict(source.metadata.annotations)),
                run=created.view(run_name, indexed, ctx.clock.monotonic()) if run_name else None,
                sprite=_one(sprites.get((namespace, sprite_name))) if sprite_name else None,
                now=ctx.clock.now(),
                forge_ready=ctx.forge is not None,
                fly_ready=ctx.fly is not None,
                sprite_holder=sprite_holder(intent, namespace, sprite_name, claims),
            )
            plan = reconcile_intent(world)
            snapshot = plan.status.to_patch()
            if snapshot != written and snapshot != intent.status.to_patch():
                if await _apply(ctx, intent, plan, body, created):
                    written, conflicts = snapshot, 0
                    if plan.decision is not None:
                        _count_decision(ctx, intent, plan.decision)
                    if plan.fileops is not None:
                        # The attempt is recorded: now carry it out, then decide again.
                        fresh = await _carry_out(ctx, intent, plan)
                        continue
                    if plan.forge is not None:
                        done = await forge_step(ctx, intent, plan.forge, world.run)
                        if done is not None:
                            await _post(ctx, intent, done.notices)
                            fresh = kopf.Body(cast(kopf.RawBody, done.stored))
                        continue
                    if plan.remediation is not None:
                        fresh = _as_body(await remediate(ctx, intent, plan.remediation))
                        if fresh is not None:
                            continue
                    if plan.fly is not None:
                        fresh = _as_body(await fly_step(ctx, intent, plan.fly))
                        if fresh is not None:
                            continue
                    if plan.restore is not None:
                        fresh = _as_body(await restore(ctx, intent, plan.restore))
                        if fresh is not None:
                            continue
                elif conflicts < MAX_QUICK_REDECISIONS:
                    # Decided on an outdated spec: decide again at once on the stored one
                    # (the watch may not have delivered it yet).
                    conflicts += 1
                    stored = await ctx.require_writer().read(
                        INTENTS.gvp, namespace, intent.metadata.name
                    )
                    fresh = kopf.Body(cast(kopf.RawBody, stored))
                    continue
            elif plan.create or plan.run_patch:
                await _apply(ctx, intent, plan, body, created)
            elif plan.remediation is not None:
                # Executing was written by an earlier pass, whose remediation was not
                # carried out (no backend then, or a restart): do it now.
                fresh = _as_body(await remediate(ctx, intent, plan.remediation))
                if fresh is not None:
                    continue
            elif plan.restore is not None:
                # Executing was written by an earlier pass, whose restore was not carried
                # out (no backend then, or a restart): do it now.
                fresh = _as_body(await restore(ctx, intent, plan.restore))
                if fresh is not None:
                    continue
        if plan.phase in TERMINAL:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wakeup.wait(), timeout=SAFETY_POLL)


async def _carry_out(ctx: OperatorContext, intent: Intent, plan: IntentPlan) -> kopf.Body | None:
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
    return kopf.Body(cast(kopf.RawBody, stored))


def _count_decision(ctx: OperatorContext, intent: Intent, decision: Decision) -> None:
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


def _as_body(stored: dict[str, Any] | None) -> kopf.Body | None:
    return None if stored is None else kopf.Body(cast(kopf.RawBody, stored))


def _one(entries: Any) -> Any:
    return next(iter(entries)) if entries else None


async def _apply(
    ctx: OperatorContext,
    intent: Intent,
    plan: IntentPlan,
    body: kopf.Body,
    created_runs: CreatedRuns,
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
            created_runs.note(parse_run(kopf.Body(cast(kopf.RawBody, stored))), now)
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
    await _post(ctx, intent, plan.notices)
    return True


async def _post(ctx: OperatorContext, intent: Intent, notices: Iterable[Notice]) -> None:
    regarding = intent_ref(intent)
    for notice in notices:
        await ctx.require_writer().post_event(
            regarding, reason=notice.reason, note=notice.message, warning=notice.warning
        )


# -- IntentPolicy status --------------------------------------------------------------------


@kopf.on.create(*INTENT_POLICIES.gvp)
@kopf.on.update(*INTENT_POLICIES.gvp, field="spec")
@kopf.on.resume(*INTENT_POLICIES.gvp)
async def policy_status(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    ctx = context_of(memo)
    policy = model_of(IntentPolicy, body)
    valid: Literal["True", "False"] = "True"
    reason, message = "Compiled", f"{len(policy.spec.rules)} rule(s) compiled"
    try:
        await compile_policy_off_loop(
            policy.metadata.name, IntentPolicySpec.model_validate(policy.spec.to_wire())
        )
    except PolicyInvalid as exc:
        valid, reason, message = "False", "InvalidRule", str(exc)
    conditions = set_condition(
        policy.status.conditions,
        type="Valid",
        status=valid,
        reason=reason,
        message=message[:1024],
        observed_generation=policy.metadata.generation,
        now=ctx.clock.now(),
    )
    patch.status["conditions"] = [c.to_wire() for c in conditions]
    patch.status["observedGeneration"] = policy.metadata.generation


__all__ = ["intent_daemon"]
