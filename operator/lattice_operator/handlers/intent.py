"""Intent handlers: a task per open Intent drives the pipeline; IntentPolicies are checked."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import kopf
from pydantic import ValidationError

from lattice_operator.api.v1alpha1 import Intent, Run, Sprite, set_condition
from lattice_operator.api.v1alpha1.intentpolicy import IntentPolicy, IntentPolicySpec
from lattice_operator.api.v1alpha1.resources import INTENT_POLICIES, INTENTS, RUNS
from lattice_operator.builders import may_be_an_intents_run
from lattice_operator.forge.context import FORGE_KINDS, forge_grant
from lattice_operator.handlers._context import OperatorContext, context_of
from lattice_operator.handlers._parsed import indexed_run, model_of, per_version
from lattice_operator.handlers._writes import deleted_under
from lattice_operator.handlers.intent_effects import ClusterEffects
from lattice_operator.metrics import INTENT_OLDEST_AWAITING, INTENTS_BY_PHASE
from lattice_operator.policy import CompiledPolicy, PolicyInvalid, compile_policy_off_loop
from lattice_operator.ports import Grants
from lattice_operator.reconcilers.intent import TERMINAL
from lattice_operator.reconcilers.intent_loop import drive_intent
from lattice_operator.reconcilers.intent_policies import IndexedPolicy, PolicySource, compile_stored
from lattice_operator.reconcilers.intent_workers import IntentWorkers, Work, sleep_unless_stopped
from lattice_operator.reconcilers.sprite_claims import RunClaim

log = logging.getLogger(__name__)


def parse_intent(body: Mapping[str, Any]) -> Intent:
    try:
        return model_of(Intent, body)
    except ValidationError as exc:
        raise kopf.PermanentError(f"invalid Intent: {exc}") from exc


# -- indexes: what the pipeline reads, from memory ---------------------------------------------


@kopf.index(*INTENT_POLICIES.gvp)
async def compiled_policies(body: kopf.Body, **_: Any) -> dict[str, IndexedPolicy]:
    """Each IntentPolicy compiled, by namespace, with its resourceVersion (a classification
    lists the policies and compiles a version not here yet: reconcilers.intent_policies); an
    invalid one is held as such, so that it is not compiled again for each Intent."""
    namespace = body.metadata.namespace or ""
    compiled = await compile_stored(namespace, body)
    version = str(body.metadata.get("resourceVersion") or "")
    return {namespace: IndexedPolicy(body.metadata.name or "", version, compiled)}


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


def _open(raw: Mapping[str, Any]) -> bool:
    return (raw.get("status") or {}).get("phase") not in TERMINAL


RETRY_AFTER = 60.0
"""Seconds before a pass that failed is tried again (kopf's default for a failed daemon),
unless it asked for another delay (kopf.TemporaryError)."""


@dataclass(frozen=True)
class _Reads:
    """`reconcilers.intent_loop.IntentReads` over kopf's indexes and this operator."""

    ctx: OperatorContext
    policies: PolicySource
    runs: Mapping[tuple[str, str], Iterable[Run]]
    sprites: Mapping[tuple[str, str], Iterable[Sprite]]
    claims: Mapping[tuple[str, str], Iterable[RunClaim]] | None

    @property
    def default_policy(self) -> CompiledPolicy | None:
        return self.ctx.default_policy

    @property
    def forge_ready(self) -> bool:
        return self.ctx.forge is not None

    @property
    def fly_ready(self) -> bool:
        return self.ctx.fly is not None


def reads_of(ctx: OperatorContext, indexes: Mapping[str, Any]) -> _Reads:
    """What a pass reads, over kopf's indexes (the same objects for the operator's life)."""
    return _Reads(
        ctx,
        policies=PolicySource(indexes["compiled_policies"], ctx.require_writer),
        runs=indexes["runs_by_name"],
        sprites=indexes["sprite_directory"],
        claims=indexes.get("run_claims"),
    )


@kopf.on.event(*INTENTS.gvp)
async def intent_event(event: kopf.RawEvent, memo: kopf.Memo, **kwargs: Any) -> None:
    """Each watch event of an Intent (the first listing's included) starts its task if it is
    open and has none, and a deletion ends it: the operator's own tasks, not a kopf daemon,
    whose finalizer cost every Intent two writes (reconcilers.intent_workers). Registered
    with the reconciling operator only: tasks run on the leader."""
    ctx = context_of(memo)
    if ctx.intent_workers is None:
        reads = reads_of(ctx, kwargs)
        ctx.intent_workers = IntentWorkers(lambda work: work_on_intent(ctx, reads, work))
    raw: Mapping[str, Any] = event.get("object") or {}
    meta = raw.get("metadata") or {}
    ctx.intent_workers.seen(
        (meta.get("namespace") or "", meta.get("name") or ""),
        raw,
        deleted=event.get("type") == "DELETED",
        open_=_open(raw),
    )


async def work_on_intent(ctx: OperatorContext, reads: _Reads, work: Work) -> None:
    """An open Intent's work loop, passes tried again after a failure, until the Intent is
    finished, gone or refused for good, or the task is told to stop."""
    namespace, name = work.key
    parse = per_version(parse_intent)  # parsed again only when it changed
    while not work.stopped:
        try:
            await drive_intent(
                work.body,
                parse,
                work.stopped,
                work.wakeup,
                reads,
                ClusterEffects(ctx),
                ctx.clock,
                invalid=(kopf.PermanentError,),
            )
            return
        except kopf.PermanentError as exc:
            log.error("Intent %s/%s is not worked on: %s", namespace, name, exc)
            return
        except Exception as exc:
            if await _deleted(ctx, exc, work):
                log.info("Intent %s/%s is gone; its work ends", namespace, name)
                return
            delay = RETRY_AFTER
            if isinstance(exc, kopf.TemporaryError):
                delay = RETRY_AFTER if exc.delay is None else exc.delay
                log.warning("Intent %s/%s: %s; again in %.0f s", namespace, name, exc, delay)
            else:
                log.exception("Intent %s/%s failed; again in %.0f s", namespace, name, delay)
        await sleep_unless_stopped(delay, work)


async def _deleted(ctx: OperatorContext, exc: Exception, work: Work) -> bool:
    try:
        return await deleted_under(
            ctx.require_writer(), exc, INTENTS.gvp, work.key[0], work.key[1], work.uid
        )
    except Exception:  # the read failed too: an error to try again, not a deletion
        return False


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


__all__ = ["RETRY_AFTER", "intent_event", "reads_of", "work_on_intent"]
