"""One pass of the Intent pipeline: what it reads (`IntentWorld`), what it decides
(`IntentPlan`), and the conditions it sets on the way (`IntentPass`), each phase change
audited. Shared by the pipeline's stages (reconcilers/intent.py) and the executors of the
Intent kinds (reconcilers/intent_kinds/)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from lattice_operator.api.v1alpha1 import (
    AuditEntry,
    Intent,
    IntentPhase,
    IntentStatus,
    Run,
    Sprite,
    find_condition,
    set_condition,
)
from lattice_operator.api.v1alpha1.fileops import FileOpsRequest
from lattice_operator.api.v1alpha1.intent import (
    ApprovalRecord,
    FlyMachinesParams,
    IntentResult,
    params_field,
)
from lattice_operator.policy import CompiledPolicy, Decision
from lattice_operator.reconcilers.intent_forge import ForgeWork
from lattice_operator.reconcilers.intent_limits import (
    ACTOR_CHARS,
    AUDIT_KEPT,
    MESSAGE_CHARS,
    SUMMARY_CHARS,
)
from lattice_operator.reconcilers.intent_reasons import WAITING_REASONS, IntentReason

OPERATOR = "lattice-operator"
TERMINAL = frozenset({"Succeeded", "Failed", "Rejected", "Canceled"})

Phase = IntentPhase


@dataclass(frozen=True)
class IntentWorld:
    """Everything the pipeline reads."""

    intent: Intent
    policies: Sequence[CompiledPolicy]
    default_policy: CompiledPolicy | None
    approvals: Sequence[ApprovalRecord]
    run: Run | None
    sprite: Sprite | None
    now: datetime
    forge_ready: bool = False
    """The operator has a GitHub credential (the GitHub kinds wait for one otherwise)."""
    fly_ready: bool = False
    """The operator has a Fly token (fly_machines Intents wait for one otherwise)."""
    sprite_holder: str | None = None
    """The Run that holds (or is queued for) the Intent's Sprite, if any (read for the kinds
    that must not act under a Run: checkpoint_restore)."""
    decision: Decision | None = None
    """The policies' decision for this spec, when the caller made it already (off its event
    loop: evaluating rules takes up to a step budget); None: classified here if due."""


@dataclass(frozen=True)
class FileOpsWork:
    """Carry out `request` in the backend sprite `sprite` (attempt `attempt`)."""

    request: FileOpsRequest
    sprite: str
    attempt: int


@dataclass(frozen=True)
class RemediationWork:
    """Recreate the Sprite's backend sprite, or restart one of its services (after this
    plan's status is written); the handler records the outcome in `status.result`."""

    action: Literal["recreate_sprite", "restart_service"]
    sprite: Sprite
    service: str | None = None


@dataclass(frozen=True)
class FlyWork:
    """Carry out a fly_machines action (attempt `attempt`, after this plan's status is
    written); a create names its machine `machine_name`. The handler records the outcome in
    `status.result` and `status.fly`."""

    params: FlyMachinesParams
    attempt: int
    machine_name: str


@dataclass(frozen=True)
class RestoreWork:
    """Roll the backend sprite `sprite` back to the checkpoint `checkpoint_id`, or to the
    one the SpriteCheckpoint `checkpoint` holds (after this plan's status is written); the
    handler records the outcome in `status.result`."""

    sprite: str
    checkpoint_id: str | None
    checkpoint: str | None
    approved_by: tuple[str, ...] = ()
    """Who approved it, as this plan records (empty: policy allowed it), for its receipt."""


@dataclass(frozen=True)
class SpritePatch:
    """A merge patch of Sprite `sprite`, carrying the resourceVersion it was decided on."""

    sprite: str
    patch: dict[str, Any]


@dataclass(frozen=True)
class Notice:
    """An Event to post on the Intent."""

    reason: str
    message: str
    warning: bool = False


