"""Pure builders of child manifests: an Event for a receipt (and, later, a Run for an Intent)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lattice_operator.lifeloop.receipts import LifecycleReceipt

RECEIPT_ANNOTATION = "lattice.dev/receipt"
RUN_UID_LABEL = "lattice.dev/run-uid"
NOTE_CHARS = 1024


@dataclass(frozen=True)
class ObjectRef:
    """Enough of an object to point an Event at it."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str

    def to_wire(self) -> dict[str, str]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
        }


def camel_reason(event: str) -> str:
    """`session.started` → `SessionStarted`; `receipt.gap_detected` → `ReceiptGapDetected`."""
    return "".join(part.capitalize() for chunk in event.split(".") for part in chunk.split("_"))


def receipt_event_name(regarding: ObjectRef, receipt: LifecycleReceipt) -> str:
    """Deterministic per receipt, so a replayed publish is an AlreadyExists, never a twin."""
    seq = f"{receipt.sequence:06d}" if receipt.sequence is not None else "x"
    tail = receipt.receipt_id.replace("_", "-").lower()[-12:].strip("-")
    return f"{regarding.name[:200]}.r{seq}-{tail}"


def receipt_note(receipt: LifecycleReceipt) -> str:
    parts = [f"#{receipt.sequence}" if receipt.sequence is not None else "#-", receipt.event]
    parts.append(receipt.status)
    if receipt.failure_class is not None:
        parts.append(f"failure={receipt.failure_class} retry={receipt.retry_class}")
    for change in receipt.capability_degradations:
        parts.append(f"{change.capability}: {change.previous_support}→{change.current_support}")
    phase = receipt.telemetry_summary.get("phase")
    if isinstance(phase, str):
        parts.append(f"phase={phase}")
    parts.append(f"receipt={receipt.receipt_id}")
    return " ".join(parts)[:NOTE_CHARS]


def receipt_event(
    regarding: ObjectRef,
    receipt: LifecycleReceipt,
    *,
    now: datetime,
    controller: str,
    instance: str,
) -> dict[str, Any]:
    """An events.k8s.io/v1 Event carrying one receipt (its identifiers in annotations)."""
    annotations = {
        "lattice.dev/receipt-id": receipt.receipt_id,
        "lattice.dev/event-id": receipt.event_id,
        "lattice.dev/invocation-id": receipt.invocation_id,
        "lattice.dev/sequence": "" if receipt.sequence is None else str(receipt.sequence),
        "lattice.dev/failure-class": receipt.failure_class or "",
        "lattice.dev/retry-class": receipt.retry_class or "",
        RECEIPT_ANNOTATION: json.dumps(receipt.to_wire(), separators=(",", ":"), sort_keys=True),
    }
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {
            "name": receipt_event_name(regarding, receipt),
            "namespace": regarding.namespace,
            "labels": {RUN_UID_LABEL: regarding.uid},
            "annotations": annotations,
        },
        "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": controller,
        "reportingInstance": instance[:128],
        "action": str(receipt.event)[:128],
        "reason": camel_reason(receipt.event),
        "regarding": regarding.to_wire(),
        "note": receipt_note(receipt),
        "type": "Warning" if receipt.failure_class is not None else "Normal",
    }


__all__ = [
    "RECEIPT_ANNOTATION",
    "RUN_UID_LABEL",
    "ObjectRef",
    "camel_reason",
    "receipt_event",
    "receipt_event_name",
    "receipt_note",
]
