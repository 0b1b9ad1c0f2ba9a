"""The lifecycle receipt, as the contract's "Receipt Schema" defines it.

Every field is on the wire, including the required-but-nullable ones
(`sequence`, `parent_receipt_id`, `idempotency_key`, the harness ids,
`failure_class`, `retry_class`), which are written as `null` rather than left
out: use `LifecycleReceipt.to_wire()`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from lattice_operator.lifeloop.classes import FailureClass, RetryClass
from lattice_operator.lifeloop.vocabulary import (
    LifecycleEvent,
    PayloadPlacement,
    ReceiptStatus,
    SupportState,
)


def _id() -> Any:
    return Field(min_length=1, max_length=128)


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    def to_wire(self) -> dict[str, Any]:
        """The JSON-compatible dict, nullable fields included as null."""
        return self.model_dump(mode="json")


class PayloadReceipt(_Wire):
    """Which payload artifact was placed, and how."""

    payload_id: str = _id()
    payload_kind: str = _id()
    """Scoped by the receipt's client_id."""
    placement: PayloadPlacement
    status: ReceiptStatus
    byte_size: int = Field(ge=0)
    content_digest: str | None = None
    """Echoed from the negotiated payload; omitted from the wire when it had none."""

    def to_wire(self) -> dict[str, Any]:
        wire = super().to_wire()
        if wire["content_digest"] is None:
            del wire["content_digest"]
        return wire


class CapabilityDegradation(_Wire):
    """A capability whose support changed mid-session ("Mid-Session Degradation")."""

    event: Literal["capability.degraded"] = "capability.degraded"
    capability: str = Field(min_length=1, max_length=64)
    """The capability, for example `stdout_stream`."""
    previous_support: SupportState
    current_support: SupportState
    observed_at_epoch_s: int = Field(ge=0)
    evidence: str = Field(max_length=512)
    retry_class: RetryClass


class LifecycleReceipt(_Wire):
    """A bounded receipt for one lifecycle operation."""

    schema_version: Literal[1] = 1
    receipt_id: str = _id()
    """New and opaque for every emitted receipt."""
    idempotency_key: str | None = Field(max_length=128)
    """The replay boundary, scoped by (client_id, adapter_id, idempotency_key)."""
    client_id: str = _id()
    adapter_id: str = _id()
    invocation_id: str = _id()
    """Shared by the receipts of one transport invocation."""
    event: LifecycleEvent
    event_id: str = _id()
    """The observed lifecycle invocation (stable across replays when derived)."""
    sequence: int | None = Field(ge=1)
    """Monotonic within the durable session scope; null when there is none."""
    parent_receipt_id: str | None = Field(max_length=128)
    """Null for a root receipt; the causing receipt otherwise."""
    integration_mode: str = _id()
    status: ReceiptStatus
    at_epoch_s: int = Field(ge=0)
    harness_session_id: str | None = Field(max_length=253)
    harness_run_id: str | None = Field(max_length=253)
    harness_task_id: str | None = Field(max_length=253)
    payload_receipts: list[PayloadReceipt] = Field(default_factory=list, max_length=16)
    telemetry_summary: dict[str, Any] = Field(default_factory=dict)
    capability_degradations: list[CapabilityDegradation] = Field(default_factory=list, max_length=8)
    failure_class: FailureClass | None
    retry_class: RetryClass | None
    warnings: list[str] = Field(default_factory=list, max_length=8)

    @model_validator(mode="after")
    def _consistent(self) -> LifecycleReceipt:
        if self.event is LifecycleEvent.RECEIPT_EMITTED:
            raise ValueError("receipt.emitted never produces a receipt of its own")
        if self.status is ReceiptStatus.FAILED and self.failure_class is None:
            raise ValueError("a failed receipt names its failure_class")
        if self.failure_class is not None and self.retry_class is None:
            raise ValueError("a receipt with a failure_class names its retry_class")
        return self

    def to_wire(self) -> dict[str, Any]:
        wire = super().to_wire()
        wire["payload_receipts"] = [p.to_wire() for p in self.payload_receipts]
        return wire


__all__ = ["CapabilityDegradation", "LifecycleReceipt", "PayloadReceipt"]
