"""Admission webhooks served by the operator: approvals stamped with the real identity,
IntentPolicy rules compiled, a Sprite's run policy applied to Runs made by hand, and
HealthCheck schedules and time zones checked before they are stored. (The checks that need
nothing but the request are ValidatingAdmissionPolicies: `admission_policy`.)"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import kopf
from pydantic import ValidationError

from lattice_adapters.kube import resource_path
from lattice_operator.api.v1alpha1 import Run, Sprite
from lattice_operator.api.v1alpha1.healthcheck import HealthCheckSpec
from lattice_operator.api.v1alpha1.intentpolicy import IntentPolicySpec
from lattice_operator.api.v1alpha1.resources import HEALTH_CHECKS, INTENT_POLICIES, INTENTS, RUNS
from lattice_operator.handlers._context import context_of
from lattice_operator.handlers._registry import SERVING
from lattice_operator.handlers.admission_config import (
    APPROVAL_HANDLER,
    HEALTH_CHECK_HANDLER,
    POLICY_HANDLER,
    RUN_POLICY_HANDLER,
)
from lattice_operator.metrics import (
    ADMISSION_OUTCOMES,
    ADMISSION_REQUESTS,
    ADMISSION_SECONDS,
    APPROVALS,
    admission_request,
)
from lattice_operator.modeling import first_error
from lattice_operator.policy import PolicyInvalid, compile_policy_off_loop
from lattice_operator.reconcilers.approvals import (
    RECORDS,
    REQUEST,
    ApprovalRefused,
    access_review,
    check_records_untouched,
    parse_records,
    parse_request,
    raw_spec_digest,
    record_for,
    records_json,
)
from lattice_operator.reconcilers.grants import run_policy_refusal

Handler = Callable[..., Awaitable[None]]
WEBHOOKS = (APPROVAL_HANDLER, RUN_POLICY_HANDLER, POLICY_HANDLER, HEALTH_CHECK_HANDLER)
for _webhook in WEBHOOKS:  # every series from the start, at 0
    ADMISSION_SECONDS.labels(webhook=_webhook)
    for _outcome in ADMISSION_OUTCOMES:
        ADMISSION_REQUESTS.labels(webhook=_webhook, outcome=_outcome)


def _measured(webhook: str) -> Callable[[Handler], Handler]:
    """Count the handler's requests by outcome (a refusal is kopf.AdmissionError) and time
    them, as `lattice_admission_requests_total` and `lattice_admission_duration_seconds`."""

    def wrap(fn: Handler) -> Handler:
        @functools.wraps(fn)
        async def handler(**kwargs: Any) -> None:
            with admission_request(webhook, refused=(kopf.AdmissionError,)):
                await fn(**kwargs)

        return handler

    return wrap


@kopf.on.mutate(
    *INTENTS.gvp, operations=["CREATE", "UPDATE"], id=APPROVAL_HANDLER, registry=SERVING
)
@_measured(APPROVAL_HANDLER)
async def stamp_approval(
    body: kopf.Body, userinfo: kopf.UserInfo, patch: kopf.Patch, memo: kopf.Memo, **kwargs: Any
) -> None:
    ctx = context_of(memo)
    old: kopf.Body | None = kwargs.get("old")
    annotations = dict(body.metadata.annotations)
    old_annotations = dict(old.metadata.annotations) if old is not None else {}
    try:
        check_records_untouched(old_annotations, annotations)
        request = parse_request(annotations)
        if request is None:
            return
        namespace, name = body.metadata.namespace or "", body.metadata.name or ""
        subject = request.subject(dict(userinfo))
        review = await ctx.require_kube().create(
            resource_path("authorization.k8s.io", "v1", "subjectaccessreviews"),
            access_review(subject, namespace, name),
        )
        if not review.get("status", {}).get("allowed"):
            APPROVALS.labels(outcome="unauthorized").inc()
            via = f" (GitHub user {request.forge_user})" if request.forge_user else ""
            raise ApprovalRefused(
                f"{subject.get('username')}{via} may not approve or reject intents in namespace "
                f"{namespace}: that needs the verb 'approve' on intents.lattice.dev "
                "(for example the ClusterRole lattice-approver)",
                403,
            )
        records = record_for(
            request,
            dict(userinfo),
            parse_records(old_annotations),
            ctx.clock.now(),
            raw_spec_digest(body.get("spec")),
            operator=ctx.identity,
        )
    except ApprovalRefused as exc:
        raise kopf.AdmissionError(str(exc), code=exc.code) from exc
    APPROVALS.labels(outcome=request.decision).inc()
    patch.metadata.annotations[RECORDS] = records_json(records)
    patch.metadata.annotations[REQUEST] = None


@kopf.on.validate(*RUNS.gvp, operations=["CREATE"], id=RUN_POLICY_HANDLER, registry=SERVING)
@_measured(RUN_POLICY_HANDLER)
async def check_run_policy(body: kopf.Body, **kwargs: Any) -> None:
    # Called for Runs none of our Intents controls (matchConditions). A Sprite not known yet is not
    # refused here: the operator checks again before it starts the Run.
    sprite_directory: kopf.Index[tuple[str, str], Sprite] = kwargs["sprite_directory"]
    try:
        run = Run.model_validate(dict(body))
    except ValidationError:
        return  # the schema let it through; the operator reports what the models refuse
    sprite = run.spec.sprite_ref.name
    entries = sprite_directory.get((run.metadata.namespace or "", sprite))
    if not entries:
        return
    # No Intent vouches for a Run sent here: the Runs our Intents control are the operator's
    # own writes, checked by check-run-owner and never matched to this webhook.
    refusal = run_policy_refusal(run, sprite, next(iter(entries)).spec.run_policy, None)
    if refusal is not None:
        raise kopf.AdmissionError(f"spec.spriteRef.name: {refusal}", code=403)


@kopf.on.validate(
    *INTENT_POLICIES.gvp, operations=["CREATE", "UPDATE"], id=POLICY_HANDLER, registry=SERVING
)
@_measured(POLICY_HANDLER)
async def check_policy(body: kopf.Body, **_: Any) -> None:
    try:
        spec = IntentPolicySpec.model_validate(dict(body.get("spec") or {}))
        await compile_policy_off_loop(body.metadata.name or "", spec)
    except PolicyInvalid as exc:
        raise kopf.AdmissionError(f"invalid rules: {exc}", code=422) from exc
    except ValueError as exc:
        raise kopf.AdmissionError(f"invalid policy: {exc}", code=422) from exc


@kopf.on.validate(
    *HEALTH_CHECKS.gvp, operations=["CREATE", "UPDATE"], id=HEALTH_CHECK_HANDLER, registry=SERVING
)
@_measured(HEALTH_CHECK_HANDLER)
async def check_healthcheck(body: kopf.Body, **_: Any) -> None:
    try:
        HealthCheckSpec.model_validate(dict(body.get("spec") or {}))
    except ValidationError as exc:
        raise kopf.AdmissionError(first_error("spec", exc), code=422) from exc
