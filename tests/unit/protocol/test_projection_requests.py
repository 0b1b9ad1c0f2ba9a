"""Past the cap on listed action requests, resolved ones are dropped before pending ones."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lattice_operator.protocol.events import decode
from lattice_operator.protocol.merge import CommittedEvent
from lattice_operator.protocol.projection import MAX_ACTION_REQUESTS, Projector
from tests.support.streams import ev

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)


def committed(raw: bytes, line: int) -> CommittedEvent:
    return CommittedEvent(line, line * 100, 1, raw, decode(raw))


@pytest.mark.parametrize("restored", [False, True])
def test_past_the_cap_resolved_requests_are_dropped_before_pending_ones(restored: bool) -> None:
    request = ev("ACTION_REQUEST", {"action": "NOTIFY_USER", "blocking": False})
    projector = Projector()
    for line in range(MAX_ACTION_REQUESTS):
        projector.apply(committed(request, line))
    projector.resolve_action_request("req-5", answered=True, at=NOW)
    projector.resolve_action_request("req-9", answered=False, at=NOW)
    if restored:
        projector = Projector(projector.snapshot())
    for line in range(MAX_ACTION_REQUESTS, MAX_ACTION_REQUESTS + 3):
        projector.apply(committed(request, line))
    ids = [r.request_id for r in projector.snapshot().action_requests]
    # req-5 and req-9 go first, then the oldest pending one.
    assert ids == [f"req-{n}" for n in range(MAX_ACTION_REQUESTS + 3) if n not in (0, 5, 9)]
    projector.resolve_action_request("req-1", answered=True, at=NOW)
    projector.apply(committed(request, MAX_ACTION_REQUESTS + 3))
    assert "req-1" not in [r.request_id for r in projector.snapshot().action_requests]
