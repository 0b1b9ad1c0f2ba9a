"""A HealthCheck's incident kept as one GitHub issue (loop 5): opened once per incident,
commented once per further failure, closed when the check passes again. Each write carries
a key made of the check's uid and the incident's start, so a retry (or two operators'
passes) finds the issue and the comments instead of making new ones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lattice_operator.api.v1alpha1.healthcheck import HealthIssue, Incident


@dataclass(frozen=True)
class IssueStep:
    action: Literal["open", "comment", "close", "none"]
    key: str = ""
    title: str = ""
    body: str = ""
    failures: int = 0


def incident_key(uid: str, incident: Incident) -> str:
    return f"health:{uid}:{int(incident.opened_at.timestamp())}"


def incident_step(check: str, uid: str, incident: Incident | None, spec: HealthIssue) -> IssueStep:
    """The next write the incident's issue needs (none when it says all there is)."""
    if incident is None:
        return IssueStep("none")
    key = incident_key(uid, incident)
    issue = incident.issue
    if incident.state == "Open" and issue is None:
        return IssueStep(
            "open",
            key=key,
            title=f"Health check {check} is failing"[:256],
            body=(
                f"The health check `{check}` failed at {incident.opened_at:%Y-%m-%d %H:%M:%S} "
                f"UTC.\n\nLast signal: {incident.last_signal or '(none)'}\n\n"
                "Lattice keeps this issue up to date while the check fails and closes it "
                "when the check passes again."
            ),
            failures=incident.failures,
        )
    if issue is None:
        return IssueStep("none")
    if incident.state == "Open" and incident.failures > issue.reported_failures:
        return IssueStep(
            "comment",
            key=f"{key}:{incident.failures}",
            body=f"Still failing ({incident.failures} checks in a row): {incident.last_signal}",
            failures=incident.failures,
        )
    if incident.state == "Closed" and not issue.closed:
        when = incident.closed_at or incident.updated_at
        return IssueStep(
            "close",
            key=f"{key}:closed",
            body=f"The check `{check}` passed again at {when:%Y-%m-%d %H:%M:%S} UTC.",
            failures=incident.failures,
        )
    return IssueStep("none")


__all__ = ["IssueStep", "incident_key", "incident_step"]
