"""`RunReceipts`: the receipts of one Run, built from the mapping table and kept in a ledger.

How the operator uses it::

    receipts = RunReceipts(run_key=run_uid, work_item_id=wid, clock=clock)       # new Run
    receipts = RunReceipts(run_key=run_uid, work_item_id=wid, clock=clock,
                           state=saved_state)                                   # restarted

    receipts.set_session(exec_session_id)
    publish(receipts.for_transition(RunTransition.EXEC_STARTING, key=exec_session_id))
    for event in feed_result.committed:
        publish(receipts.for_event(event))
    publish(receipts.for_transition(RunTransition.STDOUT_LOST, key=..., evidence="..."))
    persist(receipts.state)   # with the Run's status, *before* publishing what it produced
    publish(receipts.audit(published_sequences, since=oldest_kept))               # on restart

Identity: `harness_session_id` is the Run (`run_key`), the scope of the
sequence; `harness_run_id` is the current exec session (`set_session`);
`harness_task_id` is the work item. A receipt caused by an outbox event gets
an `event_id` derived from the Run and the event's outbox position and
digest, and an idempotency key derived from that and the lifecycle event, so
replaying the same outbox line yields the same ids (and, while the ledger
remembers the key, the very same receipt). A transition is identified the
same way by the caller's `key` (the exec session id, the attempt number...).

Invocations: one exec session is one transport invocation. `exec_starting` and
`resume_starting` open it, `session.ended` (or a refused start) closes it, and every
receipt in between joins it, chained by `parent_receipt_id`; the open invocation is
part of the persisted state.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

from pydantic import Field

from lattice_operator.clock import Clock
from lattice_operator.lifeloop.classes import RetryClass
from lattice_operator.lifeloop.dispatch import DispatchPlan
from lattice_operator.lifeloop.ledger import (
    IdFactory,
    Invocation,
    LedgerState,
    ReceiptLedger,
    ReceiptRequest,
)
from lattice_operator.lifeloop.mapping import (
    CHECKPOINT,
    LIFECYCLE_MAP,
    OUTBOX,
    STDOUT_STREAM,
    LifecycleStep,
    RunTransition,
)
from lattice_operator.lifeloop.receipts import (
    CapabilityDegradation,
    LifecycleReceipt,
    PayloadReceipt,
)
from lattice_operator.lifeloop.vocabulary import (
    IntegrationMode,
    LifecycleEvent,
    SupportState,
)
from lattice_operator.modeling import ApiModel
from lattice_operator.protocol.events import (
    CompletedEvent,
    ErrorEvent,
    PhaseFinishedEvent,
    PhaseStartedEvent,
    WaitingEvent,
)
from lattice_operator.protocol.merge import CommittedEvent
from lattice_operator.text import clip

CLIENT_ID = "lattice"
ADAPTER_ID = "sprites"
INTEGRATION_MODE = IntegrationMode.LAUNCHER_WRAPPER


def _initial_capabilities() -> dict[str, SupportState]:
    return {
        STDOUT_STREAM: SupportState.NATIVE,
        OUTBOX: SupportState.NATIVE,
        CHECKPOINT: SupportState.NATIVE,
    }


# A new session brings a new stream and a new outbox read: capabilities start from the baseline.
_SESSION_STARTS = frozenset({RunTransition.EXEC_STARTING, RunTransition.RESUME_STARTING})
# Before the session, never inside one: each is an invocation of its own (a root receipt).
_STANDALONE = frozenset(
    {
        RunTransition.ENVIRONMENT_APPLIED,
        RunTransition.ENVIRONMENT_ALREADY_APPLIED,
        RunTransition.ENVIRONMENT_FAILED,
    }
)


class RunReceiptsState(ApiModel):
    """What a restarted operator needs to continue a Run's receipts."""

    ledger: LedgerState = Field(default_factory=LedgerState)
    """Sequence and recent idempotency keys."""
    harness_run_id: str | None = Field(default=None, max_length=253)
    """The current exec session."""
    capabilities: dict[str, SupportState] = Field(
        default_factory=_initial_capabilities, max_length=8
    )
    """Current support of the capabilities that can change mid-session."""
    invocation_id: str | None = Field(default=None, max_length=128)
    """The open exec session's invocation: its receipts share it (None: no session open)."""
    last_receipt_id: str | None = Field(default=None, max_length=128)
    """The open invocation's last receipt, the parent of its next one."""


