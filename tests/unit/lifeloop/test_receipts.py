"""The receipt model: every contract field, nullable ones present, the contract's guards."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from lattice_operator.lifeloop import (
    FailureClass,
    LifecycleEvent,
    LifecycleReceipt,
    PayloadReceipt,
    ReceiptStatus,
    RetryClass,
)

CONTRACT_FIELDS = {
    "schema_version",
    "receipt_id",
    "idempotency_key",
    "client_id",
    "adapter_id",
    "invocation_id",
    "event",
    "event_id",
    "sequence",
    "parent_receipt_id",
    "integration_mode",
    "status",
    "at_epoch_s",
    "harness_session_id",
    "harness_run_id",
    "harness_task_id",
    "payload_receipts",
    "telemetry_summary",
    "capability_degradations",
    "failure_class",
    "retry_class",
    "warnings",
}


def minimal(**changes: Any) -> LifecycleReceipt:
    fields: dict[str, Any] = {
        "receipt_id": "lfr-1",
        "idempotency_key": None,
        "client_id": "lattice",
        "adapter_id": "sprites",
        "invocation_id": "inv-1",
        "event": "session.started",
        "event_id": "evt-1",
        "sequence": None,
        "parent_receipt_id": None,
        "integration_mode": "launcher_wrapper",
        "status": "observed",
        "at_epoch_s": 1778100000,
        "harness_session_id": None,
        "harness_run_id": None,
        "harness_task_id": None,
        "failure_class": None,
        "retry_class": None,
    }
    fields.update(changes)
    return LifecycleReceipt(**fields)


def test_the_wire_form_has_every_contract_field_even_when_null() -> None:
    wire = minimal().to_wire()
    assert set(wire) == CONTRACT_FIELDS
    for field in (
        "sequence",
        "parent_receipt_id",
        "failure_class",
        "harness_task_id",
        "idempotency_key",
        "retry_class",
    ):
        assert field in wire
        assert wire[field] is None
    assert json.loads(json.dumps(wire))["schema_version"] == 1


@pytest.mark.parametrize(
    "field",
    [
        "sequence",
        "parent_receipt_id",
        "failure_class",
        "harness_task_id",
        "idempotency_key",
        "harness_session_id",
        "harness_run_id",
        "retry_class",
    ],
)
def test_nullable_fields_are_still_required(field: str) -> None:
    fields = minimal().model_dump()
    del fields[field]
    with pytest.raises(ValidationError):
        LifecycleReceipt(**fields)


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(ValidationError):
        LifecycleReceipt.model_validate({**minimal().model_dump(), "extra_field": 1})


def test_receipt_emitted_never_has_a_receipt() -> None:
    with pytest.raises(ValidationError, match=r"receipt\.emitted"):
        minimal(event=LifecycleEvent.RECEIPT_EMITTED)


def test_a_failed_receipt_names_its_failure_and_retry_class() -> None:
    with pytest.raises(ValidationError):
        minimal(status=ReceiptStatus.FAILED)
    with pytest.raises(ValidationError):
        minimal(status=ReceiptStatus.FAILED, failure_class=FailureClass.TIMEOUT)
    receipt = minimal(
        status="failed", failure_class="timeout", retry_class="safe_retry", sequence=3
    )
    assert receipt.to_wire()["failure_class"] == "timeout"
    assert receipt.retry_class is RetryClass.SAFE_RETRY


def test_payload_receipts_omit_an_absent_digest() -> None:
    payload = PayloadReceipt(
        payload_id="pay-1",
        payload_kind="instruction_frame",
        placement="pre_prompt_frame",
        status="delivered",
        byte_size=1200,
    )
    wire = minimal(payload_receipts=[payload]).to_wire()
    assert "content_digest" not in wire["payload_receipts"][0]
    with_digest = payload.model_copy(update={"content_digest": "sha256:ab"})
    assert with_digest.to_wire()["content_digest"] == "sha256:ab"
