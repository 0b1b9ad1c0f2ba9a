"""Pure builders of child manifests: an Event for a receipt (and, later, a Run for an Intent)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.api.v1alpha1 import Intent, Run
from lattice_operator.api.v1alpha1.intent import SpriteCreateParams
from lattice_operator.api.v1alpha1.resources import API_VERSION
from lattice_operator.api.v1alpha1.run import RunTemplate
from lattice_operator.labels import (
    RECEIPT_ANNOTATION,
    RECEIPTS_ANNOTATION,
    REPORTING_CONTROLLER,
    RUN_UID_LABEL,
)
from lattice_operator.lifeloop.receipts import LifecycleReceipt
from lattice_operator.protocol.projection import ProposalStatus

NOTE_CHARS = 1024


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
    return _receipt_envelope(
        regarding,
        name=receipt_event_name(regarding, receipt),
        annotations=annotations,
        last=receipt,
        note=receipt_note(receipt),
        warning=receipt.failure_class is not None,
        now=now,
        controller=controller,
        instance=instance,
    )


def receipts_event_name(regarding: ObjectRef, receipts: Sequence[LifecycleReceipt]) -> str:
    """Deterministic per batch (its first and last sequence, its last receipt's id), so a
    replayed publish of the same batch is an AlreadyExists, never a twin."""
    first, last = receipts[0], receipts[-1]
    seq = "-".join(f"{r.sequence:06d}" if r.sequence is not None else "x" for r in (first, last))
    tail = last.receipt_id.replace("_", "-").lower()[-12:].strip("-")
    return f"{regarding.name[:200]}.r{seq}-{tail}"


def receipts_event(
    regarding: ObjectRef,
    receipts: Sequence[LifecycleReceipt],
    *,
    now: datetime,
    controller: str,
    instance: str,
    wire: Sequence[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One events.k8s.io/v1 Event carrying several receipts of one status write, whole and in
    order (`RECEIPTS_ANNOTATION`); its reason and action are the last receipt's, its note
    lists them all. One receipt is posted as `receipt_event` has it, the form every release
    reads. `wire`: the receipts' `to_wire()` forms when the caller has made them already."""
    if len(receipts) == 1:
        return receipt_event(
            regarding, receipts[0], now=now, controller=controller, instance=instance
        )
    last = receipts[-1]
    if wire is None:
        wire = [r.to_wire() for r in receipts]
    numbers = [r.sequence for r in receipts if r.sequence is not None]
    annotations = {
        "lattice.dev/sequences": f"{min(numbers)}-{max(numbers)}" if numbers else "",
        RECEIPTS_ANNOTATION: json.dumps(wire, separators=(",", ":"), sort_keys=True),
    }
    return _receipt_envelope(
        regarding,
        name=receipts_event_name(regarding, receipts),
        annotations=annotations,
        last=last,
        note="; ".join(receipt_note(r) for r in receipts)[:NOTE_CHARS],
        warning=any(r.failure_class is not None for r in receipts),
        now=now,
        controller=controller,
        instance=instance,
    )


def _receipt_envelope(
    regarding: ObjectRef,
    *,
    name: str,
    annotations: dict[str, str],
    last: LifecycleReceipt,
    note: str,
    warning: bool,
    now: datetime,
    controller: str,
    instance: str,
) -> dict[str, Any]:
    """The Event around one receipt or a batch: named for them, labelled with the Run's uid,
    its reason and action the (last) receipt's."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {
            "name": name,
            "namespace": regarding.namespace,
            "labels": {RUN_UID_LABEL: regarding.uid},
            "annotations": annotations,
        },
        "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": controller,
        "reportingInstance": instance[:128],
        "action": str(last.event)[:128],
        "reason": camel_reason(last.event),
        "regarding": regarding.to_wire(),
        "note": note,
        "type": "Warning" if warning else "Normal",
    }


def notice_event(
    regarding: ObjectRef, *, reason: str, note: str, now: datetime, controller: str, instance: str
) -> dict[str, Any]:
    """A plain events.k8s.io/v1 Event (a notification, not a receipt)."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"generateName": f"{regarding.name[:200]}-", "namespace": regarding.namespace},
        "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": controller,
        "reportingInstance": instance[:128],
        "action": reason[:128],
        "reason": reason,
        "regarding": regarding.to_wire(),
        "note": note[:NOTE_CHARS],
        "type": "Normal",
    }


