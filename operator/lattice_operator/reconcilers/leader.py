"""Which replica is active under kopf peering, from the peering object's status."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any


def _alive(peer: Mapping[str, Any], now: datetime) -> bool:
    seen = peer.get("lastseen")
    if not isinstance(seen, str):
        return False
    try:
        last = datetime.fromisoformat(seen.replace("Z", "+00:00"))
    except ValueError:
        return False
    return last + timedelta(seconds=int(peer.get("lifetime", 60))) > now


def peering_active(peers: Mapping[str, Any], priority: int, now: datetime) -> bool:
    """kopf's rule for the replica of `priority`: it works while no live peer has a higher
    priority and no other live peer has the same one (equal priorities pause everyone).

    `peers` is the peering object's `status` (peer id → priority, lifetime, lastseen); this
    replica's own entry must be there and alive, else it has not joined yet.
    """
    priorities = [
        int(p.get("priority", 0))
        for p in peers.values()
        if isinstance(p, Mapping) and _alive(p, now)
    ]
    return (
        priority in priorities and max(priorities) == priority and priorities.count(priority) == 1
    )


__all__ = ["peering_active"]
