"""Driving Runs: one `RunDriver` per active Run (see `driver`), its parts, and its decisions."""

from lattice_operator.reconcilers.run.decisions import (
    FAILURE_CLASSES,
    OUTBOX_PATH,
    RESUME_PATH,
    phase_of,
    resume_digest,
    wrapped_command,
)
from lattice_operator.reconcilers.run.driver import RunDriver
from lattice_operator.reconcilers.run.reasons import EndReason, Reason

__all__ = [
    "FAILURE_CLASSES",
    "OUTBOX_PATH",
    "RESUME_PATH",
    "EndReason",
    "Reason",
    "RunDriver",
    "phase_of",
    "resume_digest",
    "wrapped_command",
]
