"""The Run resource: one exec session (and its resumes) inside a sprite."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StringConstraints, model_validator

from lattice_operator.api.v1alpha1._base import (
    CHECKPOINT_ID_PATTERN,
    ENV_NAME,
    PRESERVE_UNKNOWN,
    ApiModel,
    LocalObjectReference,
    ObjectMeta,
    cel,
    list_map,
)
from lattice_operator.api.v1alpha1.conditions import CONDITIONS_LIST_SCHEMA, Condition
from lattice_operator.lifeloop.builder import RunReceiptsState
from lattice_operator.lifeloop.negotiation import Capability, Requirement
from lattice_operator.lifeloop.registry import FILE_MAX_BYTES, AgentAdapterId
from lattice_operator.lifeloop.vocabulary import PayloadPlacement
from lattice_operator.protocol.merge import StreamCursor
from lattice_operator.protocol.projection import RunEventsStatus

RunMode = Literal["exec_ws", "exec_post", "service"]
"""How a Run's command runs in its sprite (docs/sprites-backend.md, "Run modes")."""

RunPhase = Literal[
    "Pending", "Starting", "Running", "Waiting", "Resuming", "Succeeded", "Failed", "Canceled"
]
TERMINAL_RUN_PHASES: frozenset[str] = frozenset({"Succeeded", "Failed", "Canceled"})

CommandArg = Annotated[str, StringConstraints(max_length=8192)]


class EnvVar(ApiModel):
    """An environment variable for the command."""

    name: str = Field(min_length=1, max_length=256, pattern=ENV_NAME)
    """Variable name."""
    value: str = Field(default="", max_length=32768)
    """Variable value."""


class RunTemplate(ApiModel):
    """What to run and how: shared by a Run's spec and a sprite_task_exec Intent's params."""

    sprite_ref: LocalObjectReference
    """The Sprite (same namespace) to run in."""
    command: list[CommandArg] = Field(min_length=1, max_length=256)
    """argv of the command: the program, then its arguments."""
    continuation_command: list[CommandArg] | None = Field(
        default=None, min_length=1, max_length=256
    )
    """argv run when the Run is resumed after WAITING. Defaults to `command`."""
    env: list[EnvVar] = Field(
        default_factory=list,
        max_length=128,
        json_schema_extra=list_map("name"),
    )
    """Extra environment. The operator always sets LATTICE_SPRITE_ID and LATTICE_WORK_ITEM_ID."""
    working_dir: str = Field(default="/workspace", max_length=4096, pattern=r"^/")
    """Absolute working directory inside the sprite."""
    work_item_id: str | None = Field(default=None, min_length=1, max_length=253)
    """The external work reference events must carry. Defaults to the Run's name."""
    timeout_seconds: int | None = Field(default=None, ge=1, le=2_592_000)
    """Fail the Run (reason Timeout) when it has not finished this long after it started."""
    retries: int = Field(default=0, ge=0, le=10)
    """How many more attempts after a failure whose retry class allows one."""
    tty: bool = False
    """Run under a pseudo-terminal (stdout and stderr merged)."""


class RunResume(ApiModel):
    """A request to resume the Run from a checkpoint with inputs."""

    checkpoint_id: str | None = Field(default=None, max_length=256, pattern=CHECKPOINT_ID_PATTERN)
    """The checkpoint to restore, as named by the sprite's WAITING event. Required."""
    inputs: dict[str, Any] = Field(
        default_factory=dict,
        max_length=64,
        json_schema_extra=PRESERVE_UNKNOWN,
    )
    """Values for the WAITING event's expected inputs."""


class AgentCapability(ApiModel):
    """A Lifeloop capability the Run asks of its agent's adapter, at a requirement level."""

    name: Capability
    """A lifecycle event (`context.compacted`), a manifest placement (`placement.pre_session`),
    `context_pressure`, `receipts.ledger` or a harness id (`identity.harness_run_id`)."""
    requirement: Requirement = Requirement.REQUIRED
    """required: the Run fails before its exec when unsatisfied; preferred: it runs, its
    receipt degraded with a warning; optional: it runs, without a warning."""


class AgentPlacement(ApiModel):
    """One acceptable placement of a payload, at a requirement level."""

    placement: PayloadPlacement
    """developer_equivalent_frame, pre_prompt_frame, side_channel_context or receipt_only."""
    requirement: Requirement = Requirement.REQUIRED


def _side_channel() -> list[AgentPlacement]:
    return [AgentPlacement(placement=PayloadPlacement.SIDE_CHANNEL_CONTEXT)]