def _hashed(prefix: str, *parts: object) -> str:
    text = "\x1f".join(str(part) for part in parts)
    return f"{prefix}-{hashlib.sha256(text.encode()).hexdigest()[:26]}"


def event_id_for(run_key: str, event: CommittedEvent) -> str:
    """The stable `event_id` of a protocol event: the Run, its outbox position and digest."""
    return _hashed("evt", run_key, event.line, event.digest)


class RunReceipts:
    """Receipt builder for one Run (the sprites adapter, the lattice client)."""

    def __init__(
        self,
        *,
        run_key: str,
        work_item_id: str,
        clock: Clock,
        ids: IdFactory | None = None,
        state: RunReceiptsState | None = None,
        adapter_id: str = ADAPTER_ID,
    ) -> None:
        """`adapter_id`: the adapter the receipts are for (`sprites`, or the agent a Run
        names)."""
        state = state or RunReceiptsState()
        self.run_key = run_key
        self.work_item_id = work_item_id
        self._clock = clock
        self._harness_run_id = state.harness_run_id
        self._capabilities = {**_initial_capabilities(), **state.capabilities}
        self._session: Invocation | None = None
        if state.invocation_id is not None:
            self._session = Invocation(state.invocation_id)
            self._session.last_receipt_id = state.last_receipt_id
        self.ledger = ReceiptLedger(
            client_id=CLIENT_ID,
            adapter_id=adapter_id,
            integration_mode=INTEGRATION_MODE,
            clock=clock,
            ids=ids,
            state=state.ledger,
        )

    @property
    def state(self) -> RunReceiptsState:
        """The state to persist with the Run's status."""
        return RunReceiptsState(
            ledger=self.ledger.state,
            harness_run_id=self._harness_run_id,
            capabilities=dict(self._capabilities),
            invocation_id=self._session.invocation_id if self._session else None,
            last_receipt_id=self._session.last_receipt_id if self._session else None,
        )

    def set_session(self, harness_run_id: str | None) -> None:
        """The exec session the following receipts belong to."""
        self._harness_run_id = harness_run_id

    def for_event(self, event: CommittedEvent) -> list[LifecycleReceipt]:
        """The receipts of one committed protocol event (none for most events)."""
        steps = LIFECYCLE_MAP[event.event_type]
        if not steps:
            return []
        return self._emit(
            steps,
            event_id=event_id_for(self.run_key, event),
            telemetry=_telemetry(event),
            warnings=(),
            evidence="",
        )

    def for_transition(
        self,
        transition: RunTransition,
        *,
        key: str,
        exit_code: int | None = None,
        evidence: str = "",
        plan: DispatchPlan | None = None,
        facts: Mapping[str, object] | None = None,
    ) -> list[LifecycleReceipt]:
        """The receipts of a Run transition; `key` identifies this occurrence of it.

        Capability transitions produce nothing when the support does not change. `plan`
        (a session start): its negotiation and placements go into the `session.starting`
        receipt (status, failure class, warnings, payload receipts, telemetry). `facts`:
        bounded telemetry of the transition (the environment applied, its steps).
        """
        if transition in _SESSION_STARTS:
            self._capabilities = _initial_capabilities()
        steps = LIFECYCLE_MAP[transition]
        steps = tuple(
            s
            for s in steps
            if s.capability is None or self._capabilities.get(s.capability) != s.support
        )
        if not steps:
            return []
        telemetry: dict[str, object] = {"transition": transition.value}
        if exit_code is not None:
            telemetry["exit_code"] = exit_code
        if facts:
            telemetry.update(facts)
        warnings: tuple[str, ...] = ()
        if transition is RunTransition.EXEC_EXITED_UNANNOUNCED:
            warnings = ("the session ended without COMPLETED, WAITING or ERROR",)
        if evidence:
            warnings = (*warnings, clip(evidence, 256))
        if plan is not None and plan.negotiated:
            telemetry.update(plan.telemetry())
            if plan.message:
                warnings = (*warnings, clip(plan.message, 256))
            warnings = (*warnings, *(clip(w, 256) for w in plan.warnings))[:8]
        return self._emit(
            steps,
            event_id=_hashed("evt", self.run_key, transition.value, key),
            telemetry=telemetry,
            warnings=warnings,
            evidence=evidence,
            opens=transition in _SESSION_STARTS,
            standalone=transition in _STANDALONE,
            plan=plan,
        )

    def audit(self, published: Iterable[int], *, since: int = 1) -> list[LifecycleReceipt]:
        """`receipt.gap_detected` for sequence numbers handed out but never published."""
        return self.ledger.audit(published, since=since)

    def _emit(
        self,
        steps: tuple[LifecycleStep, ...],
        *,
        event_id: str,
        telemetry: dict[str, object],
        warnings: tuple[str, ...],
        evidence: str,
        opens: bool = False,
        standalone: bool = False,
        plan: DispatchPlan | None = None,
    ) -> list[LifecycleReceipt]:
        # One exec session is one transport invocation: its receipts, from session.starting
        # to session.ended, share an invocation id and chain parent to child.
        if opens:
            self._session = self.ledger.begin()
        invocation = self.ledger.begin() if standalone else self._session or self.ledger.begin()
        invocation.receipts = []
        now = int(self._clock.now().timestamp())
        for index, step in enumerate(steps):
            degradations: tuple[CapabilityDegradation, ...] = ()
            if step.capability is not None and step.support is not None:
                previous = self._capabilities.get(step.capability, SupportState.UNAVAILABLE)
                self._capabilities[step.capability] = step.support
                weaker = step.support.strength < previous.strength
                degradations = (
                    CapabilityDegradation(
                        capability=step.capability,
                        previous_support=previous,
                        current_support=step.support,
                        observed_at_epoch_s=now,
                        evidence=clip(evidence or "support changed", 512),
                        # A restored capability needs nothing before the next request.
                        retry_class=(
                            step.failure_class.default_retry
                            if weaker and step.failure_class is not None
                            else RetryClass.SAFE_RETRY
                        ),
                    ),
                )
            status, failure = step.status, step.failure_class
            payloads: tuple[PayloadReceipt, ...] = ()
            if plan is not None and index == 0 and plan.negotiated:
                status, failure = plan.status, plan.refusal
                payloads = plan.payload_receipts
            self.ledger.emit(
                ReceiptRequest(
                    event=step.event,
                    event_id=event_id,
                    idempotency_key=_hashed("idem", event_id, step.event.value),
                    status=status,
                    harness_session_id=self.run_key,
                    harness_run_id=self._harness_run_id,
                    harness_task_id=self.work_item_id,
                    payload_receipts=payloads,
                    telemetry_summary=telemetry,
                    capability_degradations=degradations,
                    failure_class=failure,
                    warnings=warnings,
                ),
                invocation,
            )
            if step.event is LifecycleEvent.SESSION_ENDED or (failure is not None and opens):
                self._session = None  # the invocation is over (a refused start never opened)
        return invocation.receipts


def _telemetry(event: CommittedEvent) -> dict[str, object]:
    """A few bounded facts about the event (never its free text beyond a short clip)."""
    data = event.data
    facts: dict[str, object] = {"event_type": data.event_type.value, "outbox_line": event.line}
    if isinstance(data, PhaseStartedEvent | PhaseFinishedEvent):
        facts["phase"] = clip(data.payload.phase, 64)
        if isinstance(data, PhaseFinishedEvent):
            facts["success"] = data.payload.success
    elif isinstance(data, WaitingEvent):
        facts["checkpoint_id"] = data.payload.checkpoint_id
        facts["reason"] = clip(data.payload.reason, 128)
    elif isinstance(data, CompletedEvent):
        facts["completion"] = data.payload.status
    elif isinstance(data, ErrorEvent):
        facts["error"] = clip(data.payload.message, 128)
    return facts


__all__ = [
    "ADAPTER_ID",
    "CLIENT_ID",
    "INTEGRATION_MODE",
    "RunReceipts",
    "RunReceiptsState",
    "event_id_for",
]
