"""The receipt ledger: sequence, causal chaining, idempotency and gap detection for one Run.

One ledger per Run (the harness session, in the contract's words): it hands
out `sequence` numbers that never repeat or go back, groups the receipts of
one operator action under one `invocation_id` and chains them with
`parent_receipt_id`, and remembers recent idempotency keys, scoped by
(client_id, adapter_id, idempotency_key): the same key with the same content
returns the earlier receipt unchanged, the same key with other content is a
`state_conflict`. All of it lives in `LedgerState`, small enough to persist
in the Run's status, so a restarted operator continues the sequence and
still recognises replays.

Loss is evidence, never repaired: `audit` compares the sequence with the
receipts actually published (for example as Kubernetes Events) and emits one
`receipt.gap_detected` per missing range. For that to work, persist the
ledger state *before* publishing the receipts it produced: a crash then loses
publications (detected as a gap) rather than reusing sequence numbers.

Ids come from an injectable `IdFactory` (default: lowercase ULIDs with the
contract fixtures' hyphenated prefixes, `lfr-`, `inv-`) and time from an
injected `Clock`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field
from ulid import ULID

from lattice_operator.clock import Clock
from lattice_operator.lifeloop.classes import FailureClass, RetryClass
from lattice_operator.lifeloop.errors import ReceiptRequestError
from lattice_operator.lifeloop.receipts import (
    CapabilityDegradation,
    LifecycleReceipt,
    PayloadReceipt,
)
from lattice_operator.lifeloop.vocabulary import IntegrationMode, LifecycleEvent, ReceiptStatus
from lattice_operator.modeling import ApiModel

IDEMPOTENCY_MEMORY = 32
"""Idempotency keys remembered (and persisted) per ledger, most recent first out last."""


class IdFactory(Protocol):
    """Where new opaque ids come from."""

    def new_id(self, prefix: str) -> str:
        """A new unique id starting with `prefix-`."""
        ...


class UlidIds:
    """Lowercase ULIDs: `lfr-01k…` (sortable by creation time, valid in Kubernetes names)."""

    def new_id(self, prefix: str) -> str:
        return f"{prefix}-{str(ULID()).lower()}"


class IdempotencyRecord(ApiModel):
    """What is needed to return an earlier receipt again, byte for byte."""

    client_id: str = Field(max_length=128)
    adapter_id: str = Field(max_length=128)
    key: str = Field(max_length=128)
    """The idempotency key."""
    content_digest: str = Field(max_length=80)
    """Digest of the request's content."""
    receipt_id: str = Field(max_length=128)
    invocation_id: str = Field(max_length=128)
    sequence: int | None = None
    parent_receipt_id: str | None = Field(default=None, max_length=128)
    at_epoch_s: int = Field(ge=0)


class LedgerState(ApiModel):
    """The ledger's durable state (persist it with the Run's status)."""

    sequence: int = Field(default=0, ge=0)
    """The last sequence number handed out (0: none yet)."""
    idempotency: list[IdempotencyRecord] = Field(
        default_factory=list, max_length=IDEMPOTENCY_MEMORY
    )
    """The most recent idempotency keys, oldest first."""


class ReceiptRequest(BaseModel):
    """The content of a receipt to emit; the ledger adds ids, sequence, chaining and time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    event: LifecycleEvent
    event_id: str = Field(min_length=1, max_length=128)
    status: ReceiptStatus
    idempotency_key: str | None = Field(default=None, max_length=128)
    harness_session_id: str | None = None
    harness_run_id: str | None = None
    harness_task_id: str | None = None
    payload_receipts: tuple[PayloadReceipt, ...] = ()
    telemetry_summary: dict[str, Any] = Field(default_factory=dict)
    capability_degradations: tuple[CapabilityDegradation, ...] = ()
    failure_class: FailureClass | None = None
    retry_class: RetryClass | None = None
    """Defaults to the failure class's default retry class."""
    warnings: tuple[str, ...] = ()

    def content_digest(self) -> str:
        """Digest of everything in the request (what an idempotent replay must repeat)."""
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class Invocation:
    """One operator action: its receipts share an invocation id and chain parent → child."""

    def __init__(self, invocation_id: str) -> None:
        self.invocation_id = invocation_id
        self.last_receipt_id: str | None = None
        self.receipts: list[LifecycleReceipt] = []


