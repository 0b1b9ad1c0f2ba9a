"""HealthChecks end to end: a schedule fires health_detect Intents through the pipeline,
a failing probe opens one incident (updated, never duplicated) with one remediation
proposed, a passing probe closes it; Forbid skips while a check runs; suspend stops it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.support.admission_cases import build
from tests.support.cluster import wait_for
from tests.support.stack import Stack

POLICY = {
    "apiVersion": "lattice.dev/v1alpha1",
    "kind": "IntentPolicy",
    "metadata": {"name": "health"},
    "spec": {
        "rules": [
            {
                "name": "checks-run",
                "match": "intent.spec.kind in ['health_detect', 'health_remediate']",
                "risk": "safe",
                "outcome": "allow",
            }
        ]
    },
}


def health_check(name: str, command: list[str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "HealthCheck",
        "metadata": {"name": name},
        "spec": {
            "schedule": "@every 5s",
            "probe": {"spriteRef": {"name": "box"}, "command": command},
            **spec,
        },
    }


REMEDY = {"remediation": "run_command", "run": {"spriteRef": {"name": "box"}, "command": ["true"]}}
CHECKS = {
    "smoke": health_check("smoke", ["sh", "-c", "echo refused; exit 1"], remediation=REMEDY),
    "slow": health_check("slow", ["sleep", "14"], concurrencyPolicy="Forbid"),
}


@pytest.fixture(scope="module")
def checks(stack: Stack) -> Iterator[dict[str, str]]:
    """Each scheduled check in a namespace of its own (name: namespace), both started before
    the module's first test: they fire every 5 s at most (the shortest schedule), so what one
    test waits for (failures, a skip, a quiet suspended stretch) accumulates beside the other."""
    namespaces = {name: stack.cluster.create_namespace(f"health-{name}") for name in CHECKS}
    try:
        for namespace in namespaces.values():
            stack.create(namespace, POLICY)
            stack.create(
                namespace, build("sprite.yaml", "box", {"spec.networkPolicy": {"rules": []}})
            )
        for name, namespace in namespaces.items():
            stack.wait_sprite_ready(namespace, "box")
            stack.create(namespace, CHECKS[name])
        yield namespaces
    finally:
        for namespace in namespaces.values():
            stack.cluster.delete_namespace(namespace)


def intents(stack: Stack, namespace: str, check: str, role: str) -> list[dict[str, Any]]:
    listing = stack.cluster.custom.list_namespaced_custom_object(
        "lattice.dev",
        "v1alpha1",
        namespace,
        "intents",
        label_selector=f"lattice.dev/health-check={check},lattice.dev/health-check-role={role}",
    )
    items: list[dict[str, Any]] = listing["items"]
    return items


def test_forbid_skips_while_a_check_runs_and_suspend_stops_it(
    stack: Stack, checks: dict[str, str]
) -> None:
    namespace = checks["slow"]

    def skipped() -> dict[str, Any] | None:
        hc = stack.get(namespace, "healthchecks", "slow")
        return hc if (hc.get("status") or {}).get("skipped", 0) >= 1 else None

    hc = wait_for(skipped, timeout=60, what="a skipped firing")
    assert len(hc["status"]["active"]) == 1
    stack.cluster.kubectl(
        "patch",
        "healthcheck",
        "slow",
        "-n",
        namespace,
        "--type",
        "merge",
        "-p",
        '{"spec":{"suspend":true}}',
    )
    wait_for(
        lambda: (
            stack.get(namespace, "healthchecks", "slow")["status"].get("nextScheduleTime") is None
            or None
        ),
        timeout=30,
        what="suspended",
    )
    count = len(intents(stack, namespace, "slow", "detect"))
    time.sleep(11)
    assert len(intents(stack, namespace, "slow", "detect")) == count


def test_failing_then_passing_opens_one_incident_and_closes_it(
    stack: Stack, checks: dict[str, str]
) -> None:
    namespace = checks["smoke"]

    def failures(at_least: int) -> dict[str, Any] | None:
        hc = stack.get(namespace, "healthchecks", "smoke")
        incident = (hc.get("status") or {}).get("incident") or {}
        return hc if incident.get("failures", 0) >= at_least else None

    hc = wait_for(lambda: failures(2), timeout=90, what="two failing checks")
    incident = hc["status"]["incident"]
    assert incident["state"] == "Open"
    healthy = next(c for c in hc["status"]["conditions"] if c["type"] == "Healthy")
    assert (healthy["status"], healthy["reason"]) == ("False", "IncidentOpen")
    remedies = intents(stack, namespace, "smoke", "remediate")
    assert len(remedies) == 1  # one per incident, however many failures
    assert incident["remediationIntent"] == remedies[0]["metadata"]["name"]
    stack.wait_phase(namespace, "intents", remedies[0]["metadata"]["name"], {"Succeeded"})
    detects = intents(stack, namespace, "smoke", "detect")
    assert all(i["spec"]["proposedBy"] == {"type": "cron", "name": "smoke"} for i in detects)
    assert all(
        i["status"].get("classification", {}).get("rule") for i in detects if i.get("status")
    )

    stack.cluster.kubectl(
        "patch",
        "healthcheck",
        "smoke",
        "-n",
        namespace,
        "--type",
        "merge",
        "-p",
        '{"spec":{"probe":{"command":["true"]}}}',
    )

    def closed() -> dict[str, Any] | None:
        hc = stack.get(namespace, "healthchecks", "smoke")
        incident = (hc.get("status") or {}).get("incident") or {}
        return hc if incident.get("state") == "Closed" else None

    hc = wait_for(closed, timeout=90, what="the incident closed")
    assert hc["status"]["incident"]["openedAt"] == incident["openedAt"]
    assert len(intents(stack, namespace, "smoke", "remediate")) == 1
    # History limits hold (3 passed, 1 failed by default) while it keeps firing: once a
    # firing after the close has finished.
    seen = {i["metadata"]["name"] for i in intents(stack, namespace, "smoke", "detect")}

    def finished_after_close() -> bool:
        return any(
            i["metadata"]["name"] not in seen
            and (i.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            for i in intents(stack, namespace, "smoke", "detect")
        )

    wait_for(finished_after_close, timeout=60, what="a check after the close to finish")
    detects = intents(stack, namespace, "smoke", "detect")
    finished = [
        i for i in detects if (i.get("status") or {}).get("phase") in ("Succeeded", "Failed")
    ]
    assert len(finished) <= 4 + 1, [i["metadata"]["name"] for i in finished]


@pytest.mark.parametrize(
    ("changes", "field", "reason"),
    [
        ({"schedule": "61 * * * *"}, "spec.schedule", "not a cron expression"),
        ({"schedule": "@every 2s"}, "spec.schedule", "@every must be at least 5s"),
        ({"timeZone": "Mars/Olympus"}, "spec.timeZone", "unknown time zone"),
    ],
)
def test_a_schedule_or_zone_the_operator_cannot_parse_is_refused_at_admission(
    stack: Stack, namespace: str, changes: dict[str, str], field: str, reason: str
) -> None:
    body = health_check("bad", ["true"], **changes)
    with pytest.raises(ApiException) as info:
        stack.cluster.custom.create_namespaced_custom_object(
            "lattice.dev", "v1alpha1", namespace, "healthchecks", body
        )
    assert info.value.status == 422, info.value.body
    assert f"{field}: {reason}" in str(info.value.body), info.value.body