INTENT_LABEL = "lattice.dev/intent"


def _owned_by(intent: Intent) -> dict[str, Any]:
    return {
        "apiVersion": intent.api_version,
        "kind": "Intent",
        "name": intent.metadata.name,
        "uid": intent.metadata.uid or "",
        "controller": True,
        "blockOwnerDeletion": True,
    }


RUN_SUFFIX = "-run"


def run_name(intent: Intent) -> str:
    """Deterministic, so a retried creation finds the Run instead of making a second one."""
    return f"{intent.metadata.name[:249]}{RUN_SUFFIX}"


def may_be_an_intents_run(name: str) -> bool:
    """Whether a Run of this name can be the Run an Intent reads (every Intent's Run, and any
    Run made first under that name, has the name `run_name` gives)."""
    return name.endswith(RUN_SUFFIX)


def run_for_intent(intent: Intent, template: RunTemplate) -> dict[str, Any]:
    """The Run that executes an approved Intent (owned by it: deleted with it)."""
    spec = template.to_wire()
    spec["intentRef"] = {"name": intent.metadata.name}
    return {
        "apiVersion": API_VERSION,
        "kind": "Run",
        "metadata": {
            "name": run_name(intent),
            "namespace": intent.metadata.namespace,
            "labels": {INTENT_LABEL: intent.metadata.name[:63]},
            "ownerReferences": [_owned_by(intent)],
        },
        "spec": spec,
    }


def sprite_for_intent(intent: Intent, params: SpriteCreateParams) -> dict[str, Any]:
    """The Sprite a sprite_create Intent creates (not owned: a sprite outlives the Intent)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "Sprite",
        "metadata": {
            "name": params.name,
            "namespace": intent.metadata.namespace,
            "labels": {INTENT_LABEL: intent.metadata.name[:63]},
        },
        "spec": params.spec.to_wire(),
    }


PROPOSED_BY_RUN = "lattice.dev/proposed-by-run"


def environment_change_intent(
    run: Run, sprite_name: str, proposal: ProposalStatus
) -> dict[str, Any]:
    """An ENVIRONMENT_PROPOSAL turned into an Intent (proposedBy sprite): a sprite proposes,
    the pipeline decides. Deterministic name: the same proposal never makes two."""
    failure = proposal.observed_failure or {}
    params: dict[str, Any] = {
        "runRef": {"name": run.metadata.name},
        "spriteRef": {"name": run.spec.sprite_ref.name},
        "observedFailure": {
            "phase": str(failure.get("phase") or "unknown")[:253],
            **(
                {"exit_code": failure["exit_code"]}
                if isinstance(failure.get("exit_code"), int)
                else {}
            ),
            **(
                {"stderr_hint": str(failure["stderr_hint"])[:4096]}
                if failure.get("stderr_hint")
                else {}
            ),
        },
        "suggestedAdjustment": {
            "type": proposal.adjustment.value,
            "details": proposal.details or {},
        },
        "confidence": proposal.confidence,
        "evidence": [e for e in proposal.evidence if e][:32],
        "scope": proposal.scope,
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "Intent",
        "metadata": {
            "name": f"{run.metadata.name[:230]}-env-{proposal.line}",
            "namespace": run.metadata.namespace,
            "labels": {PROPOSED_BY_RUN: run.metadata.name[:63]},
            "ownerReferences": [
                {
                    "apiVersion": run.api_version,
                    "kind": "Run",
                    "name": run.metadata.name,
                    "uid": run.metadata.uid or "",
                }
            ],
        },
        "spec": {
            "kind": "environment_change",
            "summary": f"sprite {sprite_name} proposes {proposal.adjustment.value}"[:1024],
            "proposedBy": {"type": "sprite", "name": sprite_name},
            "subject": {"type": "run", "ref": run.metadata.name},
            "params": {"environmentChange": params},
        },
    }


__all__ = [
    "INTENT_LABEL",
    "PROPOSED_BY_RUN",
    "RECEIPTS_ANNOTATION",
    "RECEIPT_ANNOTATION",
    "REPORTING_CONTROLLER",
    "RUN_UID_LABEL",
    "ObjectRef",
    "camel_reason",
    "environment_change_intent",
    "may_be_an_intents_run",
    "notice_event",
    "receipt_event",
    "receipt_event_name",
    "receipt_note",
    "receipts_event",
    "receipts_event_name",
    "run_for_intent",
    "run_name",
    "sprite_for_intent",
]
