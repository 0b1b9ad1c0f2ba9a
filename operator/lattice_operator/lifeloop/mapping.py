"""Protocol events and Run transitions → lifecycle events: the one table.

A Run is the durable session scope (its receipts share one sequence). Inside
it, each exec session — the first one, then one per resume — is a Lifeloop
*session* (`session.starting` … `session.ended`), and each protocol phase is a
*frame* inside it. WAITING closes a session and the resume opens the next one.
Capability changes (the stdout stream lost or back, the outbox unreadable,
a checkpoint the operator had to take itself) are `capability.degraded`
receipts naming the support transition; they are emitted only when the
support actually changes, and every new session (exec or resume) starts from
the baseline again (native), since it brings a new stream and a new outbox read.

`LIFECYCLE_MAP` is the source of truth; docs/protocol-engine.md shows it as
rendered by `mapping_table_markdown()` (a test keeps the two equal).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from lattice_operator.lifeloop.classes import FailureClass
from lattice_operator.lifeloop.vocabulary import LifecycleEvent, ReceiptStatus, SupportState
from lattice_operator.protocol.models import EventType

E = LifecycleEvent
S = ReceiptStatus


class RunTransition(StrEnum):
    """Lifecycle moments the operator observes itself (not sent by the sprite)."""

    EXEC_STARTING = "exec_starting"
    """The operator is about to open the Run's first exec session."""
    EXEC_STARTED = "exec_started"
    """The exec session is attached and streaming."""
    RESUME_STARTING = "resume_starting"
    """The operator is restoring the WAITING's checkpoint to resume."""
    RESUME_STARTED = "resume_started"
    """The continuation exec session is attached."""
    EXEC_EXITED = "exec_exited"
    """The session's process exited after COMPLETED, WAITING or ERROR."""
    EXEC_EXITED_UNANNOUNCED = "exec_exited_unannounced"
    """The process exited without COMPLETED, WAITING or ERROR."""
    SESSION_LOST = "session_lost"
    """The exec session could not be re-attached: the transport failed for good."""
    TIMED_OUT = "timed_out"
    """The Run's timeout elapsed; the session is being stopped."""
    CANCELED = "canceled"
    """The Run was canceled; the session is being stopped."""
    STDOUT_LOST = "stdout_lost"
    """The stdout stream dropped (the outbox still carries every event)."""
    STDOUT_RESTORED = "stdout_restored"
    """The stdout stream is attached again."""
    OUTBOX_UNREADABLE = "outbox_unreadable"
    """The outbox file cannot be read (events only from stdout, without durability)."""
    OUTBOX_RESTORED = "outbox_restored"
    """The outbox can be read again."""
    CHECKPOINT_SYNTHESIZED = "checkpoint_synthesized"
    """WAITING named a checkpoint that does not exist; the operator took one itself."""
    ENVIRONMENT_APPLIED = "environment_applied"
    """Before the session: every step of the Run's environment ran and exited 0."""
    ENVIRONMENT_ALREADY_APPLIED = "environment_already_applied"
    """Before the session: the sprite's digest marker shows this environment applied (nothing
    ran)."""
    ENVIRONMENT_FAILED = "environment_failed"
    """Before the session: a step of the Run's environment did not exit 0 (the Run fails)."""


class SpriteOperation(StrEnum):
    """Operations on a Sprite an Intent carries out itself, without a Run: the Intent is the
    durable scope, each operation one invocation."""

    CHECKPOINT_RESTORED = "checkpoint_restored"
    """The Sprite was rolled back to a checkpoint: its sandbox resumes from that state."""
    CHECKPOINT_RESTORE_FAILED = "checkpoint_restore_failed"
    """The restore could not be done (the caller names the failure class)."""


Trigger = EventType | RunTransition | SpriteOperation


@dataclass(frozen=True)
class LifecycleStep:
    """One receipt a trigger produces."""

    event: LifecycleEvent
    status: ReceiptStatus = ReceiptStatus.OBSERVED
    failure_class: FailureClass | None = None
    capability: str | None = None
    """For capability.degraded: the capability whose support changes..."""
    support: SupportState | None = None
    """... and its support from now on."""


STDOUT_STREAM = "stdout_stream"
OUTBOX = "outbox"
CHECKPOINT = "checkpoint"

_ENDING_FAILED_BY = {
    RunTransition.SESSION_LOST: FailureClass.TRANSPORT_ERROR,
    RunTransition.TIMED_OUT: FailureClass.TIMEOUT,
}