class AgentContext(ApiModel):
    """Context the operator hands the agent when a session starts (an opaque payload)."""

    body: str = Field(min_length=1, max_length=FILE_MAX_BYTES)
    """The payload, carried verbatim (never parsed)."""
    kind: str = Field(default="context", min_length=1, max_length=64, pattern=r"^[a-z0-9_.-]+$")
    """The payload kind, a label for the receipts."""
    placements: list[AgentPlacement] = Field(
        default_factory=_side_channel, min_length=1, max_length=4
    )
    """Acceptable placements in order: the first one the adapter can do is used."""


class RunAgent(ApiModel):
    """The agent the Run runs, negotiated against its Lifeloop adapter manifest before the
    exec (docs/lifeloop.md)."""

    adapter: AgentAdapterId
    """The agent's adapter: claude or codex (v1 conformance), gemini, hermes, openclaw or
    opencode (pre-conformance)."""
    capabilities: list[AgentCapability] = Field(
        default_factory=list, max_length=24, json_schema_extra=list_map("name")
    )
    """The capabilities the Run needs, each with its requirement level."""
    accept_partial: bool = False
    """Count `partial` support as satisfied (otherwise it is degraded)."""
    context: AgentContext | None = None
    """Context handed to the agent at every session start."""
    resume_placements: list[AgentPlacement] = Field(
        default_factory=_side_channel, min_length=1, max_length=4
    )
    """Where the resume payload is handed to the agent (resume.json is written in any case,
    as the sprite protocol requires). Default: side_channel_context (the file, named by
    LATTICE_RESUME_FILE)."""


