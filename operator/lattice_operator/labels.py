"""Names of the labels and annotations on receipt Events, shared by who writes them
(`builders`) and who reads them back (`receipt_reader`, the CLI). A module of its own, with no
imports, so that a reader does not load the CRD models to learn four strings."""

from __future__ import annotations

RECEIPT_ANNOTATION = "lattice.dev/receipt"
# Several receipts in one Event (`runs.receipts_per_event` > 1): a JSON list, in order.
RECEIPTS_ANNOTATION = "lattice.dev/receipts"
# The reportingController of every Event the operator posts: readers trust no other.
REPORTING_CONTROLLER = "lattice.dev/operator"
RUN_UID_LABEL = "lattice.dev/run-uid"

__all__ = ["RECEIPTS_ANNOTATION", "RECEIPT_ANNOTATION", "REPORTING_CONTROLLER", "RUN_UID_LABEL"]