LIFECYCLE_MAP: Mapping[Trigger, tuple[LifecycleStep, ...]] = {
    RunTransition.EXEC_STARTING: (LifecycleStep(E.SESSION_STARTING),),
    RunTransition.EXEC_STARTED: (LifecycleStep(E.SESSION_STARTED),),
    RunTransition.RESUME_STARTING: (LifecycleStep(E.SESSION_STARTING),),
    RunTransition.RESUME_STARTED: (LifecycleStep(E.SESSION_STARTED),),
    EventType.PHASE_STARTED: (LifecycleStep(E.FRAME_OPENING), LifecycleStep(E.FRAME_OPENED)),
    EventType.PHASE_FINISHED: (LifecycleStep(E.FRAME_ENDING), LifecycleStep(E.FRAME_ENDED)),
    EventType.WAITING: (LifecycleStep(E.SESSION_ENDING),),
    EventType.COMPLETED: (LifecycleStep(E.SESSION_ENDING),),
    EventType.ERROR: (LifecycleStep(E.SESSION_ENDING),),
    EventType.INFO: (),
    EventType.ARTIFACT: (),
    EventType.ACTION_REQUEST: (),
    EventType.ENVIRONMENT_PROPOSAL: (),
    RunTransition.EXEC_EXITED: (LifecycleStep(E.SESSION_ENDED),),
    RunTransition.EXEC_EXITED_UNANNOUNCED: (
        LifecycleStep(E.SESSION_ENDING),
        LifecycleStep(E.SESSION_ENDED),
    ),
    **{
        transition: (
            LifecycleStep(E.SESSION_ENDING, S.FAILED, failure),
            LifecycleStep(E.SESSION_ENDED, S.FAILED, failure),
        )
        for transition, failure in _ENDING_FAILED_BY.items()
    },
    RunTransition.CANCELED: (LifecycleStep(E.SESSION_ENDING), LifecycleStep(E.SESSION_ENDED)),
    RunTransition.STDOUT_LOST: (
        LifecycleStep(
            E.CAPABILITY_DEGRADED,
            S.DEGRADED,
            FailureClass.CAPABILITY_DEGRADED,
            STDOUT_STREAM,
            SupportState.UNAVAILABLE,
        ),
    ),
    RunTransition.STDOUT_RESTORED: (
        LifecycleStep(E.CAPABILITY_DEGRADED, capability=STDOUT_STREAM, support=SupportState.NATIVE),
    ),
    RunTransition.OUTBOX_UNREADABLE: (
        LifecycleStep(
            E.CAPABILITY_DEGRADED,
            S.DEGRADED,
            FailureClass.CAPABILITY_DEGRADED,
            OUTBOX,
            SupportState.UNAVAILABLE,
        ),
    ),
    RunTransition.OUTBOX_RESTORED: (
        LifecycleStep(E.CAPABILITY_DEGRADED, capability=OUTBOX, support=SupportState.NATIVE),
    ),
    RunTransition.CHECKPOINT_SYNTHESIZED: (
        LifecycleStep(
            E.CAPABILITY_DEGRADED,
            S.DEGRADED,
            FailureClass.CAPABILITY_DEGRADED,
            CHECKPOINT,
            SupportState.SYNTHESIZED,
        ),
    ),
    # The environment prepares the session, outside its invocation: one receipt each.
    RunTransition.ENVIRONMENT_APPLIED: (LifecycleStep(E.SESSION_STARTING),),
    RunTransition.ENVIRONMENT_ALREADY_APPLIED: (LifecycleStep(E.SESSION_STARTING, S.SKIPPED),),
    RunTransition.ENVIRONMENT_FAILED: (
        LifecycleStep(E.SESSION_STARTING, S.FAILED, FailureClass.OPERATOR_REQUIRED),
    ),
    # A restore is a resume of the sandbox from a checkpoint, as a Run's resume_starting is.
    SpriteOperation.CHECKPOINT_RESTORED: (
        LifecycleStep(E.SESSION_STARTING),
        LifecycleStep(E.SESSION_STARTED),
    ),
    SpriteOperation.CHECKPOINT_RESTORE_FAILED: (
        LifecycleStep(E.SESSION_STARTING, S.FAILED, FailureClass.ADAPTER_UNAVAILABLE),
    ),
}
"""Every trigger → the receipts it produces, in order (one invocation, chained)."""


def mapping_table_markdown() -> str:
    """`LIFECYCLE_MAP` as the Markdown table the documentation shows."""
    rows = ["| Trigger | Lifecycle events (one invocation, in order) |", "|---|---|"]
    for trigger, steps in LIFECYCLE_MAP.items():
        kind = (
            "event"
            if isinstance(trigger, EventType)
            else "operation"
            if isinstance(trigger, SpriteOperation)
            else "transition"
        )
        shown = []
        for step in steps:
            text = f"`{step.event.value}` {step.status.value}"
            if step.failure_class is not None:
                text += f" ({step.failure_class.value})"
            if step.capability is not None and step.support is not None:
                text += f" [{step.capability} → {step.support.value}]"
            shown.append(text)
        rows.append(f"| {kind} `{trigger.value}` | {', '.join(shown) or '—'} |")
    return "\n".join(rows)


__all__ = [
    "CHECKPOINT",
    "LIFECYCLE_MAP",
    "OUTBOX",
    "STDOUT_STREAM",
    "LifecycleStep",
    "RunTransition",
    "SpriteOperation",
    "Trigger",
    "mapping_table_markdown",
]
