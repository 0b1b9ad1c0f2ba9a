"""The Lease rules of lattice_operator.leadership, with candidates on clocks of their own and
an in-memory Lease with the API server's optimistic concurrency (resourceVersion)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lattice_operator.leadership import (
    ElectionTimings,
    LeaderElection,
    LeaseRecord,
    Write,
    label_patch,
    leader_label_patches,
)
from tests.support.clock import FakeClock

TIMINGS = ElectionTimings(lease_duration=15, renew_deadline=10, retry_period=2)


@dataclass
class FakeLease:
    """One Lease object: a read returns its version; a write of an older version is a 409."""

    record: LeaseRecord | None = None
    version: int = 0
    writes: list[str] = field(default_factory=list)

    def read(self) -> tuple[LeaseRecord | None, int]:
        return self.record, self.version

    def write(self, write: Write, read_version: int) -> bool:
        if write.create and self.record is not None:
            return False  # AlreadyExists
        if not write.create and read_version != self.version:
            return False  # Conflict
        self.record, self.version = write.record, self.version + 1
        self.writes.append(write.record.holder)
        return True


def attempt(election: LeaderElection, lease: FakeLease) -> bool:
    """What the wiring does once: read, plan, write, report."""
    record, version = lease.read()
    write = election.plan(record)
    if write is None or not lease.write(write, version):
        return False
    election.written(write)
    return True


def candidate(name: str, clock: FakeClock) -> LeaderElection:
    return LeaderElection(name, TIMINGS, clock)


def test_the_first_candidate_creates_the_lease_and_leads() -> None:
    clock, lease = FakeClock(), FakeLease()
    a = candidate("pod-a", clock)
    assert attempt(a, lease)
    assert a.is_leader
    assert lease.record is not None
    assert lease.record.holder == "pod-a"
    assert lease.record.duration_seconds == 15
    assert lease.record.transitions == 0
    assert lease.record.acquire_time == lease.record.renew_time == clock.now()


def test_renewing_keeps_the_acquire_time_and_the_transitions() -> None:
    clock, lease = FakeClock(), FakeLease()
    a = candidate("pod-a", clock)
    attempt(a, lease)
    acquired = clock.now()
    for _ in range(5):
        clock.advance(2)
        assert attempt(a, lease)
    assert lease.record is not None
    assert lease.record.acquire_time == acquired
    assert lease.record.renew_time == clock.now()
    assert lease.record.transitions == 0
    assert not a.lost()


def test_a_standby_waits_while_the_leader_renews() -> None:
    clock_a, clock_b, lease = FakeClock(), FakeClock(), FakeLease()
    a, b = candidate("pod-a", clock_a), candidate("pod-b", clock_b)
    attempt(a, lease)
    for _ in range(30):  # a minute: four lease durations
        clock_a.advance(2)
        clock_b.advance(2)
        attempt(a, lease)
        assert not attempt(b, lease)
        assert b.observed is not None
        assert b.observed.holder == "pod-a"
    assert lease.writes.count("pod-b") == 0


def test_a_standby_takes_over_once_the_lease_has_not_changed_for_its_duration() -> None:
    clock_a, clock_b, lease = FakeClock(), FakeClock(), FakeLease()
    a, b = candidate("pod-a", clock_a), candidate("pod-b", clock_b)
    attempt(a, lease)
    assert not attempt(b, lease)  # b sees the record now: its 15 s start here
    clock_b.advance(14.9)
    assert not attempt(b, lease)
    clock_b.advance(0.2)
    assert attempt(b, lease)
    assert b.is_leader
    assert lease.record is not None
    assert (lease.record.holder, lease.record.transitions) == ("pod-b", 1)
    # The old leader learns it on its next renewal: someone else holds the Lease.
    clock_a.advance(2)
    assert not attempt(a, lease)
    assert not a.is_leader
    assert a.lost()


@pytest.mark.parametrize("skew", [timedelta(hours=-1), timedelta(hours=1), timedelta(days=3)])
def test_clock_skew_between_replicas_changes_nothing(skew: timedelta) -> None:
    """The record's times are the leader's wall clock; a standby only measures, on its own
    monotonic clock, how long the record has stayed the same."""
    clock_a = FakeClock()
    clock_b = FakeClock(start=datetime(2026, 1, 1, tzinfo=UTC) + skew)
    lease = FakeLease()
    a, b = candidate("pod-a", clock_a), candidate("pod-b", clock_b)
    attempt(a, lease)
    for _ in range(10):
        clock_a.advance(2)
        clock_b.advance(2)
        attempt(a, lease)
        assert not attempt(b, lease), "a renewed Lease looked expired to a skewed clock"
    clock_b.advance(15.1)  # a stopped renewing: b takes over after exactly one duration
    assert attempt(b, lease)


def test_a_conflicting_write_means_someone_else_won() -> None:
    clock, lease = FakeClock(), FakeLease()
    a, b = candidate("pod-a", clock), candidate("pod-b", clock)
    attempt(a, lease)
    lease.record = LeaseRecord(holder="", duration_seconds=1)  # released: free for all
    lease.version += 1
    record, version = lease.read()
    write_a, write_b = a.plan(record), b.plan(record)
    assert write_a is not None
    assert write_b is not None
    assert lease.write(write_b, version)  # b wrote first
    b.written(write_b)
    assert not lease.write(write_a, version)  # a's write is a 409: not written, not leading
    assert not attempt(a, lease)
    assert not a.is_leader
    assert b.is_leader


def test_two_candidates_creating_at_once_elect_one() -> None:
    clock, lease = FakeClock(), FakeLease()
    a, b = candidate("pod-a", clock), candidate("pod-b", clock)
    write_a, write_b = a.plan(None), b.plan(None)
    assert write_a is not None
    assert write_b is not None
    assert write_a.create
    assert lease.write(write_a, 0)
    assert not lease.write(write_b, 0)  # AlreadyExists
    a.written(write_a)
    assert not attempt(b, lease)
    assert [a.is_leader, b.is_leader] == [True, False]


def test_the_leader_gives_up_when_renewals_fail_past_the_deadline() -> None:
    clock, lease = FakeClock(), FakeLease()
    a = candidate("pod-a", clock)
    attempt(a, lease)
    clock.advance(10)
    assert not a.lost()  # exactly at the deadline: still ours
    clock.advance(0.1)
    assert a.lost()  # and still 4.9 s before a standby may take over (15 s)


def test_releasing_lets_a_standby_take_over_at_once() -> None:
    clock_a, clock_b, lease = FakeClock(), FakeClock(), FakeLease()
    a, b = candidate("pod-a", clock_a), candidate("pod-b", clock_b)
    attempt(a, lease)
    assert not attempt(b, lease)
    record = a.release()
    assert record is not None
    assert (record.holder, record.duration_seconds, record.transitions) == ("", 1, 0)
    assert lease.write(Write(record, create=False), lease.version)
    a.released(record)
    assert not a.is_leader
    assert not a.lost()
    assert attempt(b, lease)  # no waiting: the Lease has no holder
    assert lease.record is not None
    assert (lease.record.holder, lease.record.transitions) == ("pod-b", 1)


def test_a_restarted_leader_with_the_same_identity_keeps_its_lease() -> None:
    """A container restarted in the same Pod (same name) renews the Lease it held."""
    clock, lease = FakeClock(), FakeLease()
    attempt(candidate("pod-a", clock), lease)
    clock.advance(3)
    again = candidate("pod-a", clock)
    assert attempt(again, lease)
    assert lease.record is not None
    assert lease.record.transitions == 0


def test_only_a_holder_releases() -> None:
    clock, lease = FakeClock(), FakeLease()
    a, b = candidate("pod-a", clock), candidate("pod-b", clock)
    attempt(a, lease)
    attempt(b, lease)
    assert b.release() is None


def test_record_round_trips_through_the_lease_spec() -> None:
    when = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)
    record = LeaseRecord("pod-a", 15, when, when + timedelta(seconds=2), 7)
    spec = record.to_spec()
    assert spec == {
        "holderIdentity": "pod-a",
        "leaseDurationSeconds": 15,
        "leaseTransitions": 7,
        "acquireTime": "2026-03-04T05:06:07.891011Z",
        "renewTime": "2026-03-04T05:06:09.891011Z",
    }
    assert LeaseRecord.from_spec(spec) == record
    assert LeaseRecord.from_spec({}) == LeaseRecord()


@pytest.mark.parametrize(
    ("timings", "message"),
    [
        ({"lease_duration": 10, "renew_deadline": 10}, "lease_duration must be greater"),
        ({"renew_deadline": 2, "retry_period": 2}, "renew_deadline must be greater than 1.2"),
        ({"retry_period": 0}, "must be positive"),
        ({"lease_duration": 0.8, "renew_deadline": 0.5, "retry_period": 0.1}, "at least 1 s"),
    ],
)
def test_timings_that_cannot_work_are_refused(timings: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ElectionTimings(**timings)


def test_a_candidate_needs_an_identity() -> None:
    with pytest.raises(ValueError, match="identity"):
        LeaderElection("", TIMINGS, FakeClock())


def _pod(name: str, leader: bool = False, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"app": "x"}}
    if leader:
        meta["labels"][LABEL] = "true"
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


LABEL = "lattice.dev/leader"
ON = {"metadata": {"labels": {LABEL: "true"}}}
OFF = {"metadata": {"labels": {LABEL: None}}}


def test_the_leader_labels_itself_and_unlabels_the_others() -> None:
    pods = [_pod("a"), _pod("b", leader=True), _pod("c", leader=True)]
    assert leader_label_patches(LABEL, "a", pods) == [("a", ON), ("b", OFF), ("c", OFF)]


def test_nothing_to_do_when_only_the_leader_carries_the_label() -> None:
    assert leader_label_patches(LABEL, "a", [_pod("a", leader=True), _pod("b")]) == []


def test_a_leader_missing_from_the_carriers_is_labelled() -> None:
    # The wiring lists only the Pods carrying the label.
    assert leader_label_patches(LABEL, "a", [_pod("b", leader=True)]) == [("a", ON), ("b", OFF)]
    assert leader_label_patches(LABEL, "a", []) == [("a", ON)]


def test_a_pod_being_deleted_keeps_its_label() -> None:
    assert leader_label_patches(LABEL, "a", [_pod("b", leader=True, deleting=True)]) == [("a", ON)]


def test_a_label_with_another_value_is_not_the_leaders() -> None:
    pod = _pod("b")
    pod["metadata"]["labels"][LABEL] = "false"
    assert leader_label_patches(LABEL, "a", [pod]) == [("a", ON)]
    assert label_patch(LABEL, leading=False) == OFF
