"""The hub: fan-out, resumption with Last-Event-ID, gaps, snapshots, slow subscribers."""

from __future__ import annotations

from datetime import UTC, datetime

from lattice_operator.stream.envelope import StreamEvent, Subject
from lattice_operator.stream.hub import CUT_OFF, EventHub

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def event(name: str, phase: str = "Running", namespace: str = "a") -> StreamEvent:
    return StreamEvent(
        type="run.output",
        ts=NOW,
        trace_id="t",
        run_id=name,
        payload={"namespace": namespace, "name": name, "phase": phase},
        subject=Subject(namespace=namespace, resource="runs", name=name),
    )


def everything(_: StreamEvent) -> bool:
    return True


def drain(sub: object) -> list[tuple[int, StreamEvent]]:
    queue = sub.queue  # type: ignore[attr-defined]
    out = []
    while not queue.empty():
        out.append(queue.get_nowait())
    return out


def test_every_subscriber_gets_what_it_may_see_in_order() -> None:
    hub = EventHub()
    mine, _ = hub.subscribe(allow=everything, last_event_id=None, now=NOW)
    only_b, _ = hub.subscribe(
        allow=lambda e: e.subject is not None and e.subject.namespace == "b",
        last_event_id=None,
        now=NOW,
    )
    ids = [hub.publish(event(f"r{i}", namespace="ab"[i % 2])) for i in range(4)]
    assert [i for i, _ in drain(mine)] == ids
    assert [e.run_id for _, e in drain(only_b)] == ["r1", "r3"]


def test_a_resumed_subscriber_gets_exactly_what_it_missed() -> None:
    hub = EventHub(buffer=100)
    ids = [hub.publish(event(f"r{i}")) for i in range(10)]
    _, backlog = hub.subscribe(allow=everything, last_event_id=ids[6], now=NOW)
    assert [i for i, _ in backlog] == ids[7:]
    _, none = hub.subscribe(allow=everything, last_event_id=ids[-1], now=NOW)
    assert none == []


def test_a_subscriber_further_behind_than_the_buffer_is_told_of_the_gap() -> None:
    hub = EventHub(buffer=3)
    ids = [hub.publish(event(f"r{i}")) for i in range(10)]
    _, backlog = hub.subscribe(allow=everything, last_event_id=ids[2], now=NOW)
    gap_id, gap = backlog[0]
    assert gap_id == ids[6]  # the last id it can no longer have
    assert gap.type == "gap"
    assert gap.payload["missed_from"] == ids[3]
    assert gap.payload["missed_to"] == ids[6]
    assert [i for i, _ in backlog[1:]] == ids[7:]


def test_a_new_subscriber_starts_from_the_latest_state_of_each_object() -> None:
    hub = EventHub()
    hub.publish(event("r1", "Starting"))
    latest = hub.publish(event("r1", "Running"))
    hub.publish(event("r2", "Running"))
    hub.publish(event("r2", "Deleted"))
    _, backlog = hub.subscribe(allow=everything, last_event_id=None, now=NOW)
    assert [(i, e.run_id, e.payload["phase"]) for i, e in backlog] == [(latest, "r1", "Running")]


def test_a_subscriber_that_stops_reading_is_cut_off_and_the_others_go_on() -> None:
    hub = EventHub(buffer=50, queue=10)
    stalled, _ = hub.subscribe(allow=everything, last_event_id=None, now=NOW)
    reader, _ = hub.subscribe(allow=everything, last_event_id=None, now=NOW)
    for i in range(1000):
        hub.publish(event(f"r{i % 7}"))
        if i % 5 == 0:
            drain(reader)
    assert stalled.dropped
    assert not reader.dropped
    assert hub.subscribers == 1
    assert hub.cut_off == 1
    # What it held was released: only the wake-up marker is left.
    left = drain(stalled)
    assert [i for i, _ in left] == [CUT_OFF]
    # The hub's own memory is its buffer and the snapshot of live objects.
    assert len(hub._buffer) == 50
    assert len(hub._latest) == 7
