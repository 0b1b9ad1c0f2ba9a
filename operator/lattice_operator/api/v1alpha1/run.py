"""The Run resource: one exec session (and its resumes) inside a sprite."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StringConstraints, model_validator

from lattice_operator.api.v1alpha1._base import (
    ENV_NAME,
    PRESERVE_UNKNOWN,
    ApiModel,
    LocalObjectReference,
    ObjectMeta,
    cel,
    list_map,
)
from lattice_operator.api.v1alpha1.conditions import CONDITIONS_LIST_SCHEMA, Condition

RunPhase = Literal[
    "Pending", "Starting", "Running", "Waiting", "Resuming", "Succeeded", "Failed", "Canceled"
]
TERMINAL_RUN_PHASES: frozenset[str] = frozenset({"Succeeded", "Failed", "Canceled"})

CommandArg = Annotated[str, StringConstraints(max_length=8192)]
CHECKPOINT_ID_PATTERN = r"^[A-Za-z0-9][-A-Za-z0-9_.]*$"


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
                "rule": "!oldSelf.cancel || self.cancel",
                "message": "cancel cannot be undone",
                "fieldPath": ".cancel",
            },
        )
    )

    cancel: bool = False
    """Set to true to cancel: the session is killed and the Run ends Canceled."""
    resume: RunResume | None = None
    """Resume a Waiting Run from a checkpoint with inputs (what `lattice resume` writes)."""
    intent_ref: LocalObjectReference | None = None
    """The Intent that governs this Run (its grants decide what the sprite may ask for)."""

    @model_validator(mode="after")
    def _resume_needs_checkpoint(self) -> RunSpec:
        if self.resume is not None and not self.resume.checkpoint_id:
            raise ValueError("resume.checkpointId is required when resume is set")
        return self


class RunCursor(ApiModel):
    """What a restarted operator needs to resume exactly where it stopped."""

    outbox_offset: int = Field(default=0, ge=0)
    """Bytes of the outbox already consumed."""
    event_count: int = Field(default=0, ge=0)
    """Events already folded into status."""
    last_digest: str | None = Field(default=None, max_length=80)
    """Digest of the last consumed outbox line."""
    receipt_sequence: int = Field(default=0, ge=0)
    """Sequence number of the last Lifeloop receipt emitted."""


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
    """When the first session started."""
    completion_time: datetime | None = None
    """When the Run finished."""
    session_id: str | None = Field(default=None, max_length=64)
    """The current (or last) backend exec session."""
    cursor: RunCursor = Field(default_factory=RunCursor)
    """The durable stream cursor."""
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
