"""The event part of a Run's status: its schema (`RunEventsStatus` and its parts).

An `ApiModel` with a structural schema: the Run CRD embeds it, so its shape is the
CRD's. Every list is capped (a ring, with a total count beside it) and every string
clipped, so the status is bounded whatever the stream; `budget` bounds its bytes,
`reducer` fills it from committed events.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from lattice_operator.modeling import PRESERVE_UNKNOWN, ApiModel
from lattice_operator.protocol.models import ActionName, AdjustmentType, EventType
from lattice_operator.protocol.violations import Violation

MAX_PHASES = 32
MAX_ARTIFACTS = 32
MAX_ACTION_REQUESTS = 32
MAX_ERRORS = 10
MAX_PROPOSALS = 10
MAX_RECENT = 20
MAX_VIOLATIONS = 20
MAX_MAP_BYTES = 1024
"""Free-form maps (error details, proposal details) larger than this are left out."""
MAX_PARAMETERS_BYTES = 2048
"""Action parameters larger than this are left out (the event stays in the outbox)."""

NAME_CHARS = 64
MESSAGE_CHARS = 256
SUMMARY_CHARS = 160

_Name = Annotated[str, StringConstraints(max_length=NAME_CHARS)]
_Message = Annotated[str, StringConstraints(max_length=MESSAGE_CHARS)]

RunEventsState = Literal["Active", "Waiting", "Completed"]
PhaseState = Literal["Running", "Succeeded", "Failed"]
RequestState = Literal["Pending", "Answered", "Refused"]


class PhaseStatus(ApiModel):
    """One phase the sprite announced."""

    name: str = Field(max_length=NAME_CHARS)
    """The phase name."""
    state: PhaseState
    """Running until PHASE_FINISHED; then Succeeded or Failed."""
    success: bool | None = None
    """PHASE_FINISHED's success (None while running)."""
    started_at: datetime | None = None
    """Timestamp of the last PHASE_STARTED."""
    finished_at: datetime | None = None
    """Timestamp of PHASE_FINISHED."""
    starts: int = Field(default=1, ge=0)
    """How many times the phase was started."""
    session: int = Field(default=1, ge=1)
    """The session of the last change."""


class ProgressStatus(ApiModel):
    """The last INFO of kind progress."""

    percent: float | None = Field(default=None, ge=0, le=100)
    """metadata.percent of the last progress INFO that carried one (0-100)."""
    message: str = Field(default="", max_length=MESSAGE_CHARS)
    """Its message."""
    phase: str | None = Field(default=None, max_length=NAME_CHARS)
    """metadata.phase, when given."""
    updated_at: datetime
    """The event's timestamp."""
    line: int = Field(ge=0)
    """The event's outbox line."""


class ArtifactStatus(ApiModel):
    """A declared work product."""

    line: int = Field(ge=0)
    """The event's outbox line."""
    session: int = Field(ge=1)
    """The session that declared it."""
    kind: str = Field(max_length=NAME_CHARS)
    """branch, commit, file, pr_url, issue_url, ..."""
    ref: str | None = Field(default=None, max_length=MESSAGE_CHARS)
    """Branch, SHA, path or PR number."""
    url: str | None = Field(default=None, max_length=1024)
    """URL, if any."""
    at: datetime
    """The event's timestamp."""


class ActionRequestStatus(ApiModel):
    """An ACTION_REQUEST and what became of it."""

    request_id: str = Field(max_length=32)
    """`req-<line>`: stable, derived from the outbox position."""
    line: int = Field(ge=0)
    """The event's outbox line."""
    offset: int | None = Field(default=None, ge=0)
    """Byte offset of the event in the session's outbox (to re-read omitted parameters)."""
    digest: str = Field(max_length=80)
    """Digest of the event's line."""
    session: int = Field(ge=1)
    """The session that asked."""
    action: ActionName
    """What is asked."""
    blocking: bool
    """Whether the sprite waits for the result."""
    state: RequestState = "Pending"
    """Pending until the operator answers or refuses it."""
    parameters: dict[str, Any] | None = Field(default=None, json_schema_extra=PRESERVE_UNKNOWN)
    """The parameters, unless larger than 2 KiB."""
    parameters_omitted: bool = False
    """The parameters were too large to keep here; read the outbox line."""
    requested_at: datetime
    """The event's timestamp."""
    resolved_at: datetime | None = None
    """When the operator answered or refused it."""
    message: str | None = Field(default=None, max_length=MESSAGE_CHARS)
    """The operator's note on the outcome."""


class WaitingStatus(ApiModel):
    """The WAITING the Run is paused on."""

    line: int = Field(ge=0)
    """The event's outbox line."""
    session: int = Field(ge=1)
    """The session that paused."""
    reason: str = Field(max_length=512)
    """Why the sprite waits."""
    checkpoint_id: str = Field(max_length=256)
    """The checkpoint to restore on resume."""
    expected_inputs: dict[str, _Name] = Field(default_factory=dict, max_length=64)
    """Name → type of each input the resume must carry."""
    request_id: str | None = Field(default=None, max_length=32)
    """The blocking action request this WAITING follows, if any."""
    since: datetime
    """The event's timestamp."""


class CompletionStatus(ApiModel):
    """The COMPLETED event."""

    status: Literal["success", "failure"]
    """How the sprite says it ended."""
    summary: str | None = Field(default=None, max_length=1024)
    """Its summary."""
    at: datetime
    """The event's timestamp."""
    line: int = Field(ge=0)
    """The event's outbox line."""


class ErrorStatus(ApiModel):
    """An ERROR event."""

    line: int = Field(ge=0)
    """The event's outbox line."""
    session: int = Field(ge=1)
    """The session that failed."""
    message: str = Field(max_length=512)
    """What went wrong."""
    details: dict[str, Any] | None = Field(default=None, json_schema_extra=PRESERVE_UNKNOWN)
    """Structured details, unless larger than 1 KiB."""
    at: datetime
    """The event's timestamp."""


