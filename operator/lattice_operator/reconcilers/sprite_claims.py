"""One active Run per Sprite: the sprite's outbox and workspace are shared, so Runs queue.

Runs that hold a session (Starting, Running, Waiting, Resuming) keep the sprite; among
those still Pending, the oldest goes first. Pure: decided from the Runs kopf has in memory.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

IN_SESSION = frozenset({"Starting", "Running", "Waiting", "Resuming"})
DONE = frozenset({"Succeeded", "Failed", "Canceled"})


@dataclass(frozen=True)
class RunClaim:
    """A Run's claim on its Sprite."""

    uid: str
    name: str
    created: datetime | None
    phase: str
    finished: datetime | None = None
    """status.completionTime, once the Run is done."""
    ttl: int | None = None
    """spec.ttlSecondsAfterFinished."""
    from_intent: bool = False
    """An Intent is its controller (it goes with the Intent, not by retention)."""


def holder(claims: Iterable[RunClaim], me: str) -> RunClaim | None:
    """The Run that has (or gets) the sprite before the Run `me`; None when `me` may go."""
    active = [c for c in claims if c.phase not in DONE]
    in_session = sorted((c for c in active if c.phase in IN_SESSION), key=_order)
    if any(c.uid == me for c in in_session):
        return None
    if in_session:
        return in_session[0]
    pending = sorted(active, key=_order)
    if not pending or pending[0].uid == me:
        return None
    return pending[0]


def next_in_line(claims: Iterable[RunClaim]) -> RunClaim | None:
    """The Run that goes next on a Sprite nobody holds (None while one holds it): the one a
    Run's end should wake, rather than every Run queued behind it."""
    active = [c for c in claims if c.phase not in DONE]
    if any(c.phase in IN_SESSION for c in active):
        return None
    return min(active, key=_order, default=None)


def _order(claim: RunClaim) -> tuple[float, str]:
    return (claim.created.timestamp() if claim.created else 0.0, claim.name)