class RunSpec(RunTemplate):
    """Desired state of a Run."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            {
                "rule": "!has(self.resume) || has(self.resume.checkpointId)",
                "message": "resume.checkpointId is required when resume is set",
                "fieldPath": ".resume.checkpointId",
                "reason": "FieldValueRequired",
            },
            {
                "rule": "self.command == oldSelf.command",
                "message": "command is immutable",
                "fieldPath": ".command",
            },
            {
                "rule": "self.spriteRef == oldSelf.spriteRef",
                "message": "spriteRef is immutable",
                "fieldPath": ".spriteRef",
            },
            {
                "rule": "has(self.agent) == has(oldSelf.agent)"
                " && (!has(self.agent) || self.agent == oldSelf.agent)",
                "message": "agent is immutable",
                "fieldPath": ".agent",
            },
            {
                "rule": "self.mode == oldSelf.mode",
                "message": "mode is immutable",
                "fieldPath": ".mode",
            },
            {
                "rule": "self.mode == 'exec_ws' || !self.tty",
                "message": "tty needs mode exec_ws (the HTTP exec endpoint and services have "
                "no terminal)",
                "fieldPath": ".tty",
            },
            {
                "rule": "!oldSelf.cancel || self.cancel",
                "message": "cancel cannot be undone",
                "fieldPath": ".cancel",
            },
        )
    )

    mode: RunMode = "exec_ws"
    """How the command runs in the sprite: exec_ws (an exec session over a WebSocket,
    re-attached after a restart), exec_post (the HTTP exec endpoint: short commands; not
    re-attachable) or service (a Sprites service whose log is the Run's stdout). Immutable;
    tty needs exec_ws."""
    cancel: bool = False
    """Set to true to cancel: the session is killed and the Run ends Canceled."""
    resume: RunResume | None = None
    """Resume a Waiting Run from a checkpoint with inputs (what `lattice resume` writes)."""
    intent_ref: LocalObjectReference | None = None
    """The Intent that governs this Run (its grants decide what the sprite may ask for)."""
    agent: RunAgent | None = None
    """The agent the command runs, for Lifeloop negotiation and payload placement. Unset: a
    plain command (the `sprites` adapter, nothing negotiated or placed)."""
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0, le=31_536_000)
    """Delete the Run this many seconds after it finished (as Jobs do). Unset: kept until the
    per-Sprite history limit (operator setting `runs.history_limit`) removes it. Runs an Intent
    created go with their Intent instead."""

    @model_validator(mode="after")
    def _resume_needs_checkpoint(self) -> RunSpec:
        if self.resume is not None and not self.resume.checkpoint_id:
            raise ValueError("resume.checkpointId is required when resume is set")
        if self.tty and self.mode != "exec_ws":
            raise ValueError(
                f"spec.tty: mode {self.mode} has no terminal (the HTTP exec endpoint and "
                "services are non-TTY); use mode exec_ws"
            )
        return self


class ResumeStatus(ApiModel):
    """Bookkeeping of WAITING and resume, so that a resume is applied exactly once."""

    checkpoint_id: str | None = Field(default=None, max_length=256)
    """The checkpoint a resume restores: the WAITING's, or one the operator took itself."""
    synthesized: bool = False
    """The WAITING named a checkpoint that did not exist; the operator took `checkpointId`."""
    requested_digest: str | None = Field(default=None, max_length=80)
    """Identity (checkpoint + inputs) of the resume being applied."""
    applied_digest: str | None = Field(default=None, max_length=80)
    """Identity of the last resume applied; the same request again is a no-op."""
    refused_digest: str | None = Field(default=None, max_length=80)
    """Identity of the last resume refused (see `message`)."""
    applied_at: datetime | None = None
    """When the last resume was applied."""
    count: int = Field(default=0, ge=0)
    """Resumes applied."""
    message: str | None = Field(default=None, max_length=1024)
    """Why the last resume request was refused."""
    inputs: dict[str, Any] | None = Field(
        default=None, max_length=64, json_schema_extra=PRESERVE_UNKNOWN
    )
    """The inputs of the resume being (or last) applied."""
    answer: str | None = Field(default=None, max_length=32)
    """When the operator resumed the sprite itself: the action request it answered."""


class ActionResult(ApiModel):
    """How the operator answered one of the sprite's ACTION_REQUESTs (never a secret value)."""

    request_id: str = Field(max_length=32)
    """The request, as status.events.actionRequests names it."""
    action: str = Field(max_length=32)
    """The requested action."""
    status: Literal["fulfilled", "refused", "queued"]
    """fulfilled, refused (with a reason), or queued for a capability not configured yet."""
    reason: str | None = Field(default=None, max_length=512)
    """Why it was refused or queued."""
    path: str | None = Field(default=None, max_length=512)
    """For FETCH_CREDENTIAL: where inside the sprite the credential was written."""
    url: str | None = Field(default=None, max_length=1024)
    """For a forge action: the pull request or comment it made."""
    number: int | None = Field(default=None, ge=0)
    """For OPEN_PR: the pull request's number."""
    resumed: bool = False
    """The answer was delivered to the sprite in a resume's `context.action_results`."""


class SequenceRange(ApiModel):
    """Receipt sequence numbers `first` to `last`, inclusive."""

    first: int = Field(ge=1)
    last: int = Field(ge=1)


class RunReceiptsStatus(ApiModel):
    """Where the Run's Lifeloop receipts stand."""

    state: RunReceiptsState = Field(default_factory=RunReceiptsState)
    """The ledger state a restarted operator continues from (sequence, keys, capabilities)."""
    events_dropped: int = Field(default=0, ge=0)
    """Receipts not posted as Events because the Run exceeded its Event rate limit."""
    audited_through: int = Field(default=0, ge=0)
    """Sequence numbers up to this one were checked for gaps (after a restart)."""
    dropped_sequences: list[SequenceRange] = Field(default_factory=list, max_length=64)
    """Sequence numbers of the dropped receipts, as inclusive ranges (the newest 64 ranges):
    a restarted operator does not take them for receipts lost in a crash."""


class AgentCapabilityStatus(ApiModel):
    """How one requested capability was negotiated."""

    name: str = Field(max_length=64)
    requirement: str = Field(max_length=16)
    support: str = Field(max_length=16)
    """What the adapter's manifest claims: native, synthesized, partial, manual, unavailable."""
    outcome: str = Field(max_length=32)
    """satisfied, degraded, unsupported or requires_operator."""


class AgentPlacementStatus(ApiModel):
    """Where a payload handed to the agent went."""

    payload: Literal["context", "resume"]
    placement: str | None = Field(default=None, max_length=64)
    """The placement used (unset: skipped or refused)."""
    status: str = Field(max_length=16)
    """delivered, degraded, skipped or failed (as in the payload receipt)."""


class RunAgentStatus(ApiModel):
    """The outcome of the latest negotiation with the Run's agent adapter."""

    adapter: str = Field(max_length=64)
    conformance: str = Field(max_length=32)
    """v1 (every manifest claim tested) or pre_conformance."""
    outcome: Literal["satisfied", "degraded", "refused"]
    """refused: the Run failed before its exec."""
    capabilities: list[AgentCapabilityStatus] = Field(default_factory=list, max_length=24)
    placements: list[AgentPlacementStatus] = Field(default_factory=list, max_length=2)
    """The latest context and resume placements."""
    message: str | None = Field(default=None, max_length=1024)
    """Why it was refused, or what was degraded."""


class RunAttempt(ApiModel):
    """One attempt at executing the Run."""

    number: int = Field(ge=1)
    """1 for the first attempt."""
    session_id: str | None = Field(default=None, max_length=64)
    """The backend exec session."""
    start_time: datetime | None = None
    """When the session started."""
    completion_time: datetime | None = None
    """When the attempt ended."""
    exit_code: int | None = None
    """Exit code of the session, when known."""
    outcome: str | None = Field(default=None, max_length=64)
    """Succeeded, Failed, Waiting, Canceled or TimedOut."""
    failure_class: str | None = Field(default=None, max_length=64)
    """The Lifeloop failure class of a failed attempt."""
    retry_class: str | None = Field(default=None, max_length=64)
    """The Lifeloop retry class of a failed attempt."""
    message: str | None = Field(default=None, max_length=1024)
    """A human-readable note."""


class EnvironmentStepResult(ApiModel):
    """One environment step as this Run ran it."""

    name: str = Field(max_length=253)
    """The step (spec.environment[].name of the Sprite)."""
    exit_code: int | None = None
    """Its exit status (None: it did not finish)."""
    output: str | None = Field(default=None, max_length=1024)
    """The end of its output, when it failed."""


class RunEnvironmentStatus(ApiModel):
    """The Sprite's environment as this Run applied it before the agent's command."""

    digest: str = Field(max_length=80)
    """sha256 of the steps applied (the marker in the sprite is named by it)."""
    state: Literal["Applied", "AlreadyApplied", "Failed"]
    """Applied: every step ran and exited 0 now; AlreadyApplied: the sprite's marker shows an
    earlier Run applied this very environment (nothing ran); Failed: a step did not exit 0."""
    steps: list[EnvironmentStepResult] = Field(default_factory=list, max_length=64)
    """The steps run now, in order (empty when AlreadyApplied)."""
    message: str | None = Field(default=None, max_length=1024)
    """What happened, for humans."""
    cluster_steps: list[str] | None = Field(default=None, max_length=64)
    """The steps that came from the cluster-wide Environment (run first, before the
    Sprite's own), by name; None when it had none."""


class RunStatus(ApiModel):
    """Observed state of the Run."""

    observed_generation: int | None = None
    """The .metadata.generation last reconciled."""
    conditions: list[Condition] = Field(
        default_factory=list, max_length=16, json_schema_extra=CONDITIONS_LIST_SCHEMA
    )
    """Succeeded: Unknown while running, True or False when done."""
    phase: RunPhase | None = None
    """A one-word summary derived from the conditions, for `kubectl get`."""
    start_time: datetime | None = None
    """When the first session started: the operator's clock the moment the backend confirmed
    the exec session (where an apply → exec latency ends)."""
    completion_time: datetime | None = None
    """When the Run finished."""
    session_id: str | None = Field(default=None, max_length=64)
    """The current (or last) backend exec session."""
    sprite_name: str | None = Field(default=None, max_length=63)
    """The backend sprite the Run executes in."""
    session_segment: int = Field(default=1, ge=1)
    """1 for the first session of an attempt, +1 per resume."""
    outbox_start: int | None = Field(default=None, ge=0)
    """Where this Run's own lines begin in the Sprite's outbox: its length (to the last line
    end) when the Run first claimed the Sprite. Earlier Runs' lines are never read."""
    cursor: StreamCursor = Field(default_factory=StreamCursor)
    """The durable stream cursor (outbox offset, counts, last digest)."""
    events: RunEventsStatus = Field(default_factory=RunEventsStatus)
    """What the sprite's events say: phases, progress, artifacts, waiting, completion..."""
    receipts: RunReceiptsStatus | None = None
    """Lifeloop receipt bookkeeping."""
    agent: RunAgentStatus | None = None
    """Lifeloop negotiation with spec.agent's adapter (unset without spec.agent)."""
    resume: ResumeStatus | None = None
    """WAITING and resume bookkeeping."""
    environment: RunEnvironmentStatus | None = None
    """The Sprite's environment (spec.environment) as applied before the agent started
    (unset: the Sprite has none)."""
    action_results: list[ActionResult] = Field(default_factory=list, max_length=32)
    """Answers to the sprite's action requests, newest last."""
    proposals: list[Annotated[str, StringConstraints(max_length=253)]] = Field(
        default_factory=list, max_length=32
    )
    """environment_change Intents created from the sprite's ENVIRONMENT_PROPOSALs."""
    log_tail: list[Annotated[str, StringConstraints(max_length=512)]] = Field(
        default_factory=list, max_length=20
    )
    """The last ordinary stdout lines (not events)."""
    attempts: list[RunAttempt] = Field(default_factory=list, max_length=11)
    """Every attempt, oldest first."""


class Run(ApiModel):
    """One exec session in a sprite, its events folded into status."""

    api_version: Literal["lattice.dev/v1alpha1"] = "lattice.dev/v1alpha1"
    kind: Literal["Run"] = "Run"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: RunSpec
    status: RunStatus = Field(default_factory=RunStatus)

    def is_done(self) -> bool:
        """Whether the Run has reached a terminal phase."""
        return self.status.phase in TERMINAL_RUN_PHASES

    def work_item_id(self) -> str:
        """The work item id events must carry."""
        return self.spec.work_item_id or self.metadata.name

    def has_timed_out(self, now: datetime) -> bool:
        """Whether spec.timeoutSeconds has elapsed since the Run started."""
        if self.spec.timeout_seconds is None or self.status.start_time is None:
            return False
        return now - self.status.start_time >= timedelta(seconds=self.spec.timeout_seconds)
