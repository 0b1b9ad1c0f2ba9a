"""Intent handlers: a daemon per open Intent drives the pipeline; IntentPolicies are checked."""

from __future__ import annotations

import asyncio
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
from lattice_operator.reconcilers.sprite_claims import RunClaim

log = logging.getLogger(__name__)


def parse_intent(body: Mapping[str, Any]) -> Intent:
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


def _open(body: kopf.Body, **_: Any) -> bool:
    return body.get("status", {}).get("phase") not in TERMINAL


@dataclass(frozen=True)
class _Reads:
    """`reconcilers.intent_loop.IntentReads` over kopf's indexes and this operator."""

    ctx: OperatorContext
    policies: Mapping[str, Iterable[tuple[str, CompiledPolicy]]]
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


@kopf.daemon(*INTENTS.gvp, when=_open, cancellation_backoff=2.0, cancellation_timeout=10.0)
async def intent_daemon(
    body: kopf.Body, memo: kopf.Memo, stopped: kopf.DaemonStopped, **kwargs: Any
) -> None:
    """An open Intent's work loop, woken by its watch events (kopf gives every object its own
    shallow copy of the memo: the wake-ups live in the operator-wide context)."""
    ctx = context_of(memo)
    reads = _Reads(
        ctx,
        policies=kwargs["compiled_policies"],
        runs=kwargs["runs_by_name"],
        sprites=kwargs["sprite_directory"],
        claims=kwargs.get("run_claims"),
    )
    key = (body.metadata.namespace or "", body.metadata.name or "")
    wakeup = ctx.intent_wakeups.setdefault(key, asyncio.Event())
    try:
        # Parsed again only when it changed: most passes are woken by its Run or its Sprite.
        await drive_intent(
            body,
            per_version(parse_intent),
            stopped,
            wakeup,
            reads,
            ClusterEffects(ctx),
            ctx.clock,
            invalid=(kopf.PermanentError,),
        )
    except Exception as exc:
        writer = ctx.require_writer()
        if await deleted_under(writer, exc, INTENTS.gvp, key[0], key[1], body.metadata.uid):
            log.info("Intent %s/%s is gone; its daemon ends", key[0], key[1])
            return
        raise
    finally:
        ctx.intent_wakeups.pop(key, None)


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
