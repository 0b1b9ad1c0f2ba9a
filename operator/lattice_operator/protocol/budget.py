"""The status's byte budget: `RunEventsStatus` never serialises larger than its cap.

The reducer's caps (rings, clipped strings, small maps only) keep a status small;
`fit_to_budget` is the last line for a hostile stream that still pushes it over:
it drops the oldest entries, list by list, until the status fits.
"""

from __future__ import annotations

from typing import Any

from lattice_operator.protocol.status import RunEventsStatus

STATUS_BUDGET_BYTES = 64 * 1024
"""The projection never serialises (camelCase JSON) larger than this."""

# Trimmed in this order, oldest entries first; action requests last (pending ones matter).
_TRIM_ORDER = ("recent", "violations", "proposals", "errors", "artifacts", "phases")


def status_size(status: RunEventsStatus) -> int:
    """Bytes of the status as the API server stores it (camelCase JSON)."""
    return len(status.model_dump_json(by_alias=True))


def fit_to_budget(status: RunEventsStatus, budget: int) -> RunEventsStatus:
    """`status`, with the oldest list entries dropped until it serialises within `budget`."""
    if status_size(status) <= budget:
        return status
    status = status.model_copy(update={"trimmed": True}, deep=True)
    for name in _TRIM_ORDER:
        items: list[Any] = getattr(status, name)
        while items and status_size(status) > budget:
            del items[: (len(items) + 1) // 2]
    if status_size(status) > budget:
        for request in status.action_requests:
            if request.parameters:
                request.parameters, request.parameters_omitted = None, True
    requests = status.action_requests
    while requests and status_size(status) > budget:
        resolved = next((i for i, r in enumerate(requests) if r.state != "Pending"), 0)
        del requests[resolved]
    return status


__all__ = ["STATUS_BUDGET_BYTES", "fit_to_budget", "status_size"]
