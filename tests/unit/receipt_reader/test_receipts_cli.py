"""`lattice logs RUN --receipts`: the Run's own Events (by uid), and what was dropped."""

from __future__ import annotations

import json
from typing import Any

from lattice_operator.builders import RECEIPT_ANNOTATION, RECEIPTS_ANNOTATION, RUN_UID_LABEL
from lattice_operator.receipt_reader import (
    dropped_receipts,
    receipt_event_params,
    receipts_from_events,
)


def _event(sequence: int, receipt_id: str) -> dict[str, Any]:
    receipt = {"sequence": sequence, "receipt_id": receipt_id, "event": "x", "status": "observed"}
    return {
        "metadata": {"annotations": {RECEIPT_ANNOTATION: json.dumps(receipt)}},
        "reportingController": "lattice.dev/operator",
    }


def test_events_are_selected_by_the_runs_uid_not_its_name() -> None:
    run = {"metadata": {"name": "fix-17", "uid": "0b1c-new"}}
    assert receipt_event_params(run) == {"labelSelector": f"{RUN_UID_LABEL}=0b1c-new"}


def test_receipts_come_in_sequence_order_and_notices_are_skipped() -> None:
    listing = {
        "items": [
            _event(3, "c"),
            {"metadata": {"annotations": {"other": "1"}}},  # e.g. a NotifyUser notice
            _event(1, "a"),
            {"metadata": {}},
            _event(2, "b"),
        ]
    }
    receipts, untrusted = receipts_from_events(listing)
    assert [r["receipt_id"] for r in receipts] == ["a", "b", "c"]
    assert untrusted == 0


def test_dropped_receipts_are_read_from_the_status() -> None:
    assert dropped_receipts({}) == 0
    assert dropped_receipts({"status": {"receipts": {"state": {}}}}) == 0
    assert dropped_receipts({"status": {"receipts": {"eventsDropped": 7}}}) == 7


def _batch(*receipts: object, controller: str = "lattice.dev/operator") -> dict[str, Any]:
    return {
        "metadata": {"annotations": {RECEIPTS_ANNOTATION: json.dumps(list(receipts))}},
        "reportingController": controller,
    }


def _receipt(sequence: int, receipt_id: str) -> dict[str, Any]:
    return {"sequence": sequence, "receipt_id": receipt_id, "event": "x", "status": "observed"}


def test_receipts_in_batches_are_read_with_single_ones_each_once() -> None:
    listing = {
        "items": [
            _batch(_receipt(3, "c"), _receipt(4, "d")),
            _event(1, "a"),
            _batch(_receipt(2, "b"), _receipt(3, "c")),  # "c" posted again in another grouping
        ]
    }
    receipts, untrusted = receipts_from_events(listing)
    assert [r["receipt_id"] for r in receipts] == ["a", "b", "c", "d"]
    assert untrusted == 0


def test_a_batch_is_trusted_whole_or_not_at_all() -> None:
    listing = {
        "items": [
            _batch(_receipt(1, "a"), {"sequence": "x", "receipt_id": "bad"}),
            _batch(_receipt(2, "b"), controller="someone/else"),
            _batch(),  # an empty list carries nothing to trust
            {"metadata": {"annotations": {RECEIPTS_ANNOTATION: "{not json"}},
             "reportingController": "lattice.dev/operator"},
            _batch(_receipt(3, "c")),
        ]
    }  # fmt: skip
    receipts, untrusted = receipts_from_events(listing)
    assert [r["receipt_id"] for r in receipts] == ["c"]
    assert untrusted == 4


def test_a_deeply_nested_batch_is_untrusted_and_a_large_one_is_read_whole() -> None:
    deep = "[" * 100_000 + "]" * 100_000  # past the JSON parser's recursion limit
    large = json.dumps([_receipt(n, f"r{n:05d}") for n in range(1, 2_001)])
    listing = {
        "items": [
            {"metadata": {"annotations": {RECEIPTS_ANNOTATION: deep}},
             "reportingController": "lattice.dev/operator"},
            {"metadata": {"annotations": {RECEIPTS_ANNOTATION: large}},
             "reportingController": "lattice.dev/operator"},
        ]
    }  # fmt: skip
    receipts, untrusted = receipts_from_events(listing)
    assert [r["sequence"] for r in receipts] == list(range(1, 2_001))
    assert untrusted == 1
