"""Leader election on a coordination.k8s.io Lease, as client-go's leaderelection does it.

Pure: no I/O. The wiring (handlers/leader_election.py) reads the Lease, asks `plan` what to
write, writes it with optimistic concurrency (a 409 means someone else won: read again),
and reports an accepted write with `written`.

The rules are client-go's:
- A Lease is free when it has no holder, or when its record has not changed for its
  `leaseDurationSeconds` *as measured by this candidate's own monotonic clock since it last
  saw the record change*. The times written in the record are never compared with our clock,
  so clock skew between replicas cannot make a valid Lease look expired.
- The leader renews every retry period; if no renewal has succeeded for `renew_deadline`, it
  has lost the Lease and must stop at once (renew_deadline < lease_duration leaves the others
  a margin before they may take over).
- Taking a Lease from another holder (or a free one) counts one `leaseTransitions`.
- A clean shutdown releases the Lease (no holder, 1 s duration) so a standby takes over at once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from lattice_operator.clock import Clock

JITTER = 1.2
"""client-go's JitterFactor: attempts come every retry_period to retry_period * (1 + JITTER)."""


@dataclass(frozen=True)
class ElectionTimings:
    """controller-runtime's defaults: 15 s lease, 10 s renew deadline, 2 s retry period."""

    lease_duration: float = 15.0
    """Seconds a standby waits, after the Lease last changed, before it takes the Lease over."""
    renew_deadline: float = 10.0
    """Seconds the leader keeps trying to renew before it gives up (and exits)."""
    retry_period: float = 2.0
    """Seconds between attempts to acquire or renew."""

    def __post_init__(self) -> None:
        # client-go refuses the same combinations (NewLeaderElector).
        if min(self.lease_duration, self.renew_deadline, self.retry_period) <= 0:
            raise ValueError("lease_duration, renew_deadline and retry_period must be positive")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if self.renew_deadline <= JITTER * self.retry_period:
            raise ValueError(f"renew_deadline must be greater than {JITTER} x retry_period")
        if self.lease_duration < 1:
            raise ValueError("lease_duration must be at least 1 s (a Lease counts whole seconds)")


@dataclass(frozen=True)
class LeaseRecord:
    """The spec of a coordination.k8s.io/v1 Lease."""

    holder: str = ""
    duration_seconds: int = 0
    acquire_time: datetime | None = None
    renew_time: datetime | None = None
    transitions: int = 0

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> LeaseRecord:
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=_parse_time(spec.get("acquireTime")),
            renew_time=_parse_time(spec.get("renewTime")),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.holder or None,
            "leaseDurationSeconds": self.duration_seconds,
            "leaseTransitions": self.transitions,
        }
        if self.acquire_time is not None:
            spec["acquireTime"] = _format_time(self.acquire_time)
        if self.renew_time is not None:
            spec["renewTime"] = _format_time(self.renew_time)
        return spec


@dataclass(frozen=True)
class Write:
    """What to write: create the Lease, or replace the version we read."""

    record: LeaseRecord
    create: bool


class LeaderElection:
    """One candidate's view of one Lease."""

    def __init__(self, identity: str, timings: ElectionTimings, clock: Clock) -> None:
        if not identity:
            raise ValueError("a candidate needs a non-empty identity")
        self.identity = identity
        self.timings = timings
        self._clock = clock
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._renewed_at: float | None = None

    # -- what we know ---------------------------------------------------------------------
    @property
    def observed(self) -> LeaseRecord | None:
        return self._observed

    @property
    def is_leader(self) -> bool:
        """The last record we saw or wrote names us."""
        return self._observed is not None and self._observed.holder == self.identity

    def lease_valid(self) -> bool:
        """The observed record has a holder whose term has not run out on our clock."""
        if self._observed is None or not self._observed.holder:
            return False
        age = self._clock.monotonic() - self._observed_at
        return age < self._observed.duration_seconds

    def lost(self) -> bool:
        """We led, and either someone else now holds the Lease (our update conflicted with
        theirs) or no renewal has succeeded within the renew deadline: stop now."""
        if self._renewed_at is None:
            return False
        if not self.is_leader:
            return True
        return self._clock.monotonic() - self._renewed_at > self.timings.renew_deadline

    # -- one attempt ------------------------------------------------------------------------
    def plan(self, current: LeaseRecord | None) -> Write | None:
        """After reading the Lease (None: it does not exist), what to write, if anything."""
        now = self._clock.now()
        fresh = LeaseRecord(
            holder=self.identity,
            duration_seconds=max(1, round(self.timings.lease_duration)),
            acquire_time=now,
            renew_time=now,
        )
        if current is None:
            return Write(fresh, create=True)
        self._observe(current)
        if current.holder and current.holder != self.identity and self.lease_valid():
            return None  # held by someone else, still in its term
        if current.holder == self.identity:
            return Write(
                replace(fresh, acquire_time=current.acquire_time, transitions=current.transitions),
                create=False,
            )
        return Write(replace(fresh, transitions=current.transitions + 1), create=False)

    def written(self, write: Write) -> None:
        """Our write was accepted: we hold the Lease from now."""
        self._observe(write.record)
        self._renewed_at = self._clock.monotonic()

    def release(self) -> LeaseRecord | None:
        """The record that hands the Lease back (None if we do not hold it)."""
        if not self.is_leader or self._observed is None:
            return None
        now = self._clock.now()
        return LeaseRecord(
            holder="",
            duration_seconds=1,
            acquire_time=now,
            renew_time=now,
            transitions=self._observed.transitions,
        )

    def released(self, record: LeaseRecord) -> None:
        self._observe(record)
        self._renewed_at = None

    def _observe(self, record: LeaseRecord) -> None:
        if record != self._observed:
            self._observed = record
            self._observed_at = self._clock.monotonic()


def _parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _format_time(value: datetime) -> str:
    # metav1.MicroTime: RFC 3339 with microseconds, in UTC.
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


__all__ = ["JITTER", "ElectionTimings", "LeaderElection", "LeaseRecord", "Write"]
