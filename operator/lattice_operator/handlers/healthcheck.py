"""kopf wiring of HealthChecks: one daemon per check sleeps until its next firing (or a
change to one of its Intents) and applies the pure pass."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import kopf
from pydantic import ValidationError

from lattice_adapters.kube import KubeApiError
from lattice_operator.api.v1alpha1 import Intent, set_condition
from lattice_operator.api.v1alpha1.healthcheck import HealthCheck
from lattice_operator.api.v1alpha1.resources import HEALTH_CHECKS, INTENTS
from lattice_operator.handlers._context import OperatorContext, context_of
from lattice_operator.handlers._parsed import object_ref
from lattice_operator.metrics import reconcile_timer
from lattice_operator.modeling import first_error
from lattice_operator.reconcilers.healthcheck import (
    CHECK_LABEL,
    HealthCheckPlan,
    reconcile_healthcheck,
)

log = logging.getLogger(__name__)
IDLE_LIMIT = 60.0
"""Looked at at least this often, whatever the schedule (a clock jump, a missed wake-up)."""


def _wakeups(memo: kopf.Memo) -> dict[tuple[str, str], asyncio.Event]:
    table = getattr(memo, "healthcheck_wakeups", None)
    if table is None:
        table = {}
        memo.healthcheck_wakeups = table
    return table


@kopf.index(*INTENTS.gvp, labels={CHECK_LABEL: kopf.PRESENT})
async def intents_by_check(body: kopf.Body, memo: kopf.Memo, **_: Any) -> dict[Any, Any]:
    namespace = body.metadata.namespace or ""
    check = body.metadata.labels.get(CHECK_LABEL, "")
    wake = _wakeups(memo).get((namespace, check))
    if wake is not None:
        wake.set()
    try:
        return {(namespace, check): Intent.model_validate(dict(body))}
    except ValidationError:
        return {}


@kopf.daemon(*HEALTH_CHECKS.gvp, cancellation_timeout=10.0)
async def healthcheck_daemon(
    body: kopf.Body, memo: kopf.Memo, stopped: kopf.DaemonStopped, **kwargs: Any
) -> None:
    ctx = context_of(memo)
    index: kopf.Index[tuple[str, str], Intent] = kwargs["intents_by_check"]
    key = (body.metadata.namespace or "", body.metadata.name or "")
    wakeup = _wakeups(memo).setdefault(key, asyncio.Event())
    written: dict[str, Any] | None = None
    try:
        while not stopped:
            wakeup.clear()
            delay = IDLE_LIMIT
            with reconcile_timer("HealthCheck", blocked=(kopf.PermanentError,)):
                try:
                    check = HealthCheck.model_validate(dict(body))
                except ValidationError as exc:
                    await _invalid(ctx, body, exc)
                    check = None
                if check is not None:
                    intents = list(index.get(key, []))
                    plan = reconcile_healthcheck(check, intents, ctx.clock.now())
                    await _apply(ctx, check, plan, body)
                    snapshot = plan.status.to_patch()
                    if snapshot != written:
                        await ctx.require_writer().patch_status(
                            HEALTH_CHECKS.gvp, key[0], key[1], snapshot
                        )
                        written = snapshot
                    if plan.requeue_after is not None:
                        delay = min(delay, plan.requeue_after + 0.05)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wakeup.wait(), timeout=delay)
    finally:
        _wakeups(memo).pop(key, None)


async def _apply(
    ctx: OperatorContext, check: HealthCheck, plan: HealthCheckPlan, body: kopf.Body
) -> None:
    writer = ctx.require_writer()
    namespace = check.metadata.namespace or ""
    for name in plan.cancel:
        with contextlib.suppress(KubeApiError):
            await writer.patch(INTENTS.gvp, namespace, name, {"spec": {"cancel": True}})
    for manifest in plan.create:
        try:
            await writer.create(INTENTS.gvp, namespace, manifest)
        except KubeApiError as exc:
            raise kopf.TemporaryError(f"cannot create Intent: {exc}", delay=5) from exc
    for name in plan.delete:
        await writer.delete(INTENTS.gvp, namespace, name)
    for reason, message, warning in plan.notices:
        await ctx.require_writer().post_event(
            object_ref(body), reason=reason, note=message, warning=warning
        )


async def _invalid(ctx: OperatorContext, body: kopf.Body, exc: ValidationError) -> None:
    """A spec the CRD let through but the model refuses (an out-of-range cron field, an
    unknown time zone): said in the status, with the field."""
    message = first_error("", exc)
    conditions = set_condition(
        [],
        type="Healthy",
        status="Unknown",
        reason="InvalidSpec",
        message=message[:1024],
        observed_generation=body.metadata.get("generation"),
        now=ctx.clock.now(),
    )
    wire = [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in conditions]
    await ctx.require_writer().patch_status(
        HEALTH_CHECKS.gvp,
        body.metadata.namespace or "",
        body.metadata.name or "",
        {"conditions": wire},
    )
    await ctx.require_writer().post_event(
        object_ref(body), reason="InvalidSpec", note=message[:1024], warning=True
    )
