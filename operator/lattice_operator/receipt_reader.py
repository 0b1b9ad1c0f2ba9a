"""Reading receipts back from the Events the operator posted (the inverse of `builders`).

Pure over Event listings, so that `lattice logs --receipts` and the cluster MCP tools trust
and parse receipts the same way.
"""

from __future__ import annotations

import json
from typing import Any

from lattice_operator.labels import (
    RECEIPT_ANNOTATION,
    RECEIPTS_ANNOTATION,
    REPORTING_CONTROLLER,
    RUN_UID_LABEL,
)


def receipt_event_params(run: dict[str, Any]) -> dict[str, str]:
    """List parameters for the receipt Events of exactly this Run: by its uid, not its name,
    so a Run deleted and created again under the same name never shows the old one's."""
    return {"labelSelector": f"{RUN_UID_LABEL}={run['metadata']['uid']}"}


def receipts_from_events(
    listing: dict[str, Any], *, instance: str | None = None
) -> tuple[list[dict[str, Any]], int]:
    """The receipts carried by a listing of Events, in sequence order, and how many Events
    carried receipts but were not trusted: not reported by the operator's controller (or by
    the given instance), or not well-formed receipts. Anyone allowed to post Events can copy
    our annotations; only the operator's own count. A receipt found twice (the same batch
    posted again under another grouping) is read once."""
    receipts: dict[str, dict[str, Any]] = {}
    untrusted = 0
    for item in listing.get("items", []):
        found = event_receipts(item)
        if found == []:
            continue  # a notice, not a receipt
        ours = item.get("reportingController") == REPORTING_CONTROLLER and (
            instance is None or item.get("reportingInstance") == instance
        )
        if found is None or not ours:
            untrusted += 1
            continue
        for receipt in found:
            receipt["reporting_instance"] = str(item.get("reportingInstance") or "")
            receipts.setdefault(receipt["receipt_id"], receipt)
    ordered = sorted(receipts.values(), key=lambda r: (r["sequence"] or 0, r["receipt_id"]))
    return ordered, untrusted


def event_receipts(item: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The receipts one Event carries: one (`RECEIPT_ANNOTATION`) or several
    (`RECEIPTS_ANNOTATION`, `runs.receipts_per_event`), whole and in order; [] for an Event
    that carries none (a notice); None when what it carries is not well-formed (a batch is
    well-formed whole or not at all). Who posted it is the caller's to check."""
    annotations = (item.get("metadata") or {}).get("annotations") or {}
    if RECEIPT_ANNOTATION in annotations:
        texts: list[object] = [annotations[RECEIPT_ANNOTATION]]
    elif RECEIPTS_ANNOTATION in annotations:
        texts = _batch(annotations[RECEIPTS_ANNOTATION])
    else:
        return []
    found = [r for r in map(_well_formed_receipt, texts) if r is not None]
    return found if found and len(found) == len(texts) else None


def _batch(text: object) -> list[object]:
    """The receipts of a batch's JSON list ([] when it is not a list: untrusted)."""
    try:
        value = json.loads(str(text))
    except (json.JSONDecodeError, RecursionError):
        return []
    return list(value) if isinstance(value, list) else []


def _well_formed_receipt(text: object) -> dict[str, Any] | None:
    if isinstance(text, dict):
        value: object = text
    else:
        try:
            value = json.loads(str(text))
        except (json.JSONDecodeError, RecursionError):
            return None
    if not isinstance(value, dict):
        return None
    sequence = value.get("sequence")
    if sequence is not None and (not isinstance(sequence, int) or isinstance(sequence, bool)):
        return None
    required = ("receipt_id", "event", "status")
    if not all(isinstance(value.get(k), str) for k in required):
        return None
    value.setdefault("sequence", None)
    return value


def dropped_receipts(run: dict[str, Any]) -> int:
    """Receipts the operator did not post as Events (the per-Run rate limit), from the status."""
    receipts = (run.get("status") or {}).get("receipts") or {}
    return int(receipts.get("eventsDropped") or 0)


__all__ = [
    "dropped_receipts",
    "event_receipts",
    "receipt_event_params",
    "receipts_from_events",
]
