"""Fan-out of stream events with a bounded replay buffer and bounded subscribers.

Every published event gets the next id. The last `buffer` events are kept so a subscriber
that reconnects with `Last-Event-ID` gets what it missed; one that fell further behind gets a
`gap` event first (what it missed is gone), then the buffer. A new subscriber first gets the
latest event of each object still there (a snapshot to start a view from). Each subscriber
has a queue of `queue` events: a subscriber that stops reading is cut off when its queue is
full, so it can neither slow the others nor grow the operator's memory.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from datetime import datetime

from lattice_operator.stream.envelope import StreamEvent, Subject

Entry = tuple[int, StreamEvent]
CUT_OFF = 0
"""The id of the entry a subscriber finds when it was cut off (nothing else has id 0)."""
_SNAPSHOT_KINDS = frozenset({"intent.updated", "run.output", "sprite.updated"})


class Subscription:
    """One subscriber's queue; `dropped` is set when the hub cut it off."""

    def __init__(self, hub: EventHub, size: int, allow: Callable[[StreamEvent], bool]) -> None:
        self._hub = hub
        self.queue: asyncio.Queue[Entry] = asyncio.Queue(maxsize=size)
        self.allow = allow
        self.dropped = False

    async def next(self) -> Entry:
        return await self.queue.get()

    def close(self) -> None:
        self._hub.unsubscribe(self)


class EventHub:
    """Publishes to every subscriber; keeps the last `buffer` events for resumption."""

    def __init__(self, *, buffer: int = 10_000, queue: int = 1_000) -> None:
        self._buffer: deque[Entry] = deque(maxlen=buffer)
        self._queue = queue
        self._next = 1
        self._subscribers: set[Subscription] = set()
        self._latest: dict[Subject, Entry] = {}
        self.published = 0
        self.cut_off = 0

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    @property
    def last_id(self) -> int:
        return self._next - 1

    def publish(self, event: StreamEvent) -> int:
        event_id = self._next
        self._next += 1
        self._buffer.append((event_id, event))
        self.published += 1
        subject = event.subject
        if subject is not None and event.type in _SNAPSHOT_KINDS:
            if event.payload.get("phase") == "Deleted":
                self._latest.pop(subject, None)
            else:
                self._latest[subject] = (event_id, event)
        for sub in list(self._subscribers):
            if not sub.allow(event):
                continue
            try:
                sub.queue.put_nowait((event_id, event))
            except asyncio.QueueFull:
                self._cut_off(sub, event)
        return event_id

    def _cut_off(self, sub: Subscription, cause: StreamEvent) -> None:
        sub.dropped = True
        self._subscribers.discard(sub)
        self.cut_off += 1
        # Free what it held, and wake a reader that is waiting: it finds CUT_OFF and ends.
        while not sub.queue.empty():
            sub.queue.get_nowait()
        sub.queue.put_nowait((CUT_OFF, _cut_off_event(cause)))

    def subscribe(
        self,
        *,
        allow: Callable[[StreamEvent], bool],
        last_event_id: int | None,
        now: datetime,
    ) -> tuple[Subscription, list[Entry]]:
        """A new subscription and the events to send first (a resumption's backlog)."""
        sub = Subscription(self, self._queue, allow)
        self._subscribers.add(sub)
        backlog: list[Entry] = []
        if last_event_id is None:
            backlog = sorted(
                ((i, e.as_snapshot()) for i, e in self._latest.values() if allow(e)), key=_id
            )
        elif last_event_id < self.last_id:
            oldest = self._buffer[0][0] if self._buffer else self._next
            if last_event_id < oldest - 1:
                gap = StreamEvent(
                    type="gap",
                    ts=now,
                    trace_id="",
                    payload={
                        "missed_from": last_event_id + 1,
                        "missed_to": oldest - 1,
                        "reason": "the replay buffer no longer holds these events",
                    },
                )
                backlog.append((oldest - 1, gap))
            backlog.extend(e for e in self._buffer if e[0] > last_event_id and allow(e[1]))
        return sub, backlog

    def unsubscribe(self, sub: Subscription) -> None:
        self._subscribers.discard(sub)


def _id(entry: Entry) -> int:
    return entry[0]


def _cut_off_event(cause: StreamEvent) -> StreamEvent:
    return StreamEvent(
        type="gap",
        ts=cause.ts,
        trace_id="",
        payload={"reason": "cut off: this subscriber did not keep up"},
    )


__all__ = ["CUT_OFF", "Entry", "EventHub", "Subscription"]