class ProposalStatus(ApiModel):
    """An ENVIRONMENT_PROPOSAL, as proposed (never applied by the sprite)."""

    line: int = Field(ge=0)
    """The event's outbox line."""
    session: int = Field(ge=1)
    """The session that proposed it."""
    adjustment: AdjustmentType
    """suggested_adjustment.type."""
    scope: Literal["repo_specific", "global_candidate"]
    """Where the fix would apply."""
    confidence: float = Field(ge=0, le=1)
    """The sprite's confidence."""
    details: dict[str, Any] | None = Field(default=None, json_schema_extra=PRESERVE_UNKNOWN)
    """suggested_adjustment.details, unless larger than 1 KiB."""
    observed_failure: dict[str, Any] | None = Field(
        default=None, json_schema_extra=PRESERVE_UNKNOWN
    )
    """What failed, unless larger than 1 KiB."""
    evidence: list[_Message] = Field(default_factory=list, max_length=8)
    """The first pieces of evidence (clipped)."""
    at: datetime
    """The event's timestamp."""


class EventCounts(ApiModel):
    """Committed events per type."""

    info: int = 0
    phase_started: int = 0
    phase_finished: int = 0
    action_request: int = 0
    artifact: int = 0
    waiting: int = 0
    completed: int = 0
    error: int = 0
    environment_proposal: int = 0


class RecentEvent(ApiModel):
    """One of the last events, summarised."""

    line: int = Field(ge=0)
    """The event's outbox line."""
    event_type: EventType
    """Its type."""
    at: datetime
    """Its timestamp."""
    summary: str = Field(default="", max_length=SUMMARY_CHARS)
    """A one-line summary."""


class RunEventsStatus(ApiModel):
    """What the sprite's events say about the Run: bounded whatever the stream length."""

    state: RunEventsState = "Active"
    """Active; Waiting after WAITING (until resumed); Completed after COMPLETED."""
    session: int = Field(default=1, ge=1)
    """The current exec session (1 + number of resumes)."""
    resumes: int = Field(default=0, ge=0)
    """How many times the Run was resumed."""
    event_count: int = Field(default=0, ge=0)
    """Committed events."""
    first_event_at: datetime | None = None
    """Timestamp of the first committed event."""
    last_event_at: datetime | None = None
    """Timestamp of the last committed event."""
    current_phase: str | None = Field(default=None, max_length=NAME_CHARS)
    """The most recently started phase that has not finished."""
    phases: list[PhaseStatus] = Field(default_factory=list, max_length=MAX_PHASES)
    """Phases, least recently started first."""
    phases_dropped: int = Field(default=0, ge=0)
    """Phases no longer listed (over the cap)."""
    progress: ProgressStatus | None = None
    """The last progress report."""
    artifacts: list[ArtifactStatus] = Field(default_factory=list, max_length=MAX_ARTIFACTS)
    """The last artifacts, oldest first."""
    artifact_count: int = Field(default=0, ge=0)
    """All artifacts declared."""
    action_requests: list[ActionRequestStatus] = Field(
        default_factory=list, max_length=MAX_ACTION_REQUESTS
    )
    """Action requests, oldest first (resolved ones are dropped first past the cap)."""
    action_request_count: int = Field(default=0, ge=0)
    """All action requests made."""
    waiting: WaitingStatus | None = None
    """The WAITING the Run is paused on (cleared on resume)."""
    completion: CompletionStatus | None = None
    """The COMPLETED event, once seen."""
    errors: list[ErrorStatus] = Field(default_factory=list, max_length=MAX_ERRORS)
    """The last ERROR events."""
    error_count: int = Field(default=0, ge=0)
    """All ERROR events."""
    proposals: list[ProposalStatus] = Field(default_factory=list, max_length=MAX_PROPOSALS)
    """The last environment proposals."""
    proposal_count: int = Field(default=0, ge=0)
    """All environment proposals."""
    counts: EventCounts = Field(default_factory=EventCounts)
    """Committed events per type."""
    recent: list[RecentEvent] = Field(default_factory=list, max_length=MAX_RECENT)
    """The last events, oldest first."""
    violations: list[Violation] = Field(default_factory=list, max_length=MAX_VIOLATIONS)
    """The last protocol violations, oldest first."""
    violation_count: int = Field(default=0, ge=0)
    """All protocol violations."""
    violation_counts: dict[str, int] = Field(default_factory=dict, max_length=32)
    """Protocol violations per category."""
    trimmed: bool = False
    """Some lists were shortened further to keep the status under its byte budget."""

    def pending_action_requests(self) -> list[ActionRequestStatus]:
        """Requests the operator has not answered or refused yet."""
        return [r for r in self.action_requests if r.state == "Pending"]


__all__ = [
    "MAX_ACTION_REQUESTS",
    "MAX_ARTIFACTS",
    "MAX_ERRORS",
    "MAX_MAP_BYTES",
    "MAX_PARAMETERS_BYTES",
    "MAX_PHASES",
    "MAX_PROPOSALS",
    "MAX_RECENT",
    "MAX_VIOLATIONS",
    "MESSAGE_CHARS",
    "NAME_CHARS",
    "SUMMARY_CHARS",
    "ActionRequestStatus",
    "ArtifactStatus",
    "CompletionStatus",
    "ErrorStatus",
    "EventCounts",
    "PhaseState",
    "PhaseStatus",
    "ProgressStatus",
    "ProposalStatus",
    "RecentEvent",
    "RequestState",
    "RunEventsState",
    "RunEventsStatus",
    "WaitingStatus",
]
