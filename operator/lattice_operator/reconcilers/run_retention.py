"""Which finished Runs to delete: past their TTL, or beyond the per-Sprite history limit.

Finished Runs would otherwise live forever and fill etcd on a busy cluster. Pure: decided from
the Runs' claims kopf keeps in memory (one index, no API reads), like Jobs'
`ttlSecondsAfterFinished` and CronJobs' history limits. Runs an Intent created are left to
their Intent (deleted with it through their ownerReference).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from lattice_operator.reconcilers.sprite_claims import DONE, RunClaim


@dataclass(frozen=True)
class Expired:
    namespace: str
    name: str
    uid: str
    why: str


def expired_runs(
    claims: Mapping[tuple[str, str], Iterable[RunClaim]], *, now: datetime, history_limit: int
) -> list[Expired]:
    """The finished Runs to delete now, by (namespace, Sprite) of their claims."""
    found: list[Expired] = []
    for (namespace, sprite), entries in claims.items():
        finished = sorted(
            (c for c in entries if c.phase in DONE and not c.from_intent),
            key=lambda c: (c.finished or c.created or now, c.name),
            reverse=True,
        )
        for rank, claim in enumerate(finished):
            due = (
                claim.finished + timedelta(seconds=claim.ttl)
                if claim.ttl is not None and claim.finished is not None
                else None
            )
            if due is not None and now >= due:
                why = f"ttlSecondsAfterFinished ({claim.ttl}) elapsed"
                found.append(Expired(namespace, claim.name, claim.uid, why))
                continue
            if history_limit and rank >= history_limit:
                why = f"beyond the {history_limit} finished Runs kept for Sprite {sprite}"
                found.append(Expired(namespace, claim.name, claim.uid, why))
    return found


__all__ = ["Expired", "expired_runs"]
