"""A HealthCheck's pass, purely: fire on schedule (CronJob's semantics: suspend, starting
deadline, concurrency policy, history limits), and keep one incident per failure streak.

Every firing is a `health_detect` Intent named after its scheduled time, so a pass retried
after a crash finds the Intent instead of making another. The incident follows the newest
finished check: a failed one opens the incident (or updates the open one), a passed one
closes it. A remediation is proposed once per incident, through the pipeline like any
Intent (policy and approval decide).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lattice_operator.api.v1alpha1 import Intent, set_condition
from lattice_operator.api.v1alpha1.healthcheck import HealthCheck, HealthCheckStatus, Incident
from lattice_operator.api.v1alpha1.resources import API_VERSION
from lattice_operator.schedule import latest_due, next_after, parse_schedule, zone

CHECK_LABEL = "lattice.dev/health-check"
ROLE_LABEL = "lattice.dev/health-check-role"
SCHEDULED_ANNOTATION = "lattice.dev/scheduled-time"
TERMINAL = frozenset({"Succeeded", "Failed", "Rejected", "Canceled"})


@dataclass
class HealthCheckPlan:
    status: HealthCheckStatus
    create: list[dict[str, Any]] = field(default_factory=list)
    cancel: list[str] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    notices: list[tuple[str, str, bool]] = field(default_factory=list)
    """(reason, message, warning) Events on the HealthCheck."""
    requeue_after: float | None = None


def reconcile_healthcheck(
    check: HealthCheck, intents: list[Intent], now: datetime
) -> HealthCheckPlan:
    status = check.status.model_copy(deep=True)
    plan = HealthCheckPlan(status=status)
    spec = check.spec
    generation = check.metadata.generation
    detects = sorted(
        (i for i in intents if i.metadata.labels.get(ROLE_LABEL) == "detect"),
        key=_scheduled,
    )
    active = [i for i in detects if (i.status.phase or "Proposed") not in TERMINAL]
    finished = [i for i in detects if (i.status.phase or "") in TERMINAL]
    status.active = [i.metadata.name or "" for i in active][:32]

    _incident(check, finished, plan, now)

    schedule = parse_schedule(spec.schedule)
    tz = zone(spec.time_zone)
    since = status.last_schedule_time or check.metadata.creation_timestamp or now
    if spec.suspend:
        status.next_schedule_time = None
    else:
        due, _ = latest_due(schedule, since, now, tz)
        if due is not None:
            status.last_schedule_time = due
            late = (now - due).total_seconds()
            deadline = spec.starting_deadline_seconds
            if deadline is not None and late > deadline:
                status.skipped += 1
                plan.notices.append(
                    ("MissedSchedule", f"the check due at {_iso(due)} was {late:.0f}s late", True)
                )
            elif active and spec.concurrency_policy == "Forbid":
                status.skipped += 1
                plan.notices.append(
                    ("Skipped", f"a check is still running ({active[0].metadata.name})", False)
                )
            else:
                if active and spec.concurrency_policy == "Replace":
                    plan.cancel = [i.metadata.name or "" for i in active]
                plan.create.append(detect_intent(check, due))
        nxt = next_after(schedule, status.last_schedule_time or since, tz)
        if nxt <= now:
            nxt = next_after(schedule, now, tz)
        status.next_schedule_time = nxt
        plan.requeue_after = max(0.0, (nxt - now).total_seconds())

    plan.delete = _beyond_history(check, finished)
    status.conditions = set_condition(
        status.conditions,
        type="Healthy",
        status=_healthy(status),
        reason=_health_reason(status),
        message=_health_message(status),
        observed_generation=generation,
        now=now,
    )
    status.observed_generation = generation
    return plan


def detect_intent(check: HealthCheck, due: datetime) -> dict[str, Any]:
    name = check_intent_name(check.metadata.name or "", due)
    spec = check.spec
    params: dict[str, Any] = {
        "check": check.metadata.name,
        "signal": f"scheduled check at {_iso(due)}",
        "severity": spec.severity,
        "spriteRef": spec.probe.sprite_ref.to_wire(),
        "probe": spec.probe.to_wire(),
    }
    return _intent(
        check,
        name,
        "detect",
        due,
        {
            "kind": "health_detect",
            "summary": f"health check {check.metadata.name} (scheduled {_iso(due)})",
            "params": {"healthDetect": params},
        },
    )


def check_intent_name(check: str, due: datetime) -> str:
    return f"{check[:240]}-{int(due.timestamp())}"


def _incident(
    check: HealthCheck, finished: list[Intent], plan: HealthCheckPlan, now: datetime
) -> None:
    status = plan.status
    results = [i for i in finished if (i.status.phase or "") in ("Succeeded", "Failed")]
    if not results:
        return
    newest = results[-1]
    name = newest.metadata.name or ""
    incident = status.incident
    summary = (newest.status.result.summary if newest.status.result else "") or ""
    if newest.status.phase == "Succeeded":
        status.last_successful_time = _finished_at(newest) or now
        if incident is not None and incident.state == "Open":
            incident.state, incident.closed_at = "Closed", now
            plan.notices.append(
                ("IncidentClosed", f"{check.metadata.name} passes again ({name})", False)
            )
        return
    if incident is not None and incident.state == "Open":
        if incident.last_intent != name:
            incident.failures += 1
            incident.updated_at = now
            incident.last_intent = name
            incident.last_signal = summary[:1024]
            plan.notices.append(
                ("IncidentUpdated", f"still failing ({incident.failures}): {summary}"[:1024], True)
            )
    elif incident is None or incident.last_intent != name:
        incident = Incident(
            state="Open",
            opened_at=now,
            updated_at=now,
            failures=1,
            last_signal=summary[:1024],
            last_intent=name,
        )
        status.incident = incident
        plan.notices.append(
            ("IncidentOpened", f"{check.metadata.name} fails: {summary}"[:1024], True)
        )
    if (
        incident is not None
        and incident.state == "Open"
        and check.spec.remediation is not None
        and incident.remediation_intent is None
    ):
        remedy = check.spec.remediation.to_wire()
        remedy["detectIntentRef"] = {"name": name}
        remedy_name = (
            f"{(check.metadata.name or '')[:230]}-remedy-{int(incident.opened_at.timestamp())}"
        )
        plan.create.append(
            _intent(
                check,
                remedy_name,
                "remediate",
                incident.opened_at,
                {
                    "kind": "health_remediate",
                    "summary": f"remediate {check.metadata.name}: {summary}"[:1024],
                    "params": {"healthRemediate": remedy},
                },
            )
        )
        incident.remediation_intent = remedy_name


def _intent(
    check: HealthCheck, name: str, role: str, when: datetime, spec: dict[str, Any]
) -> dict[str, Any]:
    meta = check.metadata
    return {
        "apiVersion": API_VERSION,
        "kind": "Intent",
        "metadata": {
            "name": name,
            "namespace": meta.namespace,
            "labels": {CHECK_LABEL: (meta.name or "")[:63], ROLE_LABEL: role},
            "annotations": {SCHEDULED_ANNOTATION: _iso(when)},
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": "HealthCheck",
                    "name": meta.name,
                    "uid": meta.uid or "",
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            **spec,
            "proposedBy": {"type": "cron", "name": (meta.name or "")[:253]},
            "subject": {"type": "health_check", "ref": meta.name},
        },
    }


def _beyond_history(check: HealthCheck, finished: list[Intent]) -> list[str]:
    passed = [i for i in finished if i.status.phase == "Succeeded"]
    failed = [i for i in finished if i.status.phase != "Succeeded"]
    out: list[str] = []
    for group, keep in (
        (passed, check.spec.successful_history_limit),
        (failed, check.spec.failed_history_limit),
    ):
        extra = len(group) - keep
        out += [i.metadata.name or "" for i in group[: max(0, extra)]]
    return out


def _scheduled(intent: Intent) -> str:
    return intent.metadata.annotations.get(SCHEDULED_ANNOTATION, "") + (intent.metadata.name or "")


def _finished_at(intent: Intent) -> datetime | None:
    for cond in intent.status.conditions:
        if cond.type == "Succeeded":
            return cond.last_transition_time
    return None


def _healthy(status: HealthCheckStatus) -> Any:
    if status.incident is not None and status.incident.state == "Open":
        return "False"
    return "True" if status.last_successful_time is not None else "Unknown"


def _health_reason(status: HealthCheckStatus) -> str:
    if status.incident is not None and status.incident.state == "Open":
        return "IncidentOpen"
    return "Passing" if status.last_successful_time is not None else "NotCheckedYet"


def _health_message(status: HealthCheckStatus) -> str:
    incident = status.incident
    if incident is not None and incident.state == "Open":
        since = _iso(incident.opened_at)
        return f"failing since {since} ({incident.failures}): {incident.last_signal}"[:1024]
    return ""


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


__all__ = [
    "CHECK_LABEL",
    "ROLE_LABEL",
    "HealthCheckPlan",
    "check_intent_name",
    "detect_intent",
    "reconcile_healthcheck",
]
