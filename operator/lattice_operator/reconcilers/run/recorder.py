"""The one owner of a Run's status and receipts while it is driven.

Everything that changes what the status shows goes through `RunRecorder`, which counts the
changes: a status write is due when the count moved (at once for a phase change, else at
most once per `patch_interval`), and the status is serialised only then. It owns the order
that makes receipts trustworthy: a receipt is published only after the status holding the
ledger state that produced it is written, so a crash in between is found as a gap by the
next operator (`audit`), never as a receipt without its state.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal

from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.api.v1alpha1 import Run, RunAttempt, set_condition
from lattice_operator.api.v1alpha1.run import RunReceiptsStatus, SequenceRange
from lattice_operator.clock import Clock
from lattice_operator.lifeloop.builder import RunReceipts
from lattice_operator.lifeloop.classes import FailureClass, RetryClass
from lattice_operator.lifeloop.receipts import LifecycleReceipt
from lattice_operator.metrics import (
    EVENTS_INGESTED,
    RECEIPTS_MISSING,
    RUN_OLDEST_ACTIVITY,
    STATUS_PATCHES,
    VIOLATIONS,
)
from lattice_operator.ports import ReceiptPublisher, RunStatusWriter
from lattice_operator.protocol.engine import FeedResult, RunEventEngine
from lattice_operator.protocol.models import EventType
from lattice_operator.reconcilers.run.agent import adapter_id_of
from lattice_operator.reconcilers.run.decisions import phase_of
from lattice_operator.reconcilers.run.reasons import EndReason, Reason
from lattice_operator.redaction import Redactor

log = logging.getLogger(__name__)

ConditionStatus = Literal["True", "False", "Unknown"]
MAX_ATTEMPTS_KEPT = 11


class RunRecorder:
    """A Run's status, its event engine and its receipts, written in the right order."""

    def __init__(
        self,
        run: Run,
        *,
        ref: ObjectRef,
        writer: RunStatusWriter,
        publisher: ReceiptPublisher,
        clock: Clock,
        patch_interval: float,
    ) -> None:
        self.ref = ref
        self._writer = writer
        self._publisher = publisher
        self._clock = clock
        self._patch_interval = patch_interval
        self.status = run.status.model_copy(deep=True)
        self.generation = run.metadata.generation
        self.engine: RunEventEngine | None = None
        receipts = self.status.receipts
        self.receipts = RunReceipts(
            run_key=ref.uid,
            work_item_id=run.work_item_id(),
            clock=clock,
            state=receipts.state if receipts else None,
            adapter_id=adapter_id_of(run),
        )
        self._pending: list[LifecycleReceipt] = []
        self._audited_through = receipts.audited_through if receipts else 0
        self._dropped_before = receipts.events_dropped if receipts else 0
        self._dropped_ranges_before = [
            (r.first, r.last) for r in (receipts.dropped_sequences if receipts else [])
        ]
        self.redactor = Redactor()
        """Every secret value delivered to the sprite, kept out of status and receipts."""
        self.ack_due = False
        """A resumed session started: its first event must acknowledge the resume."""
        # What is stored: the status as read counts as written (a restart writes nothing
        # until something changes).
        self._changes = 0
        self._stored_changes = 0
        self._stored = self._snapshot()
        self._stored_phase = self.status.phase
        self._stored_at: float | None = None

    # -- changes ------------------------------------------------------------------------

    def changed(self) -> None:
        """Something the status shows changed (written when due)."""
        self._changes += 1

    @property
    def phase(self) -> str:
        return phase_of(self.status)

    def is_done(self) -> bool:
        return self.phase in ("Succeeded", "Failed", "Canceled")

    def set(self, status: ConditionStatus, reason: Reason | EndReason, message: str) -> None:
        """The Succeeded condition (and with it the phase)."""
        self.status.conditions = set_condition(
            self.status.conditions,
            type="Succeeded",
            status=status,
            reason=str(reason),
            message=message[:1024],
            observed_generation=self.generation,
            now=self._clock.now(),
        )
        self.status.observed_generation = self.generation
        self.status.phase = phase_of(self.status)  # type: ignore[assignment]
        self.active()
        self.changed()

    def active(self) -> None:
        """The Run did something (started, printed, sent events): what the alert on Runs
        making no progress watches, while the Run is Running."""
        if self.status.phase == "Running":
            RUN_OLDEST_ACTIVITY.touch(self.ref.uid, self._clock.now().timestamp())
        else:
            RUN_OLDEST_ACTIVITY.forget(self.ref.uid)

    def begin_attempt(self, *, resume: bool = False) -> RunAttempt:
        if resume and self.status.attempts:
            # A resume continues the attempt that reached WAITING.
            attempt = self.status.attempts[-1]
            attempt.completion_time = None
            attempt.outcome = None
            attempt.exit_code = None
        else:
            attempt = RunAttempt(number=len(self.status.attempts) + 1, start_time=self._clock.now())
            self.status.attempts = [*self.status.attempts, attempt][-MAX_ATTEMPTS_KEPT:]
        self.changed()
        return attempt

    def finish_attempt(
        self,
        outcome: str,
        message: str,
        failure: FailureClass | None = None,
        retry: RetryClass | None = None,
    ) -> None:
        if not self.status.attempts:
            return
        attempt = self.status.attempts[-1]
        attempt.outcome = outcome
        attempt.message = message[:1024]
        attempt.completion_time = self._clock.now()
        attempt.failure_class = failure.value if failure else None
        attempt.retry_class = retry.value if retry else None
        self.changed()

    def attempt_open(self) -> bool:
        return bool(self.status.attempts) and self.status.attempts[-1].completion_time is None

    def tag(self, attempt: int | None = None) -> str:
        """This attempt (or attempt number `attempt`) and session, for receipt idempotency
        keys and exit files."""
        return f"a{attempt or len(self.status.attempts)}-s{self.status.session_segment}"

    # -- the event engine -----------------------------------------------------------------

    def engine_for(self, sprite_name: str, work_item_id: str) -> RunEventEngine:
        if self.engine is None:
            cursor = self.status.cursor
            resumed = cursor.line_count or self.status.session_id or cursor.outbox_offset
            self.engine = RunEventEngine(
                sprite_name,
                work_item_id,
                cursor=cursor if resumed else None,
                status=self.status.events,
                log_tail=self.status.log_tail if resumed else (),
                require_stdout_copies=True,
            )
        return self.engine

    def require_engine(self) -> RunEventEngine:
        if self.engine is None:
            raise RuntimeError("the Run's event engine is not started")
        return self.engine

    def absorb(self, result: FeedResult) -> None:
        """What a feed of the engine changed: receipts for its events, metrics."""
        self.changed()  # the cursor or the log tail moved, at the least
        if self.ack_due and result.committed:
            self.ack_due = False
            first = result.committed[0]
            if first.event_type != EventType.INFO:
                self.violation(
                    "resume_not_acknowledged",
                    f"the resumed session's first event was {first.event_type.value}, not the "
                    "INFO that acknowledges the resume",
                    line=first.line,
                )
        if result.committed:
            self.active()
        for event in result.committed:
            EVENTS_INGESTED.labels(type=event.event_type.value).inc()
            self.emit(self.receipts.for_event(event))
        for violation in result.violations:
            VIOLATIONS.labels(category=violation.category).inc()

    def violation(self, category: str, reason: str, *, line: int | None = None) -> None:
        recorded = self.require_engine().record_violation(category, reason, line=line)
        VIOLATIONS.labels(category=recorded.category).inc()
        self.changed()

    # -- receipts -------------------------------------------------------------------------

    def emit(self, receipts: list[LifecycleReceipt]) -> None:
        """Receipts to publish once the status holding their ledger state is written."""
        if self.redactor.active:
            redact = self.redactor.value
            receipts = [
                r.model_copy(update={k: redact(v) for k, v in r if type(v) in (str, dict, list)})
                for r in receipts
            ]
        self._pending.extend(receipts)
        self.changed()

    async def audit(self) -> None:
        """After a restart: receipts handed out but never posted are reported as a gap."""
        if self.receipts.ledger.state.sequence == 0:
            return
        try:
            published = await self._publisher.published_sequences(self.ref)
        except Exception as exc:  # evidence only: never block the Run on it
            log.warning("run %s: cannot list its receipts: %s", self.ref.name, exc)
            return
        audited = self.status.receipts.audited_through if self.status.receipts else 0
        handed_out = self.receipts.ledger.state.sequence
        # Dropped by the rate limit (and reported then) is not lost in a crash.
        for first, last in self._dropped_ranges_before:
            published |= set(range(first, last + 1))
        if published:
            since = max(min(published), audited + 1)
            gaps = self.receipts.audit(published, since=since)
            for gap in gaps:
                summary = gap.telemetry_summary or {}
                missing = int(summary.get("missing_to", 0)) - int(summary.get("missing_from", 1))
                RECEIPTS_MISSING.inc(max(0, missing + 1))
            self.emit(gaps)
        self._audited_through = handed_out

    # -- writing ------------------------------------------------------------------------

    def wait_time(self, idle: float) -> float:
        """Seconds until a status write is due (`idle` when nothing is waiting to be written)."""
        if self._changes == self._stored_changes:
            return idle
        if self._stored_at is None or self.status.phase != self._stored_phase:
            return 0.0
        return max(0.0, self._stored_at + self._patch_interval - self._clock.monotonic())

    async def flush(self, *, force: bool = False) -> None:
        """Write the status if it is due (or `force`), then publish the receipts it stored."""
        if not force and (self._changes == self._stored_changes or self.wait_time(idle=1.0) > 0.0):
            return
        snapshot = self._snapshot()
        if snapshot != self._stored:
            await self._write(snapshot)
        else:
            self._stored_changes = self._changes
        # Receipts are published only once the ledger state that produced them is stored.
        dropped = self._publisher.dropped(self.ref.uid)
        await self._publish()
        if force and self._publisher.dropped(self.ref.uid) != dropped:
            await self._write(self._snapshot())  # the final word on what was dropped

    async def _write(self, snapshot: dict[str, Any]) -> None:
        changes = self._changes
        await self._writer.write_run_status(self.ref.namespace, self.ref.name, snapshot)
        STATUS_PATCHES.labels(kind="Run").inc()
        self._stored, self._stored_changes = snapshot, changes
        self._stored_phase = self.status.phase
        self._stored_at = self._clock.monotonic()

    async def _publish(self) -> None:
        receipts, self._pending = self._pending, []
        if receipts:
            # Shielded: the status that produced them is stored; a cancellation must not
            # leave them half-posted.
            await asyncio.shield(self._publisher.publish(self.ref, receipts))

    def _snapshot(self) -> dict[str, Any]:
        if self.engine is not None:
            self.status.cursor = self.engine.cursor
            self.status.events = self.engine.status()
            self.status.log_tail = self.engine.log_tail()[-20:]
        self.status.receipts = RunReceiptsStatus(
            state=self.receipts.state,
            # The publisher counts since this process started; the status keeps the total.
            events_dropped=self._dropped_before + self._publisher.dropped(self.ref.uid),
            audited_through=self._audited_through,
            dropped_sequences=[
                SequenceRange(first=first, last=last)
                for first, last in (
                    self._dropped_ranges_before + self._publisher.dropped_sequences(self.ref.uid)
                )[-64:]
            ],
        )
        # Whatever the sprite echoed of a delivered secret never reaches the API server.
        return self.redactor.value(self.status.to_patch())  # type: ignore[no-any-return]


__all__ = ["RunRecorder"]
