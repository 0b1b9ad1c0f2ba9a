"""HealthChecks as a pure pass over a moving clock: CronJob's scheduling semantics and one
incident per failure streak."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from lattice_operator.api.v1alpha1 import Intent
from lattice_operator.api.v1alpha1.healthcheck import HealthCheck
from lattice_operator.reconcilers.healthcheck import detect_intent, reconcile_healthcheck

T0 = datetime(2026, 1, 5, 12, 0, 0, tzinfo=UTC)


def check(**spec: Any) -> HealthCheck:
    return HealthCheck.model_validate(
        {
            "metadata": {
                "name": "smoke",
                "namespace": "ns",
                "uid": "hc-uid",
                "generation": 1,
                "creationTimestamp": T0.isoformat(),
            },
            "spec": {
                "schedule": "@every 10s",
                "probe": {"spriteRef": {"name": "box"}, "command": ["sh", "-c", "exit 0"]},
                **spec,
            },
        }
    )


def fired(hc: HealthCheck, at: datetime, phase: str | None = None, summary: str = "") -> Intent:
    doc = detect_intent(hc, at)
    doc["metadata"]["uid"] = f"u-{int(at.timestamp())}"
    if phase is not None:
        doc["status"] = {"phase": phase}
        if phase in ("Succeeded", "Failed"):
            status = "success" if phase == "Succeeded" else "failure"
            doc["status"]["result"] = {"status": status, "summary": summary}
    return Intent.model_validate(doc)


def after(hc: HealthCheck, plan: Any) -> HealthCheck:
    return hc.model_copy(update={"status": plan.status})


def test_it_fires_the_latest_due_time_once_and_says_when_next() -> None:
    hc = check()
    plan = reconcile_healthcheck(hc, [], T0 + timedelta(seconds=25))
    (intent,) = plan.create
    assert intent["metadata"]["name"] == f"smoke-{int((T0 + timedelta(seconds=20)).timestamp())}"
    assert intent["spec"]["kind"] == "health_detect"
    assert intent["spec"]["proposedBy"] == {"type": "cron", "name": "smoke"}
    assert intent["spec"]["params"]["healthDetect"]["probe"]["command"] == ["sh", "-c", "exit 0"]
    assert intent["metadata"]["ownerReferences"][0]["kind"] == "HealthCheck"
    assert plan.status.next_schedule_time == T0 + timedelta(seconds=30)
    assert plan.requeue_after == 5.0
    # The same moment again: nothing new (the firing is recorded).
    again = reconcile_healthcheck(after(hc, plan), [], T0 + timedelta(seconds=26))
    assert again.create == []


def test_suspend_and_the_starting_deadline() -> None:
    suspended = reconcile_healthcheck(check(suspend=True), [], T0 + timedelta(minutes=5))
    assert suspended.create == []
    assert suspended.status.next_schedule_time is None
    late = reconcile_healthcheck(check(startingDeadlineSeconds=3), [], T0 + timedelta(seconds=25))
    assert late.create == []
    assert late.status.skipped == 1
    assert late.notices[0][0] == "MissedSchedule"


def test_concurrency_policies() -> None:
    now = T0 + timedelta(seconds=21)
    running = [fired(check(), T0 + timedelta(seconds=10), "Executing")]
    forbid = reconcile_healthcheck(check(concurrencyPolicy="Forbid"), running, now)
    assert (forbid.create, forbid.status.skipped) == ([], 1)
    assert forbid.status.active == [running[0].metadata.name]
    allow = reconcile_healthcheck(check(concurrencyPolicy="Allow"), running, now)
    assert len(allow.create) == 1
    assert allow.cancel == []
    replace = reconcile_healthcheck(check(concurrencyPolicy="Replace"), running, now)
    assert len(replace.create) == 1
    assert replace.cancel == [running[0].metadata.name]


def test_a_cron_schedule_in_a_time_zone() -> None:
    hc = check(schedule="0 9 * * *", timeZone="Europe/Berlin")
    plan = reconcile_healthcheck(hc, [], T0)
    assert plan.create == []
    assert plan.status.next_schedule_time == datetime(2026, 1, 6, 8, 0, tzinfo=UTC)  # CET


def test_one_incident_per_failure_streak_and_one_remediation() -> None:
    hc = check(
        remediation={
            "remediation": "run_command",
            "run": {"spriteRef": {"name": "box"}, "command": ["true"]},
        }
    )
    first = fired(hc, T0 + timedelta(seconds=10), "Failed", "exit 1: refused")
    now = T0 + timedelta(seconds=15)
    plan = reconcile_healthcheck(hc, [first], now)
    incident = plan.status.incident
    assert incident is not None
    assert (incident.state, incident.failures, incident.last_signal) == (
        "Open",
        1,
        "exit 1: refused",
    )
    remedies = [m for m in plan.create if m["spec"]["kind"] == "health_remediate"]
    assert len(remedies) == 1
    assert remedies[0]["spec"]["params"]["healthRemediate"]["detectIntentRef"] == {
        "name": first.metadata.name
    }
    healthy = next(c for c in plan.status.conditions if c.type == "Healthy")
    assert (healthy.status, healthy.reason) == ("False", "IncidentOpen")
    hc = after(hc, plan)
    # The same failure seen again changes nothing; a second failure updates, no new remedy.
    assert reconcile_healthcheck(hc, [first], now).status.incident == incident
    second = fired(hc, T0 + timedelta(seconds=20), "Failed", "exit 1: still refused")
    plan = reconcile_healthcheck(hc, [first, second], T0 + timedelta(seconds=25))
    assert plan.status.incident is not None
    assert plan.status.incident.failures == 2
    assert plan.status.incident.opened_at == incident.opened_at
    assert [m for m in plan.create if m["spec"]["kind"] == "health_remediate"] == []
    hc = after(hc, plan)
    passed = fired(hc, T0 + timedelta(seconds=30), "Succeeded")
    plan = reconcile_healthcheck(hc, [first, second, passed], T0 + timedelta(seconds=35))
    assert plan.status.incident is not None
    assert plan.status.incident.state == "Closed"
    assert any(n[0] == "IncidentClosed" for n in plan.notices)
    healthy = next(c for c in plan.status.conditions if c.type == "Healthy")
    assert healthy.status == "True"


def test_history_limits_delete_the_oldest() -> None:
    hc = check(successfulHistoryLimit=2, failedHistoryLimit=1)
    done = [fired(hc, T0 + timedelta(seconds=10 * i), "Succeeded") for i in range(1, 5)]
    bad = [fired(hc, T0 + timedelta(seconds=100 + 10 * i), "Failed") for i in range(1, 3)]
    plan = reconcile_healthcheck(hc, done + bad, T0 + timedelta(seconds=125))
    assert plan.delete == [done[0].metadata.name, done[1].metadata.name, bad[0].metadata.name]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("schedule", "@every 1s", "at least 5s"),
        ("schedule", "61 * * * *", "not a cron expression"),
        ("timeZone", "Mars/Olympus", "unknown time zone"),
    ],
)
def test_bad_schedules_are_refused(field: str, value: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        check(**{field: value})
