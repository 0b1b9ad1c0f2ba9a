"""The HealthCheck resource: a probe run on a schedule, in the manner of a CronJob.

Each firing creates a `health_detect` Intent (through policy and approval like any other),
whose Run is the probe. While the probe keeps failing, one incident stays open and is
updated; a passing probe closes it; a remediation, when given, is proposed once per
incident as a `health_remediate` Intent.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, field_validator

from lattice_operator.api.v1alpha1._base import ApiModel, ObjectMeta
from lattice_operator.api.v1alpha1.conditions import CONDITIONS_LIST_SCHEMA, Condition
from lattice_operator.api.v1alpha1.intent import REPO_PATTERN, HealthRemediateParams
from lattice_operator.api.v1alpha1.run import RunTemplate


class HealthIssue(ApiModel):
    """Where an incident is reported on GitHub."""

    repo: str = Field(max_length=256, pattern=REPO_PATTERN)
    """owner/name."""
    labels: list[Annotated[str, StringConstraints(min_length=1, max_length=50)]] = Field(
        default_factory=lambda: ["lattice-health"], min_length=1, max_length=8
    )
    """Labels of the issue; the first one also finds it again."""


class IncidentIssue(ApiModel):
    """The GitHub issue of an incident."""

    number: int = Field(ge=1)
    """The issue's number."""
    url: str = Field(default="", max_length=1024)
    """Its web address."""
    reported_failures: int = Field(default=1, ge=0)
    """Failures the issue has been told about (one comment per further failure)."""
    closed: bool = False
    """Closed after the check passed again."""


class HealthCheckSpec(ApiModel):
    """When and how to check, and what to do while it fails."""

    schedule: str = Field(
        min_length=1,
        max_length=256,
        pattern=r"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)"
        r"|@every [0-9]+[smh]|\S+ +\S+ +\S+ +\S+ +\S+)$",
    )
    """A cron expression (five fields, as CronJob's: `*/5 * * * *`, names and `@hourly`
    too), or `@every <duration>` (`@every 30s`, `@every 5m`; at least 5 s)."""
    time_zone: str | None = Field(default=None, max_length=64)
    """IANA time zone of the cron expression (default UTC)."""
    concurrency_policy: Literal["Allow", "Forbid", "Replace"] = "Forbid"
    """A firing while the previous check still runs: run both, skip this one, or cancel the
    previous one."""
    starting_deadline_seconds: int | None = Field(default=None, ge=1, le=86_400)
    """A firing missed by more than this (the operator was down) is skipped, not run late."""
    suspend: bool = False
    """No firing while true (the open incident stays as it is)."""
    successful_history_limit: int = Field(default=3, ge=0, le=100)
    """Finished check Intents kept that passed."""
    failed_history_limit: int = Field(default=1, ge=0, le=100)
    """Finished check Intents kept that failed."""
    severity: Literal["low", "medium", "high", "critical"] = "medium"
    """How bad a failure is."""
    probe: RunTemplate
    """The check: a command in a Sprite; exit 0 is healthy."""
    remediation: HealthRemediateParams | None = None
    """Proposed once per incident (a `health_remediate` Intent)."""
    issue: HealthIssue | None = None
    """Keep a GitHub issue per incident: opened once, commented while it fails, closed when
    it passes again (needs the operator's GitHub credential)."""

    @field_validator("schedule")
    @classmethod
    def _valid_schedule(cls, value: str) -> str:
        from lattice_operator.schedule import parse_schedule

        parse_schedule(value)  # raises ValueError with the reason
        return value

    @field_validator("time_zone")
    @classmethod
    def _valid_zone(cls, value: str | None) -> str | None:
        from lattice_operator.schedule import zone

        if value is not None:
            zone(value)
        return value


class Incident(ApiModel):
    """The failure a check is in (one at a time)."""

    state: Literal["Open", "Closed"]
    """Open while the check fails; Closed once it passed again."""
    opened_at: datetime
    """The first failing check."""
    updated_at: datetime
    """The last failing check."""
    closed_at: datetime | None = None
    """The check that passed again."""
    failures: int = Field(default=1, ge=1)
    """Failing checks in this incident."""
    last_signal: str = Field(default="", max_length=1024)
    """What the last failing check observed."""
    last_intent: str | None = Field(default=None, max_length=253)
    """The last failing check's Intent."""
    remediation_intent: str | None = Field(default=None, max_length=253)
    """The health_remediate Intent proposed for this incident."""
    issue: IncidentIssue | None = None
    """Its GitHub issue (spec.issue)."""


class HealthCheckStatus(ApiModel):
    """What the schedule and the checks did."""

    observed_generation: int | None = None
    """The .metadata.generation last acted on."""
    conditions: list[Condition] = Field(
        default_factory=list, max_length=8, json_schema_extra=CONDITIONS_LIST_SCHEMA
    )
    """Healthy: True after a passing check, False while an incident is open."""
    last_schedule_time: datetime | None = None
    """The scheduled time of the last firing (run or skipped)."""
    next_schedule_time: datetime | None = None
    """When it fires next (none while suspended)."""
    last_successful_time: datetime | None = None
    """When a check last passed."""
    active: list[str] = Field(default_factory=list, max_length=32)
    """Check Intents still running."""
    skipped: int = Field(default=0, ge=0)
    """Firings skipped (Forbid with a check running, or past the starting deadline)."""
    incident: Incident | None = None
    """The open incident, or the last one closed."""


NAME_LIMIT = 52
"""A check's name is at most this long (as a CronJob's): its Intents are named
`<check>-<unix time>` and carry the name as a label value (at most 63 characters)."""


def name_rule() -> dict[str, str]:
    """The CEL rule (on the whole object) bounding the name."""
    return {
        "rule": f"size(self.metadata.name) <= {NAME_LIMIT}",
        "message": f"metadata.name: a HealthCheck's name must be no more than {NAME_LIMIT} "
        "characters",
    }


class HealthCheck(ApiModel):
    """A health check on a schedule: each firing is a health_detect Intent."""

    api_version: Literal["lattice.dev/v1alpha1"] = "lattice.dev/v1alpha1"
    kind: Literal["HealthCheck"] = "HealthCheck"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: HealthCheckSpec
    status: HealthCheckStatus = Field(default_factory=HealthCheckStatus)
