"""The Run status the sprite's events make, in three parts (this module names them all):

- `status`: the schema, `RunEventsStatus` (the Run CRD embeds it);
- `reducer`: committed events folded into it (`Projector`, `reduce`, `fold`, ...);
- `budget`: its byte cap (`fit_to_budget`, `status_size`).
"""

from __future__ import annotations

from lattice_operator.protocol.budget import STATUS_BUDGET_BYTES, fit_to_budget, status_size
from lattice_operator.protocol.reducer import (
    Projector,
    fold,
    record_violation,
    reduce,
    resolve_action_request,
)
from lattice_operator.protocol.status import (
    MAX_ACTION_REQUESTS,
    MAX_ARTIFACTS,
    MAX_PHASES,
    ActionRequestStatus,
    ArtifactStatus,
    CompletionStatus,
    ErrorStatus,
    EventCounts,
    PhaseStatus,
    ProgressStatus,
    ProposalStatus,
    RecentEvent,
    RunEventsStatus,
    WaitingStatus,
)

__all__ = [
    "MAX_ACTION_REQUESTS",
    "MAX_ARTIFACTS",
    "MAX_PHASES",
    "STATUS_BUDGET_BYTES",
    "ActionRequestStatus",
    "ArtifactStatus",
    "CompletionStatus",
    "ErrorStatus",
    "EventCounts",
    "PhaseStatus",
    "ProgressStatus",
    "Projector",
    "ProposalStatus",
    "RecentEvent",
    "RunEventsStatus",
    "WaitingStatus",
    "fit_to_budget",
    "fold",
    "record_violation",
    "reduce",
    "resolve_action_request",
    "status_size",
]