class ReceiptLedger:
    """Receipts for one durable session scope (a Run)."""

    def __init__(
        self,
        *,
        client_id: str,
        adapter_id: str,
        integration_mode: IntegrationMode,
        clock: Clock,
        ids: IdFactory | None = None,
        state: LedgerState | None = None,
    ) -> None:
        self.client_id = client_id
        self.adapter_id = adapter_id
        self.integration_mode = integration_mode
        self._clock = clock
        self._ids = ids or UlidIds()
        state = state or LedgerState()
        self._sequence = state.sequence
        self._records: dict[tuple[str, str, str], IdempotencyRecord] = {
            (r.client_id, r.adapter_id, r.key): r for r in state.idempotency
        }

    @property
    def state(self) -> LedgerState:
        """The state to persist."""
        return LedgerState(sequence=self._sequence, idempotency=list(self._records.values()))

    def begin(self) -> Invocation:
        """Start an invocation (one operator action)."""
        return Invocation(self._ids.new_id("inv"))

    def emit(self, request: ReceiptRequest, invocation: Invocation) -> LifecycleReceipt:
        """The receipt for `request`: new, or the earlier one for an identical replay."""
        if request.event is LifecycleEvent.RECEIPT_EMITTED:
            raise ReceiptRequestError("receipt.emitted must never produce a receipt of its own")
        digest = request.content_digest()
        scope = (self.client_id, self.adapter_id, request.idempotency_key or "")
        record = self._records.get(scope) if request.idempotency_key else None
        if record is not None:
            if record.content_digest == digest:
                receipt = self._build(
                    request,
                    receipt_id=record.receipt_id,
                    invocation_id=record.invocation_id,
                    sequence=record.sequence,
                    parent=record.parent_receipt_id,
                    at=record.at_epoch_s,
                )
                invocation.last_receipt_id = receipt.receipt_id
                invocation.receipts.append(receipt)
                return receipt
            request = request.model_copy(
                update={
                    "idempotency_key": None,
                    "status": ReceiptStatus.FAILED,
                    "failure_class": FailureClass.STATE_CONFLICT,
                    "retry_class": None,
                    "warnings": (
                        *request.warnings,
                        f"idempotency key {request.idempotency_key} was used for different "
                        f"content by receipt {record.receipt_id}",
                    )[-8:],
                }
            )
        self._sequence += 1
        receipt = self._build(
            request,
            receipt_id=self._ids.new_id("lfr"),
            invocation_id=invocation.invocation_id,
            sequence=self._sequence,
            parent=invocation.last_receipt_id,
            at=int(self._clock.now().timestamp()),
        )
        if request.idempotency_key:
            self._remember(scope, digest, receipt)
        invocation.last_receipt_id = receipt.receipt_id
        invocation.receipts.append(receipt)
        return receipt

    def audit(
        self, published: Iterable[int], *, since: int = 1, event_id: str | None = None
    ) -> list[LifecycleReceipt]:
        """`receipt.gap_detected` for each range of sequence numbers from `since` on that was
        handed out but is not in `published`.

        Published numbers beyond the ledger's (a state persisted before receipts it did
        not record) move the sequence forward, so numbers are never reused.
        """
        seen = {n for n in published if n >= since}
        if seen and max(seen) > self._sequence:
            self._sequence = max(seen)
        missing = [n for n in range(max(since, 1), self._sequence + 1) if n not in seen]
        ranges: list[tuple[int, int]] = []
        for n in missing:
            if ranges and ranges[-1][1] == n - 1:
                ranges[-1] = (ranges[-1][0], n)
            else:
                ranges.append((n, n))
        if not ranges:
            return []
        invocation = self.begin()
        for first, last in ranges:
            self.emit(
                ReceiptRequest(
                    event=LifecycleEvent.RECEIPT_GAP_DETECTED,
                    event_id=event_id or self._ids.new_id("evt"),
                    status=ReceiptStatus.OBSERVED,
                    telemetry_summary={"missing_from": first, "missing_to": last},
                    warnings=(f"receipts {first}..{last} were not published; not reconstructed",),
                ),
                invocation,
            )
        return invocation.receipts

    def _build(
        self,
        request: ReceiptRequest,
        *,
        receipt_id: str,
        invocation_id: str,
        sequence: int | None,
        parent: str | None,
        at: int,
    ) -> LifecycleReceipt:
        retry = request.retry_class
        if retry is None and request.failure_class is not None:
            retry = request.failure_class.default_retry
        return LifecycleReceipt(
            receipt_id=receipt_id,
            idempotency_key=request.idempotency_key,
            client_id=self.client_id,
            adapter_id=self.adapter_id,
            invocation_id=invocation_id,
            event=request.event,
            event_id=request.event_id,
            sequence=sequence,
            parent_receipt_id=parent,
            integration_mode=self.integration_mode.value,
            status=request.status,
            at_epoch_s=at,
            harness_session_id=request.harness_session_id,
            harness_run_id=request.harness_run_id,
            harness_task_id=request.harness_task_id,
            payload_receipts=list(request.payload_receipts),
            telemetry_summary=dict(request.telemetry_summary),
            capability_degradations=list(request.capability_degradations),
            failure_class=request.failure_class,
            retry_class=retry,
            warnings=list(request.warnings),
        )

    def _remember(
        self, scope: tuple[str, str, str], digest: str, receipt: LifecycleReceipt
    ) -> None:
        self._records.pop(scope, None)
        self._records[scope] = IdempotencyRecord(
            client_id=scope[0],
            adapter_id=scope[1],
            key=scope[2],
            content_digest=digest,
            receipt_id=receipt.receipt_id,
            invocation_id=receipt.invocation_id,
            sequence=receipt.sequence,
            parent_receipt_id=receipt.parent_receipt_id,
            at_epoch_s=receipt.at_epoch_s,
        )
        while len(self._records) > IDEMPOTENCY_MEMORY:
            del self._records[next(iter(self._records))]


__all__ = [
    "IDEMPOTENCY_MEMORY",
    "IdFactory",
    "IdempotencyRecord",
    "Invocation",
    "LedgerState",
    "ReceiptLedger",
    "ReceiptRequest",
    "UlidIds",
]