@dataclass
class IntentPlan:
    """What to write."""

    status: IntentStatus
    create: list[dict[str, Any]] = field(default_factory=list)
    run_patch: dict[str, Any] | None = None
    sprite_patch: SpritePatch | None = None
    """A change of a Sprite (an environment change), written before the status."""
    fileops: FileOpsWork | None = None
    """A FileOps request to carry out now (after this plan's status is written)."""
    forge: ForgeWork | None = None
    """A forge step to carry out now (after this plan's status is written)."""
    remediation: RemediationWork | None = None
    """A health_remediate step to carry out now (after this plan's status is written)."""
    fly: FlyWork | None = None
    """A fly_machines action to carry out now (after this plan's status is written)."""
    restore: RestoreWork | None = None
    """A checkpoint restore to carry out now (after this plan's status is written)."""
    notices: list[Notice] = field(default_factory=list)
    decision: Decision | None = None
    left_approval_after: float | None = None
    """Seconds spent in AwaitingApproval, when this pass left it."""

    @property
    def phase(self) -> str:
        return self.status.phase or "Proposed"


def derive_phase(status: IntentStatus) -> Phase:
    """The phase from the conditions (never the other way round)."""
    done = find_condition(status.conditions, "Succeeded")
    if done is not None:
        if done.status == "True":
            return "Succeeded"
        if done.status == "False":
            return "Canceled" if done.reason == IntentReason.CANCELED else "Failed"
        return "Waiting" if done.reason in WAITING_REASONS else "Executing"
    approved = find_condition(status.conditions, "Approved")
    if approved is not None:
        if approved.status == "False":
            return "Rejected"
        return "Approved" if approved.status == "True" else "AwaitingApproval"
    classified = find_condition(status.conditions, "Classified")
    return "Classified" if classified is not None and classified.status == "True" else "Proposed"


class IntentPass:
    """One reconcile pass: conditions set in order, each phase change audited."""

    def __init__(self, world: IntentWorld) -> None:
        self.world = world
        self.intent = world.intent
        self.status = world.intent.status.model_copy(deep=True)
        self.plan = IntentPlan(status=self.status)
        self.generation = world.intent.metadata.generation
        self.phase: Phase = derive_phase(self.status)

    def set(
        self,
        type: str,
        status: Literal["True", "False", "Unknown"],
        reason: IntentReason,
        message: str,
        actor: str = OPERATOR,
    ) -> None:
        self.status.conditions = set_condition(
            self.status.conditions,
            type=type,
            status=status,
            reason=reason,
            message=message[:MESSAGE_CHARS],
            observed_generation=self.generation,
            now=self.world.now,
        )
        phase = derive_phase(self.status)
        if phase != self.phase:
            if self.phase == "AwaitingApproval" and self.status.awaiting_since is not None:
                waited = self.world.now - self.status.awaiting_since
                self.plan.left_approval_after = waited.total_seconds()
            entry = AuditEntry(
                from_phase=self.phase,
                to_phase=phase,
                time=self.world.now,
                actor=actor[:ACTOR_CHARS],
                reason=message[:MESSAGE_CHARS],
            )
            self.status.audit_log = [*self.status.audit_log, entry][-AUDIT_KEPT:]
            self.phase = phase

    def fail(self, reason: IntentReason, message: str) -> None:
        """End the Intent Failed, the message as its result's summary too."""
        self.status.result = IntentResult(status="failure", summary=message[:SUMMARY_CHARS])
        self.set("Succeeded", "False", reason, message)

    def missing_params(self) -> None:
        """The params member of the Intent's kind is not set (admission makes sure it is:
        an object that got past it ends Failed, naming the member, rather than crash)."""
        kind = self.intent.spec.kind
        member = f"params.{params_field(kind)}"
        self.fail(IntentReason.INVALID_SPEC, f"{member} must be set when kind is {kind}")

    def finish(self) -> IntentPlan:
        self.status.phase = self.phase
        self.status.observed_generation = self.generation
        return self.plan


__all__ = [
    "OPERATOR",
    "TERMINAL",
    "FileOpsWork",
    "FlyWork",
    "IntentPass",
    "IntentPlan",
    "IntentWorld",
    "Notice",
    "Phase",
    "RemediationWork",
    "RestoreWork",
    "SpritePatch",
    "derive_phase",
]
